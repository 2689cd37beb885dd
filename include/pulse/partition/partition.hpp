// Partition pass: where to cut the layer sequence into stages. Two engines share one
// request/answer shape so every strategy is compared on the same cost model:
//   partition_v          Pulse: 2kP stages in k waves (k = 1: the V, stage d and 2P-1-d on
//                        device d), skips kept on one device where the cuts allow it.
//   partition_sequential the conventional baseline: P stages in a row, skips relayed.
// Both minimise the largest device load (compute plus blocking sends per microbatch), the
// steady-state period of the pipeline, subject to device memory; ties go to fewer bytes
// moved, then to more memory headroom.
//
// Waves, and why they keep nested skips local. Number the 2kP stages along the main path
// and give stage s the level l(s) = min(s, 2kP-1-s): a level is a pair of mirror stages, an
// encoder segment E_l and a decoder segment D_l, walking the layers from the outside in.
// The V partitioner works on levels: its local_only constraint says every skip with one
// end in E_l u D_l has the other end there too (two O(1) checks per transition, see
// partition_v.cpp). Skips are nested (p1 < p2 < c2 < c1 for any two that overlap), so by
// induction from the outermost level every skip starts and ends on one level. Any
// placement that puts both stages of a level on one device therefore keeps every skip
// local; wave_layout (cost/pipeline_model.hpp) is the one whose main path also only ever
// steps between neighbouring devices: level l sits on device l mod P going down the
// devices and P-1 - (l mod P) coming back up, so consecutive levels are neighbours, and
// at each turn two consecutive levels share a device and hand over without a transfer.
// The k = 2 placement is a W. (A skip between different levels of one device is local
// too; the level DP does not use that freedom, so it is conservative, never wrong.)
//
// partition_v solves waves as a V over kP levels: each level a virtual device whose links
// are its device's (free within a device), with 1/k of the device's memory, so that the
// k levels a device holds fit together. It minimises the largest level's load, which is
// within a factor k of the largest device's; the answer is a valid partition whose costs
// the pipeline model computes exactly, but not proven optimal for the device objective
// (PartitionResult::exact is false for k > 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pulse/base/result.hpp"
#include "pulse/base/solve_status.hpp"
#include "pulse/cost/cost_model.hpp"
#include "pulse/cost/memory.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/graph/layer_graph.hpp"

namespace pulse {

struct PartitionRequest {
  const LayerGraph* graph = nullptr;
  int pp = 1;
  PipelineLinks links;  ///< pp x pp.
  bool overlap_comm = false;
  std::int64_t memory_capacity = 0;  ///< Usable bytes per device.
  MemoryModel memory;                ///< Weights, gradients, optimizer state per parameter.
  int dp = 1;                        ///< Data-parallel degree (ZeRO-1 shards over it).
  /// Microbatches in flight per device the memory check assumes (the schedule never holds
  /// more on that device).
  std::vector<int> inflight;
  /// partition_v only: waves per side (1: the V; k: 2kP stages in wave_layout).
  int waves = 1;
  /// partition_sequential only: how skips reach consumers on other stages. Direct skips are
  /// charged on the slowest pipeline link (the consumer's stage is not known while the
  /// producer's is placed); exact when the pipeline's links are uniform.
  SkipRouting routing = SkipRouting::forwarded;
  /// partition_v only: transitions one exact DP run may examine before the partitioner
  /// switches to its bounded search (partition_v.cpp), whose answer is marked not exact.
  /// The default keeps a run to a fraction of a second; it only binds when the bound is
  /// loose against an even share, as when one layer outweighs several devices' shares.
  std::int64_t exact_transition_budget = 1'000'000;
  /// Whether an answer that finds no partition says by how much memory it misses
  /// (PartitionAnswer::shortfall: the memory DP, or the weights' floor). False when the
  /// caller only asks whether a partition exists, or retries with another request whatever
  /// the shortfall: the memory DP is skipped and the shortfall left empty.
  bool shortfall = true;
};

/// The most memory-frugal partition still needs more than a device has.
struct MemoryShortfall {
  DeviceId device = 0;
  std::int64_t needed_bytes = 0;
  std::int64_t capacity_bytes = 0;
  /// needed_bytes is what the weights' state alone puts on the fullest device of any
  /// partition (an even share of the parameters), not the most frugal partition's need: on
  /// models past kShortfallSearchMaxLayers, where searching for that partition takes minutes.
  bool weights_alone = false;
};

struct PartitionResult {
  StageLayout layout;
  std::string method;                     ///< "v-dp-local", "v-dp-nonlocal", "sequential-dp".
  double objective_s = 0;                 ///< Largest device load per microbatch.
  double lower_bound_s = 0;               ///< No partition can beat it (partition_common.hpp).
  std::int64_t bytes_per_microbatch = 0;  ///< P2P bytes of one microbatch, both directions.
  bool all_skips_local = false;
  bool exact = false;  ///< The objective is proven optimal for this cost model.
  std::vector<double> device_load_s;
  std::vector<std::int64_t> device_memory_bytes;  ///< The bound the memory check used.
  int states_explored = 0;
  /// partition_v: the most transitions one exact DP run examined on the way to this answer
  /// (each run's count, as exact_transition_budget limits it). Not in the plan.
  std::int64_t exact_transitions = 0;
  /// partition_sequential, the time objective: a floor under the largest device load of any
  /// partition with its sends (send_floor in partition_sequential.cpp); the ladder of
  /// bounds starts at it. Not in the plan.
  double send_floor_s = 0;
  /// partition_sequential, the time objective: the load of the partition its greedy walk
  /// found (greedy_upper_bound in partition_sequential.cpp), at which its one DP run is
  /// bounded; 0 where the walk found none. Not in the plan.
  double greedy_load_s = 0;
};

/// What a partition search found.
struct PartitionAnswer {
  /// optimal (the exact DP answered), feasible (its bounded search answered: a valid
  /// partition, not proven optimal) or infeasible (no partition was found).
  SolveStatus status = SolveStatus::infeasible;
  PartitionResult result;  ///< When found().
  /// When infeasible because no partition fits memory: the fullest device of the most
  /// memory-frugal partition, to say by how much. Absent when SkipPolicy::local_only found
  /// no partition that keeps every skip local (the caller may allow non-local skips).
  std::optional<MemoryShortfall> shortfall;

  bool found() const { return has_answer(status); }
};

/// Checks a request before any search: a graph, pp >= 1, pp x pp links, one in-flight count
/// per device. A usage error names what is wrong.
Status validate_request(const PartitionRequest& request);

/// How the V partitioner may treat skips.
enum class SkipPolicy {
  local_only,      ///< Only partitions where every skip stays on its device.
  allow_nonlocal,  ///< Any V partition; non-local skips charged at their transfer cost.
};

/// Pulse partition. With local_only and no all-local partition: infeasible, no shortfall.
PartitionAnswer partition_v(const PartitionRequest& request, SkipPolicy policy);

/// Conventional baselines: pp contiguous stages on pp devices, skips forwarded through every
/// boundary between producer and consumer (request.routing forwarded), or sent straight from
/// producer stage to consumer stage (direct).
PartitionAnswer partition_sequential(const PartitionRequest& request);

/// Whether partition_sequential(`request`) finds a partition, decided without its DP: the
/// weights' state alone, a greedy walk at no bound on the load (memory alone decides), and
/// where that walk finds none, the yes/no table of what fits (partition_sequential.cpp).
/// Time aside, a partition exists exactly when the DP finds one, as its last run has no
/// bound.
bool sequential_partition_exists(const PartitionRequest& request);

}  // namespace pulse
