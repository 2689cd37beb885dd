// Schedule synthesizer: the operation order on every device. Request in, answer out, both
// plain data. Engines, best result kept, each only replacing a longer schedule:
//   list          the V 1F1B list schedule (backward first, the round-trip minimum in
//                 flight; list_schedule.hpp): "the heuristic", always computed
//   list-search   a search over list-schedule policies (per-device preferences among op
//                 types, per-device in-flight limits), each candidate scored by replay
//                 (policy_search.cpp)
//   order-search  moves of single ops within each device's order (order_search.cpp)
//   exact-ilp     one disjunctive ILP on CBC over every operation, warm-started from the best
//                 known order; run when the instance is small, and then provably optimal
//                 (exact_ilp.cpp)
// and a lower bound from the one-machine relaxation of every device (or the exact ILP's
// proven bound, when larger), so the answer says how far from optimal it can be.
//
// Measured and dropped: a cyclic (modulo) ILP over one steady-state period, unrolled and
// replayed. Minimising the period pattern's latency starves the ramp-up (114 vs a bound of
// 105 on a uniform P=4, M=16 V, where list schedules reach 105), and at P=8 on SD2 CBC found
// no feasible pattern within 1000 nodes (20 s). See bench/bench_schedule.cpp.
// Every answer is replayed by the simulator and passes the independent schedule checker.
#pragma once

#include <string>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/base/result.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/simulate/simulate.hpp"
#include "pulse/base/defaults.hpp"
#include "pulse/base/solve_status.hpp"
#include "pulse/plan/strategy.hpp"

namespace pulse {

struct ScheduleRequest {
  const PipelineModel* model = nullptr;
  ScheduleFamily family = ScheduleFamily::synthesized;
  int num_microbatches = 1;
  std::vector<MemoryBreakdown> static_bytes;  ///< Per device.
  std::int64_t memory_capacity = 0;           ///< Usable bytes per device.
  bool split_backward = false;
  /// Deterministic work limit: branch-and-bound nodes per integer program.
  int max_nodes = kDefaultSolverNodes;
  /// Wall-clock safety limit for the whole synthesis, seconds. 0: no integer programs at
  /// all; the list schedule comes back with status "time_limit".
  double max_seconds = kDefaultSolverSeconds;
  /// The exact model is tried when the instance has at most this many operations.
  int exact_max_ops = 72;
  /// List schedules the policy search may try (a deterministic work limit).
  int max_evaluations = 400;
  /// Replays the order search may make (a deterministic work limit); 0 skips it.
  int max_order_evaluations = 2000;
  int seed = 1;
};

struct ScheduleAnswer {
  Schedule schedule;
  Timeline timeline;
  /// optimal (the schedule meets its lower bound), feasible (a search beat the heuristic,
  /// not proven optimal), heuristic (nothing beat the list schedule), fixed (a baseline's
  /// own schedule) or time_limit (the wall-clock safety limit stopped the search first).
  SolveStatus status = SolveStatus::heuristic;
  std::string method;      ///< "list", "list-search", "order-search" or "exact-ilp".
  std::string stopped_by;  ///< What ended the last integer program: "optimal", "node limit", ...
  double makespan_s = 0;
  double lower_bound_s = 0;
  double gap = 0;  ///< makespan / lower bound - 1.
  double heuristic_makespan_s = 0;
  int milp_solves = 0;
  int milp_nodes = 0;
  int list_evaluations = 0;   ///< List schedules the policy search tried.
  int order_evaluations = 0;  ///< Replays the order search made.
};

/// Synthesizes a schedule at least as short as the list schedule, never over the memory
/// capacity. Fails (infeasible) only when not even one microbatch in flight fits a device.
Result<ScheduleAnswer> synthesize_schedule(const ScheduleRequest& request);

}  // namespace pulse
