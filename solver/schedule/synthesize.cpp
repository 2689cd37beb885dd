// The schedule synthesizer: the heuristic list schedule, then a search over list-schedule
// policies, then the exact ILP when the instance is small; every candidate is replayed by the
// simulator and the shortest kept. See include/pulse/schedule/synthesize.hpp.

#include "pulse/schedule/synthesize.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "op_graph.hpp"
#include "pulse/base/units.hpp"
#include "exact_ilp.hpp"
#include "order_search.hpp"
#include "policy_search.hpp"
#include "pulse/schedule/list_schedule.hpp"
#include "pulse/cost/memory.hpp"

namespace pulse {

namespace {

using Clock = std::chrono::steady_clock;

// Op replays the order search may spend in all (evaluations times ops per replay).
constexpr long kOrderOpReplays = 1'500'000;

// The replay of `s`, if it stays within the memory rule.
std::optional<Timeline> replay_within_memory(const ScheduleRequest& r, const Schedule& s) {
  auto t = simulate(*r.model, s, r.num_microbatches, r.static_bytes);
  if (!t || !within_memory(*t, r.static_bytes, r.memory_capacity)) return std::nullopt;
  return std::move(*t);
}

struct Best {
  Schedule schedule;
  Timeline timeline;
  std::string method;
  bool have = false;

  // Keeps `candidate` if it replays within the memory rule and is strictly shorter.
  bool offer(Schedule candidate, const ScheduleRequest& r, std::string how) {
    auto t = replay_within_memory(r, candidate);
    if (!t) return false;
    if (have && t->makespan_s >= timeline.makespan_s * (1 - 1e-9)) return false;
    schedule = std::move(candidate);
    timeline = std::move(*t);
    method = std::move(how);
    have = true;
    return true;
  }
};

class Deadline {
 public:
  explicit Deadline(double seconds) : seconds_(seconds), start_(Clock::now()) {}
  double left() const {
    return seconds_ - std::chrono::duration<double>(Clock::now() - start_).count();
  }
  bool expired() const { return left() <= 0; }

