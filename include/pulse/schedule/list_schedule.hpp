// The list schedules: the heuristic every synthesized schedule starts from (a V 1F1B: each
// device admits a bounded number of microbatches, backward first, oldest first) and the
// baselines' own schedules (1F1B is the same rule on a chain; GPipe runs every forward,
// then every backward).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

/// The in-flight counts the heuristic aims for per device, before memory caps: enough to
/// keep the device busy while a microbatch travels to the bottom of the pipeline and back.
std::vector<int> default_inflight(const StageLayout& layout, int num_microbatches);

/// Which ready operation a list schedule prefers when several could start at the same time:
/// the lowest rank, then the oldest microbatch, then the later stage. Ranks are per stage
/// and kind, so each device's preference among its own op types can be chosen apart.
struct ListPolicy {
  std::vector<int> forward_rank;   ///< Per stage.
  std::vector<int> backward_rank;  ///< Per stage: B, or I with a split backward.
  std::vector<int> weight_rank;    ///< Per stage: W (split backward only).
  /// Per stage, optional: the most microbatches at once between the stage's forward and its
  /// last backward (0 or absent: no limit). A device's first stage is limited by the
  /// in-flight limit instead. With two stages on a device, this is what lets it hold more
  /// microbatches in flight than memory would allow if each held all of its activations.
  std::vector<int> window_limit;
  /// Giffler and Thompson's active rule instead of "earliest start first": among the ops
  /// that could start before the earliest-starting one would end, the best ranked runs,
  /// even if it must wait for its input (a link delay, a neighbour finishing).
  bool active = false;

  /// 1F1B's rule: backward before forward, draining microbatches and freeing memory early.
  static ListPolicy backward_first(int num_stages);
  /// Forward before backward: fills the pipeline; with room for many microbatches in flight
  /// it reaches the lower bound on uniform V pipelines.
  static ListPolicy forward_first(int num_stages);
};

/// What a list schedule's ranks decided. Under the plain rule (not `active`), when every op
/// runs for some time, a device's choice depends on the ranks only among its candidates
/// ready at the same, earliest, time (the order of devices whose ops start at the same time
/// changes no device's ops: none of them can make another's candidate ready that early).
/// `pairs` holds each pair of op slots (stage * 3 + kind: 0 forward, 1 B or I, 2 W) a device
/// found tied so, sorted and unique, packed as (a << 33) | (b << 1) | first with a < b, and
/// `first` whether a's op goes first when the two ranks are equal (older microbatch, then
/// later stage). Another policy that orders every pair the same way, at the same in-flight
/// and window limits, gives the same schedule op for op (same_rank_order).
struct ListTies {
  bool complete = false;  ///< The plain rule and no op of zero length: `pairs` is all it took.
  std::vector<std::uint64_t> pairs;
};

/// A list schedule that gives up once it cannot end before `at` (a caller that keeps only
/// schedules shorter than one it has). After each op, device d's last op cannot end before
/// its free time plus the compute of every op it has still to run (each op starts no
/// earlier than the device is free, and runs its compute time); once that exceeds `at`,
/// by more than the rounding of those sums (a relative kRoundingMargin), the makespan is at
/// least `at`, and the run stops: `stopped` true, the schedule empty, the ties and checked
/// counts those of the steps it took. Another run at limits equal or both above those
/// counts, with ranks that order those ties alike, runs the same ops on each device up to
/// the stopping op, so its makespan is at least `at` too. A run that is not stopped is the
/// plain run, op for op.
struct ListStop {
  double at = std::numeric_limits<double>::infinity();
  bool stopped = false;
  /// Relative: the sums' rounding stays far below it (under 1e-10 up to 10^6 ops).
  static constexpr double kRoundingMargin = 1e-8;
};

/// Whether policies `a` and `b` order every pair of `ties` alike. Meaningful only where
/// ties.complete, and for two plain-rule policies.
bool same_rank_order(const ListTies& ties, const ListPolicy& a, const ListPolicy& b);

/// A list schedule's replay, made as it runs (its times are a replay's, to the bit): for a
/// caller that would replay the schedule next. `timeline` receives what
/// simulate(model, schedule, M, *static_bytes, peaks) returns for it.
struct ListReplay {
  const std::vector<MemoryBreakdown>* static_bytes = nullptr;  ///< Per device.
  Peaks peaks = Peaks::rule_only;
  /// Each device's last ops alone (keep_last_ops's): `timeline` is then with_last_ops of the
  /// whole replay, for a caller that reads its figures only (a point of the memory curve).
  bool last_ops_only = false;
  Timeline timeline;
};

/// A list schedule for any layout (the V or a chain): each device, when free, runs the
/// ready operation that starts earliest, ties broken by `policy`. A device admits a new
/// microbatch only while fewer than inflight_limit[d] are in flight on it. Respects every
/// dependency; deadlock-free because all devices admit microbatches in the same order.
/// `makespan_s`, when given, receives the schedule's makespan (what `simulate` would say).
/// `inflight_checked`, when given, receives per device the most microbatches it held when
/// its limit was consulted: any limit above that (the others equal) gives the same schedule.
/// `ties`, when given, receives what the ranks decided (ListTies). `stop`, when given, may end
/// the run early (ListStop). `resident_peaks`, when given, receives per device the memory
/// rule's residency peak of a run that was not stopped (the Timeline's `resident_peak`, what
/// `simulate` would say: its times are these, to the bit), so a caller that checks the rule
/// need not replay the schedule. `replay`, when given, receives the whole replay of a run
/// that was not stopped (ListReplay).
Schedule list_schedule(const PipelineModel& model, int num_microbatches,
                       const std::vector<int>& inflight_limit, bool split_backward,
                       const ListPolicy& policy, double* makespan_s = nullptr,
                       std::vector<int>* inflight_checked = nullptr, ListTies* ties = nullptr,
                       ListStop* stop = nullptr,
                       std::vector<std::int64_t>* resident_peaks = nullptr,
                       ListReplay* replay = nullptr);

/// GPipe: each device runs every forward of its stages (microbatch by microbatch), then every
/// backward. Holds all microbatches in flight.
Schedule gpipe_schedule(const PipelineModel& model, int num_microbatches, bool split_backward);

/// The same with backward-first ranks.
Schedule list_schedule(const PipelineModel& model, int num_microbatches,
                       const std::vector<int>& inflight_limit, bool split_backward = false);

}  // namespace pulse
