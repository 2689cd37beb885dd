// The stage-level view of a partitioned model: what each stage computes, which tensors
// move between which stages, and how long that takes on the links of one pipeline. The
// scheduler, the simulator and the plan writer all read this one structure, so every
// number the planner reports comes from the same cost model.
#pragma once

#include <cstdint>
#include <vector>

#include "pulse/cost/pipeline_links.hpp"
#include "pulse/graph/layer_graph.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// How a skip tensor reaches a consumer on another device.
enum class SkipRouting {
  direct,     ///< One message from the producer's device to the consumer's (Pulse, 1f1b-direct).
  forwarded,  ///< Relayed through every stage boundary in between (conventional runtimes).
};

/// Stage boundaries and the device of each stage.
struct StageLayout {
  /// num_stages + 1 entries: stage s holds layers [first_layer[s], first_layer[s + 1]).
  std::vector<LayerId> first_layer;
  std::vector<DeviceId> device;  ///< Per stage.
  int num_devices = 0;

  int num_stages() const { return static_cast<int>(device.size()); }
  LayerId last_layer(StageId s) const { return first_layer[s + 1] - 1; }
  StageId stage_of(LayerId layer) const;
  /// Stages of a device in execution order.
  std::vector<StageId> stages_on(DeviceId d) const;

  bool operator==(const StageLayout&) const = default;
};

/// The V: 2P stages, stage d and stage 2P-1-d on device d.
StageLayout v_layout(std::vector<LayerId> first_layer, int pp);

/// Waves: 2kP stages for k = `waves`, the main path running down and up the P devices k
/// times on each side (k = 2 is a W). Stage s sits at level l = min(s, 2kP-1-s), its
/// mirror 2kP-1-s at the same level, and level l on device
///     wave_device(l, P) = l mod P          when l / P is even (going down),
///                       = P-1 - (l mod P)  when l / P is odd  (going up),
/// so a stage and its mirror share a device (what keeps nested skips local, see
/// partition.hpp) and neighbouring stages sit on neighbouring devices. k = 1 is v_layout.
StageLayout wave_layout(std::vector<LayerId> first_layer, int pp, int waves);
/// The device of level `level` in a wave layout over `pp` devices.
DeviceId wave_device(int level, int pp);
/// P stages in a row, stage s on device s.
StageLayout sequential_layout(std::vector<LayerId> first_layer, int pp);

/// Per-microbatch costs of one stage.
struct StageCost {
  double forward_s = 0;
  double backward_s = 0;
  double backward_weight_s = 0;  ///< The weight-gradient share of backward_s.
  std::int64_t params = 0;
  std::int64_t activation_bytes = 0;
  /// The most a recomputed layer of the stage rebuilds during its backward, per microbatch
  /// (one microbatch at a time), beyond what activation_bytes keeps; 0 without recomputation.
  std::int64_t recompute_workspace_bytes = 0;
  std::int64_t largest_layer_params = 0;  ///< What ZeRO-3 gathers at once (cost/memory.hpp).

  bool operator==(const StageCost&) const = default;
};

/// Bytes of one direction of a transfer, by what they are.
struct Bytes {
  std::int64_t activation = 0;
  std::int64_t skip = 0;
  std::int64_t carried = 0;
  std::int64_t total() const { return activation + skip + carried; }
  bool operator==(const Bytes&) const = default;
};

/// Tensors sent after F(from, m) to stage `to`; their gradients return after B(to, m).
struct Transfer {
  StageId from = 0;
  StageId to = 0;
  bool main_path = false;  ///< to == from + 1 and it carries the main activation.
  Bytes forward;           ///< Per microbatch.
  Bytes backward;          ///< Per microbatch.
  int forward_messages = 0;
  int backward_messages = 0;
  double forward_s = 0;  ///< Time on the link, all messages.
  double backward_s = 0;
  std::vector<int> skips;    ///< ModelProfile::skips indices whose bytes ride on it.
  std::vector<int> carried;  ///< Main path: ModelProfile::carried indices it moves forward.

  bool operator==(const Transfer&) const = default;
};

/// Where one skip lives.
struct SkipPlacement {
  int skip = 0;  ///< ModelProfile::skips index.
  StageId producer_stage = 0;
  StageId consumer_stage = 0;
  bool local = false;      ///< Producer and consumer stages on one device: no byte moves.
  std::int64_t bytes = 0;  ///< Per microbatch.

  bool operator==(const SkipPlacement&) const = default;
};

struct PipelineModel {
  StageLayout layout;
  SkipRouting routing = SkipRouting::direct;
  bool overlap_comm = false;
  std::vector<StageCost> stages;
  std::vector<Transfer> transfers;
  std::vector<SkipPlacement> skips;  ///< In ModelProfile::skips order.
  PipelineLinks links;

  int num_devices() const { return layout.num_devices; }
  /// Per device, for one microbatch: compute of its stages plus the sends it blocks on, or
  /// with overlapped sends the larger of the two. The steady-state period of the pipeline
  /// is at least the largest of these.
  std::vector<double> device_load() const;
  /// Per device: parameters held.
  std::vector<std::int64_t> device_params() const;
  /// P2P bytes of one microbatch through one pipeline, both directions.
  Bytes bytes_per_microbatch() const;

  /// Field by field: what the schedule memo compares requests by (schedule/schedule_memo.hpp).
  bool operator==(const PipelineModel&) const = default;
};

/// Derives the stage-level model from a layout. Links are [pipeline device][pipeline device].
PipelineModel build_pipeline_model(const LayerGraph& graph, const StageLayout& layout,
                                   SkipRouting routing, const PipelineLinks& links,
                                   bool overlap_comm);

/// Sets every transfer's forward_s and backward_s on `model.links` (transfer_time in
/// cost_model.hpp), each direction on its own link.
void time_transfers(PipelineModel& model);

/// Rounds every stage and transfer time to the time quantum (quantize_time): the plan
/// states times at that resolution, so a plan read back replays to the same figures. No op
/// rounds to nothing: forward_s is at least one quantum, backward_s two, and each part of a
/// split backward (backward_s - backward_weight_s, backward_weight_s) one.
void round_to_quantum(PipelineModel& model);

/// Links among a pipeline's devices placed on the given cluster ranks.
PipelineLinks pipeline_links(const ClusterProfile& cluster, const std::vector<RankId>& ranks);

}  // namespace pulse
