// What one synthesis carries from step to step (see synthesis_state.hpp).

#include "synthesis_state.hpp"

#include <algorithm>
#include <limits>

#include "pulse/base/process.hpp"
#include "pulse/cost/memory.hpp"

namespace pulse::detail {

bool Memory::fits(const Timeline& t) const {
  for (std::size_t d = 0; d < room.size(); ++d) {
    if (t.devices[d].resident_peak > room[d]) return false;
  }
  return true;
}

bool Memory::fits(const std::vector<std::int64_t>& resident_peaks) const {
  for (std::size_t d = 0; d < room.size(); ++d) {
    if (resident_peaks[d] > room[d]) return false;
  }
  return true;
}

Memory memory_of(const ScheduleRequest& r) {
  Memory m;
  const int P = r.model->num_devices();
  const std::int64_t budget =
      r.activation_budget > 0 ? r.activation_budget : std::numeric_limits<std::int64_t>::max();
  for (int d = 0; d < P; ++d) {
    m.room.push_back(std::min(r.memory_capacity - r.static_bytes[d].total(), budget));
    m.as_static.push_back(r.memory_capacity - m.room.back());
  }
  const std::vector<int> all_of_them(P, r.num_microbatches);
  m.safe_cap = memory_inflight_limits(*r.model, m.as_static, r.memory_capacity, all_of_them);
  m.reach_cap = resident_inflight_limits(*r.model, m.as_static, r.memory_capacity, all_of_them);
  return m;
}

std::pair<std::int64_t, std::int64_t> footprint(const Timeline& t) {
  std::int64_t peak = 0, total = 0;
  for (const DeviceTimeline& d : t.devices) {
    peak = std::max(peak, d.resident_peak);
    total += d.resident_peak;
  }
  return {peak, total};
}

double iteration(const Timeline& t, const std::vector<double>& allreduce_s) {
  double end = t.makespan_s;
  for (std::size_t d = 0; d < allreduce_s.size() && d < t.devices.size(); ++d) {
    if (!t.devices[d].ops.empty())
      end = std::max(end, t.devices[d].ops.back().busy_until_s + allreduce_s[d]);
  }
  return end;
}

int compare(double x, double y) {
  return x < y * (1 - 1e-9) ? -1 : x > y * (1 + 1e-9) ? 1 : 0;
}

bool better(const Timeline& t, const Timeline& than, const std::vector<double>& allreduce_s) {
  if (const int c = compare(t.makespan_s, than.makespan_s); c != 0) return c < 0;
  const int c = compare(iteration(t, allreduce_s), iteration(than, allreduce_s));
  if (c != 0) return c < 0;
  return footprint(t) < footprint(than);
}

bool Best::offer(Schedule candidate, const ScheduleRequest& r, const Memory& mem, std::string how) {
  auto t = simulate(*r.model, candidate, r.num_microbatches, r.static_bytes, Peaks::rule_only);
  if (!t) return false;
  return offer(std::move(candidate), std::move(*t), r, mem, std::move(how));
}

bool Best::offer(Schedule candidate, Timeline replay, const ScheduleRequest& r, const Memory& mem,
                 std::string how) {
  if (!mem.fits(replay) || (have && !better(replay, timeline, r.allreduce_s))) return false;
  schedule = std::move(candidate);
  timeline = std::move(replay);
  method = std::move(how);
  have = true;
  return true;
}

void adopt(Best& best, ScheduleAnswer& a) {
  a.schedule = std::move(best.schedule);
  a.schedule.policy = best.method;
  a.timeline = std::move(best.timeline);
  a.method = best.method;
  a.makespan_s = a.timeline.makespan_s;
  // Not under 0: the bound's sums run in another order than the replay's, so where a
  // schedule meets it the two may differ in their last bit, either way.
  a.gap = std::max(0.0, a.makespan_s / a.lower_bound_s - 1);
  a.peak_activation_bytes = footprint(a.timeline).first;
}

Deadline::Deadline(double seconds) : seconds_(seconds), start_(thread_cpu_seconds()) {}

double Deadline::left() const {
  return seconds_ - (thread_cpu_seconds() - start_);
}

}  // namespace pulse::detail