 private:
  double seconds_;
  Clock::time_point start_;
};

Schedule first_list_schedule(const ScheduleRequest& r, const std::vector<int>& memory_cap) {
  std::vector<int> limits = default_inflight(r.model->layout, r.num_microbatches);
  for (std::size_t d = 0; d < limits.size(); ++d) limits[d] = std::min(limits[d], memory_cap[d]);
  return list_schedule(*r.model, r.num_microbatches, limits, r.split_backward,
                       ListPolicy::backward_first(r.model->layout.num_stages()));
}

// Moves the best schedule into the answer, with its makespan and its gap to the bound.
void adopt(Best& best, ScheduleAnswer& a) {
  a.schedule = std::move(best.schedule);
  a.schedule.policy = best.method;
  a.timeline = std::move(best.timeline);
  a.method = best.method;
  a.makespan_s = a.timeline.makespan_s;
  a.gap = a.makespan_s / a.lower_bound_s - 1;
}

// The baselines' own schedules: 1F1B is the heuristic list schedule itself; GPipe holds
// every microbatch in flight.
Result<ScheduleAnswer> fixed_schedule(const ScheduleRequest& r, const std::vector<int>& memory_cap,
                                      Best& best, ScheduleAnswer& a) {
  if (r.family == ScheduleFamily::gpipe) {
    for (int d = 0; d < r.model->num_devices(); ++d) {
      if (memory_cap[d] < r.num_microbatches) {
        return infeasible_error(fmt::format(
            "GPipe keeps all {} microbatches in flight; pipeline device {} has room for {}",
            r.num_microbatches, d, memory_cap[d]));
      }
    }
    best.have = false;
    if (!best.offer(gpipe_schedule(*r.model, r.num_microbatches, r.split_backward), r, "gpipe")) {
      return internal_error("the GPipe schedule did not replay");
    }
  } else {
    best.method = "1f1b";
  }
  adopt(best, a);
  a.status = SolveStatus::fixed;
  a.stopped_by = "not run";
  return a;
}

milp::Limits limits_for(const ScheduleRequest& r, const Deadline& deadline) {
  milp::Limits l;
  l.max_nodes = r.max_nodes;
  l.max_seconds = std::max(0.0, deadline.left());
  l.seed = r.seed;
  return l;
}

}  // namespace

Result<ScheduleAnswer> synthesize_schedule(const ScheduleRequest& r) {
  const Deadline deadline(r.max_seconds);
  std::vector<std::int64_t> static_totals;
  for (const MemoryBreakdown& m : r.static_bytes) static_totals.push_back(m.total());
  // Microbatches in flight that fit whatever the order (the heuristic stays within these),
  // and the most that any order within the memory rule can reach (searches go up to these,
  // checked by replay; the lower bound and the exact model use them).
  const std::vector<int> all_of_them(r.model->num_devices(), r.num_microbatches);
  const std::vector<int> memory_cap =
      memory_inflight_limits(*r.model, static_totals, r.memory_capacity, all_of_them);
  const std::vector<int> reach_cap =
      resident_inflight_limits(*r.model, static_totals, r.memory_capacity, all_of_them);
  for (int d = 0; d < r.model->num_devices(); ++d) {
    if (memory_cap[d] < 1) {
      return infeasible_error(
          fmt::format("pipeline device {} cannot hold one microbatch in "
                      "flight within {}",
                      d, format_bytes(r.memory_capacity)));
    }
  }
  // The heuristic: issue 2's V 1F1B list schedule (backward first, the round-trip minimum
  // in flight). Everything after it can only replace it with something shorter.
  Best best;
  if (!best.offer(first_list_schedule(r, memory_cap), r, "list")) {
    return internal_error("the list schedule did not replay");
  }
  ScheduleAnswer a;
  a.heuristic_makespan_s = best.timeline.makespan_s;
  const detail::OpGraph graph = detail::build_op_graph(*r.model, r.split_backward);
  a.lower_bound_s = detail::schedule_lower_bound(graph, r.num_microbatches, reach_cap);
  if (r.family != ScheduleFamily::synthesized) return fixed_schedule(r, memory_cap, best, a);
  auto at_bound = [&] { return best.timeline.makespan_s <= a.lower_bound_s * (1 + 1e-9); };
  bool out_of_time = r.max_seconds <= 0;

  // Policy search over list schedules.
  if (!out_of_time && !at_bound()) {
    std::vector<std::int64_t> free_bytes;
    for (std::int64_t s : static_totals) free_bytes.push_back(r.memory_capacity - s);
    detail::SearchInput search{
        r.num_microbatches,
        reach_cap,
        memory_cap,
        free_bytes,
        r.split_backward,
        r.max_evaluations,
        3,
        [&] { return deadline.expired(); },
        [&](const Schedule& s) { return replay_within_memory(r, s).has_value(); }};
    const detail::SearchResult found = detail::search_list_schedules(*r.model, search);
    a.list_evaluations = found.evaluations;
    if (found.found) best.offer(found.schedule, r, "list-search");
  }
  // Local search over explicit op orders, from the best so far. Replays cost in proportion
  // to the ops, so large instances get fewer of them (about half a second here at most).
  const long ops = static_cast<long>(graph.ops.size()) * r.num_microbatches;
  const int order_budget =
      static_cast<int>(std::min<long>(r.max_order_evaluations, kOrderOpReplays / ops));
  if (!out_of_time && !at_bound() && order_budget > 0 && !deadline.expired()) {
    detail::OrderSearchInput search{r.num_microbatches, r.static_bytes, r.memory_capacity,
                                    order_budget, [&] { return deadline.expired(); }};
    detail::OrderSearchResult found = detail::search_orders(*r.model, search, best.schedule);
    a.order_evaluations = found.evaluations;
    if (found.improved) best.offer(std::move(found.schedule), r, "order-search");
  }
  // The exact integer program, when the instance is small enough to prove optimality.
  const detail::EngineInput in{r.model, r.num_microbatches, reach_cap, r.split_backward};
  auto account = [&](const detail::EngineOutput& o) {
    ++a.milp_solves;
    a.milp_nodes += o.milp.nodes;
    a.stopped_by = o.milp.stopped_by;
    out_of_time = out_of_time || o.milp.stopped_by == "time limit";
  };
  // It limits in-flight counts, not bytes: run only where the two agree (memory binds the
  // same whatever the order), so that its optimum is optimal for the memory rule too.
  if (!out_of_time && !deadline.expired() && !at_bound() && reach_cap == memory_cap &&
      detail::exact_model_size(graph, r.num_microbatches) <= r.exact_max_ops) {
    const auto exact = detail::solve_exact(graph, in, best.timeline, limits_for(r, deadline));
    account(exact);
    if (exact.found) best.offer(exact.schedule, r, "exact-ilp");
    // The model's timing is the engine's only with blocking sends; then its proven bound is
    // a bound on every schedule and may beat the one-machine bound.
    if (!r.model->overlap_comm && exact.milp.bound > a.lower_bound_s) {
      a.lower_bound_s = std::min(exact.milp.bound, best.timeline.makespan_s);
    }
  }
  const bool proven = at_bound();
  adopt(best, a);
  if (proven) {
    a.status = SolveStatus::optimal;
  } else if (out_of_time || deadline.expired()) {
    a.status = SolveStatus::time_limit;
  } else {
    a.status = best.method == "list" ? SolveStatus::heuristic : SolveStatus::feasible;
  }
  if (a.milp_solves == 0) {
    a.stopped_by = out_of_time ? "time limit" : at_bound() ? "lower bound" : "not run";
  }
  return a;
}

}  // namespace pulse
