#include "pulse/plan/figures.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace pulse {

namespace {

// P2P bytes of one iteration by the link class they cross (both directions, all replicas).
std::map<std::string, std::int64_t> link_class_bytes(const PipelineModel& m, std::int64_t scale) {
  std::map<std::string, std::int64_t> by_class;
  for (const Transfer& t : m.transfers) {
    const DeviceId a = m.layout.device[t.from], b = m.layout.device[t.to];
    by_class[m.links[a][b].name] += t.forward.total() * scale;
    by_class[m.links[b][a].name] += t.backward.total() * scale;
  }
  return by_class;
}

}  // namespace

PlanComm comm_figures(const PipelineModel& model, const std::vector<AllReduce>& allreduce,
                      int num_microbatches, int dp) {
  const Bytes mb = model.bytes_per_microbatch();
  const std::int64_t scale = static_cast<std::int64_t>(num_microbatches) * dp;
  std::int64_t reduced = 0;
  for (const AllReduce& a : allreduce) reduced += 2 * static_cast<std::int64_t>(dp - 1) * a.bytes;
  PlanComm c;
  c.p2p_bytes_per_iteration = mb.total() * scale;
  c.skip_bytes_per_iteration = mb.skip * scale;
  c.activation_bytes_per_iteration = mb.activation * scale;
  c.carried_bytes_per_iteration = mb.carried * scale;
  c.p2p_bytes_per_microbatch_per_pipeline = mb;
  c.p2p_bytes_per_link_class = link_class_bytes(model, scale);
  c.allreduce_bytes_per_iteration = reduced;
  return c;
}

PlanPredicted predicted_figures(const Timeline& timeline, const Evaluation& evaluation,
                                std::int64_t capacity_bytes) {
  PlanPredicted p;
  std::vector<PlanDevicePrediction> devices;
  double exposed = 0;
  for (std::size_t d = 0; d < timeline.devices.size(); ++d) {
    const DeviceTimeline& t = timeline.devices[d];
    const AllReduce& a = evaluation.allreduce[d];
    exposed = std::max(exposed, a.start_s + a.seconds - timeline.makespan_s);
    PlanDevicePrediction x;
    x.device = static_cast<DeviceId>(d);
    x.compute_s = t.compute_s;
    x.send_s = t.send_s;
    x.idle_s = t.idle_s;
    x.allreduce_s = a.seconds;
    x.max_inflight = t.max_inflight;
    x.peak_memory_bytes = t.peak.total();
    x.capacity_bytes = capacity_bytes;
    x.memory = t.peak;
    devices.push_back(x);
    p.peak_memory_bytes.push_back(t.peak.total());
  }
  p.iteration_s = evaluation.iteration_s;
  p.samples_per_s = evaluation.samples_per_s;
  p.bubble_ratio = evaluation.bubble_ratio;
  p.pipeline_makespan_s = timeline.makespan_s;
  p.allreduce_exposed_s = std::max(0.0, exposed);
  p.devices = std::move(devices);
  return p;
}

namespace {

std::string gib(std::int64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30));
}

// The options among `names` the plan's user did not give, as "--a, --b or --c", or "" when
// all were given: a warning never suggests an option already given.
std::string not_given(const Plan& plan, std::vector<std::string> names) {
  const PlanGivenOptions& o = plan.options;
  const auto given = [&](const std::string& name) {
    if (name.rfind("--recompute", 0) == 0) return o.recompute.value_or("none") != "none";
    if (name == "--zero") return o.memory.zero_stage.has_value();
    if (name == "--activation-budget") {
      return o.activation_budget_bytes.has_value() || o.activation_budget_fraction.has_value();
    }
    if (name == "--headroom") return o.headroom.has_value();
    return false;
  };
  names.erase(std::remove_if(names.begin(), names.end(), given), names.end());
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return out;
}

}  // namespace

std::vector<std::string> plan_warnings(const Plan& plan) {
  std::vector<std::string> out;
  const PlanPredicted& x = plan.predicted;
  const PlanParallelism& par = plan.parallelism;
  const std::vector<PlanDevicePrediction> none;
  const std::vector<PlanDevicePrediction>& devices = x.devices ? *x.devices : none;
  if (x.bubble_ratio > kBubbleWarning) {
    int inflight = 0;
    for (const PlanDevicePrediction& d : devices)
      inflight = std::max(inflight, d.max_inflight.value_or(0));
    const std::string freeing = not_given(plan, {"--recompute auto", "--zero"});
    out.push_back(fmt::format(
        "bubble {:.1f}%: the devices idle more than half of the pipeline's time ({} "
        "microbatches of {} over pp {}, at most {} in flight on a device); {}more microbatches "
        "per replica or a smaller pp would fill it",
        100 * x.bubble_ratio, par.num_microbatches, par.microbatch_size, par.pp, inflight,
        freeing.empty() ? "" : "memory for more in flight (" + freeing + "), "));
  }
  bool one_each = par.pp > 1 && !devices.empty();
  std::string full;  // the devices above the line
  double most = 0;
  const PlanDevicePrediction* fullest = nullptr;
  for (const PlanDevicePrediction& d : devices) {
    one_each = one_each && d.max_inflight.value_or(0) == 1;
    if (!d.peak_memory_bytes || !d.capacity_bytes || *d.capacity_bytes <= 0) continue;
    const double used = static_cast<double>(*d.peak_memory_bytes) / *d.capacity_bytes;
    if (used <= kMemoryWarning) continue;
    full += fmt::format("{}{}", full.empty() ? "" : ", ", d.device);
    if (used > most) most = used, fullest = &d;
  }
  if (fullest) {
    const std::string freeing =
        not_given(plan, {"--recompute auto", "--zero", "--activation-budget", "--headroom"});
    out.push_back(fmt::format(
        "device(s) {} planned above {:.0f}% of usable memory, up to {:.1f}% ({} of {}): little "
        "room for the allocator's fragmentation or a larger input{}",
        full, 100 * kMemoryWarning, 100 * most, gib(*fullest->peak_memory_bytes),
        gib(*fullest->capacity_bytes), freeing.empty() ? "" : "; " + freeing + " leave more"));
  }
  if (one_each) {
    const std::string freeing = not_given(plan, {"--recompute", "--zero"});
    out.push_back(
        fmt::format("one microbatch in flight per device: at pp {} memory lets no device overlap "
                    "microbatches, so the pipeline runs as a relay{}",
                    par.pp, freeing.empty() ? "" : "; " + freeing + " frees memory"));
  }
  return out;
}

}  // namespace pulse
