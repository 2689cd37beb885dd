// Schedule synthesizer: the operation order on every device. Request in, answer out, both
// plain data. Engines, best result kept, each only replacing a longer schedule:
//   list          the V 1F1B list schedule (backward first, the round-trip minimum in
//                 flight; list_schedule.hpp): "the heuristic", always computed
//   list-search   a search over list-schedule policies (per-device preferences among op
//                 types, per-device in-flight limits), each candidate scored by replay
//                 (policy_search.cpp)
//   zb-v, v-half, v-min, v-auto, dualpipev
//                 the published V schedules, on two-stage V layouts with a split backward:
//                 there the ladder (solver/schedule/ladder_search.hpp) takes the place of the
//                 families, the policy and the order search, with candidates the activation
//                 budget does not shape, so more memory never makes the answer slower
//   order-search  moves of single ops within each device's order (order_search.cpp)
//   exact-ilp     one disjunctive ILP on CBC over every operation, warm-started from the best
//                 known order; run when the instance is small, and then provably optimal
//                 (exact_ilp.cpp)
// and a lower bound from the one-machine relaxation of every device (or the exact ILP's
// proven bound, when larger), so the answer says how far from optimal it can be.
//
// Two objectives, in order: the makespan, then the peak activation memory (the largest
// device's residency under the memory rule, then their sum): of two schedules equally fast,
// the one holding less is kept (between the two, with data parallelism, the shorter
// iteration: the all-reduce after each device's last op). Memory is a budget: the capacity less the
// static state, capped per device by `activation_budget` when given.
//
// Measured and dropped: a cyclic (modulo) ILP over one steady-state period, unrolled and
// replayed. Minimising the period pattern's latency starves the ramp-up (114 vs a bound of
// 105 on a uniform P=4, M=16 V, where list schedules reach 105), and at P=8 on SD2 CBC found
// no feasible pattern within 1000 nodes (20 s). See bench/bench_schedule.cpp.
// Every answer is replayed by the simulator and passes the independent schedule checker.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pulse/base/defaults.hpp"
#include "pulse/base/result.hpp"
#include "pulse/base/solve_status.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/plan/strategy.hpp"
#include "pulse/schedule/published.hpp"
#include "pulse/schedule/schedule_memo.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

struct ScheduleRequest {
  const PipelineModel* model = nullptr;
  ScheduleFamily family = ScheduleFamily::synthesized;
  int num_microbatches = 1;
  std::vector<MemoryBreakdown> static_bytes;  ///< Per device.
  std::int64_t memory_capacity = 0;           ///< Usable bytes per device.
  /// Bytes each device's activations (and skip caches) may hold at most under the memory
  /// rule, below what the capacity leaves; 0: no cap beyond the capacity.
  std::int64_t activation_budget = 0;
  /// Points of the memory curve to compute after the answer (at most 3): the makespan the
  /// synthesizer reaches at 3/4, 1/2 and 1/3 of the answer's peak activation memory.
  int memory_curve_points = 0;
  /// Optional, per device: the data-parallel gradient all-reduce that starts when the
  /// device's last op ends (simulate/evaluate.hpp). Of two schedules equally short, the one
  /// whose iteration (the latest of those ends plus all-reduces, or the makespan) is shorter
  /// is kept, before memory decides.
  std::vector<double> allreduce_s;
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
  /// Search once more, with this effort, at 3/4 of the peak found and keep what is better
  /// (synthesize.cpp, probe_smaller_budget): the plan's own synthesis, not the tuner's screen.
  bool probe_smaller_budget = false;
  /// The caller weighs the searches' answer beside a published order that replaces it
  /// (ScheduleAnswer::searched): the compiler does where frozen encoders run in the step.
  /// Without it no `searched` is kept, and the probe above is left out where the published
  /// orders decide the answer whatever it finds (synthesize.cpp, published_decide).
  bool weighs_searched = true;
  /// What the job has synthesized already (schedule_memo.hpp); null: everything is computed.
  /// Not part of what is asked: answers with and without one are the same.
  ScheduleMemo* memo = nullptr;

  /// Every field, the model by its address and the memo too (the memo's keys compare the
  /// model by value and leave the memo out: solver/schedule/answer_memo.hpp).
  bool operator==(const ScheduleRequest&) const = default;
};

/// What a synthesis weighed before the published V orders (synthesize.cpp): its searches'
/// answer (peak activation memory and makespan) and the makespan and iteration of each
/// published order that fits its memory, in the order they are weighed. They decide whether
/// the full effort probes a smaller budget (synthesis_repeats).
struct SearchedFigures {
  struct Order {
    double makespan_s = 0;
    double iteration_s = 0;
    bool operator==(const Order&) const = default;
  };
  std::int64_t peak_activation_bytes = 0;
  double makespan_s = 0;
  std::vector<Order> orders;
  bool operator==(const SearchedFigures&) const = default;
};

