// The list schedules: the heuristic every synthesized schedule starts from (a V 1F1B: each
// device admits a bounded number of microbatches, backward first, oldest first) and the
// baselines' own schedules (1F1B is the same rule on a chain; GPipe runs every forward,
// then every backward).
#pragma once

#include <cstdint>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/schedule.hpp"

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

/// Whether policies `a` and `b` order every pair of `ties` alike. Meaningful only where
/// ties.complete, and for two plain-rule policies.
bool same_rank_order(const ListTies& ties, const ListPolicy& a, const ListPolicy& b);

/// A list schedule for any layout (the V or a chain): each device, when free, runs the
/// ready operation that starts earliest, ties broken by `policy`. A device admits a new
/// microbatch only while fewer than inflight_limit[d] are in flight on it. Respects every
/// dependency; deadlock-free because all devices admit microbatches in the same order.
/// `makespan_s`, when given, receives the schedule's makespan (what `simulate` would say).
/// `inflight_checked`, when given, receives per device the most microbatches it held when
/// its limit was consulted: any limit above that (the others equal) gives the same schedule.
/// `ties`, when given, receives what the ranks decided (ListTies).
Schedule list_schedule(const PipelineModel& model, int num_microbatches,
                       const std::vector<int>& inflight_limit, bool split_backward,
                       const ListPolicy& policy, double* makespan_s = nullptr,
                       std::vector<int>* inflight_checked = nullptr, ListTies* ties = nullptr);

/// GPipe: each device runs every forward of its stages (microbatch by microbatch), then every
/// backward. Holds all microbatches in flight.
Schedule gpipe_schedule(const PipelineModel& model, int num_microbatches, bool split_backward);

/// The same with backward-first ranks.
Schedule list_schedule(const PipelineModel& model, int num_microbatches,
                       const std::vector<int>& inflight_limit, bool split_backward = false);

}  // namespace pulse
