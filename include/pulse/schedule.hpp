// Schedule pass: the order of operations on every device. F(s, m) and B(s, m) for every
// stage s and microbatch m; with a split backward, B becomes I (input gradient, which
// unblocks the previous stage) and W (weight gradient, free to fill a bubble).
#pragma once

#include <string>
#include <vector>

#include "pulse/pipeline_model.hpp"

namespace pulse {

enum class OpKind { forward, backward, backward_input, backward_weight };

/// 'F', 'B', 'I' or 'W'.
char op_letter(OpKind kind);

/// Compute time of an op of `kind` on a stage with costs `cost` (I is backward minus its
/// weight-gradient share, W that share).
double op_compute_s(const StageCost& cost, OpKind kind);

struct Op {
  OpKind kind = OpKind::forward;
  StageId stage = 0;
  int microbatch = 0;

  bool operator==(const Op&) const = default;
};

/// Per device, the operations in execution order.
struct Schedule {
  std::vector<std::vector<Op>> device_ops;
  std::string policy;  ///< What produced it, e.g. "v-1f1b-heuristic".
  bool split_backward = false;
};

/// Microbatches each device may hold in flight (from its first forward of a microbatch to
/// its last backward) so that its memory stays under the capacity, capped at `wanted`.
/// An entry of 0 means not even one microbatch fits on that device.
std::vector<int> memory_inflight_limits(const PipelineModel& model,
                                        const std::vector<std::int64_t>& static_bytes,
                                        std::int64_t capacity, const std::vector<int>& wanted);

/// The most microbatches any schedule within the memory rule (`within_memory`) can hold in
/// flight on each device, capped at `wanted`: what every in-flight microbatch holds for its
/// whole stay (its first stage's activations and the device's skip bytes) must fit. At
/// least memory_inflight_limits; more on a device with several stages, whose later stages'
/// activations live only part of the stay. An upper limit for searches and lower bounds,
/// not a guarantee: schedules that reach it are checked by replay.
std::vector<int> resident_inflight_limits(const PipelineModel& model,
                                          const std::vector<std::int64_t>& static_bytes,
                                          std::int64_t capacity, const std::vector<int>& wanted);

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

  /// 1F1B's rule: backward before forward, draining microbatches and freeing memory early.
  static ListPolicy backward_first(int num_stages);
  /// Forward before backward: fills the pipeline; with room for many microbatches in flight
  /// it reaches the lower bound on uniform V pipelines.
  static ListPolicy forward_first(int num_stages);
};

/// A list schedule for any layout (the V or a chain): each device, when free, runs the
/// ready operation that starts earliest, ties broken by `policy`. A device admits a new
/// microbatch only while fewer than inflight_limit[d] are in flight on it. Respects every
/// dependency; deadlock-free because all devices admit microbatches in the same order.
/// `makespan_s`, when given, receives the schedule's makespan (what `simulate` would say).
Schedule list_schedule(const PipelineModel& model, int num_microbatches,
                       const std::vector<int>& inflight_limit, bool split_backward,
                       const ListPolicy& policy, double* makespan_s = nullptr);

/// GPipe: each device runs every forward of its stages (microbatch by microbatch), then every
/// backward. Holds all microbatches in flight.
Schedule gpipe_schedule(const PipelineModel& model, int num_microbatches, bool split_backward);

/// The same with backward-first ranks.
Schedule list_schedule(const PipelineModel& model, int num_microbatches,
                       const std::vector<int>& inflight_limit, bool split_backward = false);

}  // namespace pulse