/// The schedule, and how it was found (ScheduleSearch, plan/plan.hpp: the figures the plan's
/// `solver` section states).
struct ScheduleAnswer : ScheduleSearch {
  Schedule schedule;
  Timeline timeline;
  /// optimal (the schedule meets its lower bound), feasible (a search beat the heuristic,
  /// not proven optimal), heuristic (nothing beat the list schedule), fixed (a baseline's
  /// own schedule) or time_limit (the CPU-time safety limit stopped the search first).
  SolveStatus status = SolveStatus::heuristic;
  std::int64_t activation_budget = 0;  ///< The request's, which the schedule keeps to.
  /// Where a published order replaced the searches' answer for a shorter iteration
  /// (synthesize.cpp, adopt_published): that answer (its timeline the searches' replay, with
  /// the memory rule's figures only), for a caller that weighs more than the iteration (the
  /// compiler, the frozen encoders in the timeline's idle gaps). Null otherwise.
  std::shared_ptr<const ScheduleAnswer> searched;
  /// A synthesized family's searches, before the published orders (empty for a fixed one).
  std::optional<SearchedFigures> before_published;
};

/// Synthesizes a schedule at least as short as the list schedule, never over the memory
/// capacity or the activation budget. Fails (infeasible) only when not even one microbatch
/// in flight fits a device.
Result<ScheduleAnswer> synthesize_schedule(const ScheduleRequest& request);

/// What the answer's timeline holds where `request.memo` recalls the answer: every op (a
/// replay of the kept schedule), or only what keep_last_ops keeps (no replay), for a
/// caller that weighs the answer by its figures and replays the schedule once it needs the
/// ops (the tuner: at pp 1024 over 2048 layers a replay is 0.4 s, and the V families that cut
/// the model alike recall one answer twice). A new answer's timeline is whole either way.
enum class AnswerTimeline { whole, last_ops };

/// synthesize_schedule, its timeline as `timeline` says; `*ops_released` (where given) says
/// whether it holds only the last ops.
Result<ScheduleAnswer> synthesize_schedule(const ScheduleRequest& request, AnswerTimeline timeline,
                                           bool* ops_released);

/// The bound synthesize_schedule starts from for `request` (before an exact integer program
/// may raise it): no schedule within its memory is shorter. Infinity when not even one
/// microbatch in flight fits a device (no schedule at all). Kept in `request.memo`, where the
/// synthesis finds it again.
double synthesis_lower_bound(const ScheduleRequest& request);

/// Whether synthesize_schedule(`request`) answers exactly `screened`, the answer to `screen`,
/// without searching: the two ask for the same searches once their work limits are clamped
/// as the searches clamp them (detail::searched_request: on large instances the screen's
/// limits and the full effort's clamp to the same few list schedules and no order search),
/// neither draws a memory curve, the clock did not stop the screen, and the probe at 3/4 of
/// the peak (synthesize.cpp, probe_smaller_budget) would not run for `request`. A caller
/// that screened a configuration takes the screen's answer then: at pp 512 over 2048
/// layers the three full syntheses that repeated their screens took 14 s of a 49 s plan.
bool synthesis_repeats(const ScheduleRequest& request, const ScheduleRequest& screen,
                       const ScheduleAnswer& screened);

/// A published schedule replayed: what weighing it beside a search's answer at any budget
/// needs, and its iteration: the makespan, each device's residency peak (what a room must
/// hold) and the end of each device's last op (-infinity for none: the iteration adds the
/// device's all-reduce to it).
struct PublishedReplay {
  PublishedSchedule which = PublishedSchedule::zbv_zero_bubble;
  double makespan_s = 0;
  std::vector<std::int64_t> resident_peak;
  std::vector<double> last_end_s;
};

/// `which`'s figures from its replay `timeline`.
PublishedReplay published_replay(PublishedSchedule which, const Timeline& timeline);

/// The replay of `which` on `model` with `num_microbatches` and that split of the backward,
/// where a synthesis of the job kept it in `memo`: ZBVZeroBubble and DualPipeV on a
/// two-stage V, each kept where it was generated and replayed (the memory it holds, the
/// static state and the budget aside: the replay depends on none of them); 1F1B where a
/// synthesis's first list schedule was 1F1B's own (its in-flight limits the default ones,
/// no memory binding them). Nothing where no synthesis kept this model's orders, or where
/// this one could not be made (the caller makes it, and learns why).
std::optional<PublishedReplay> kept_published_replay(ScheduleMemo& memo, const PipelineModel& model,
                                                     int num_microbatches, bool split_backward,
                                                     PublishedSchedule which);

/// The second objective and the memory curve for an answer already chosen, for a caller
/// that synthesizes many candidates with memory_curve_points 0 and keeps one (the
/// compiler): while a synthesis at 3/4 of the answer's peak is exactly as fast (makespan
/// and iteration), its schedule, holding less, replaces the answer's (twice at most); then
/// `request.memory_curve_points` points of the curve. Times never change, so the choice
/// among candidates stands. Nothing for a fixed-schedule family.
Status trim_memory(const ScheduleRequest& request, ScheduleAnswer& answer);

}  // namespace pulse
