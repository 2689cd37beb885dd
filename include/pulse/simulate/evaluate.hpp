// Evaluate: from a replayed pipeline schedule to the figures a plan reports. The pipeline
// makespan comes from the simulator; this adds the data-parallel gradient all-reduce (each
// pipeline device's replicas, starting when the device finishes its last backward, so the
// part that overlaps the ramp-down of other devices is hidden) and derives iteration time,
// throughput and bubble. `plan` and `simulate` both call it.
#pragma once

#include <cstdint>
#include <vector>

#include "pulse/cost/cost_model.hpp"
#include "pulse/cost/memory.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

/// Per pipeline device: the gradient all-reduce across replicas.
struct AllReduce {
  std::int64_t bytes = 0;  ///< Gradient bytes each member contributes.
  double seconds = 0;
  double start_s = 0;  ///< After the device's last op.
};

/// Seconds to all-reduce `bytes` among `ranks` with the cluster's algorithm:
///   ring          2(n-1) steps of bytes/n on the ring's slowest link;
///   hierarchical  reduce-scatter among the g members of a node, all-reduce of the bytes/g
///                 shards across the k nodes, all-gather in the node (the shards' rings run
///                 side by side; NIC sharing between them is not modelled).
/// On the cluster of sequence groups (cost/sequence_parallel.hpp: sequence_degree s > 1),
/// one ring over all n = |ranks| x s ranks, on the slowest of the groups' own link and the
/// links between the groups: 2(n-1) steps of bytes/n.
double allreduce_seconds(std::int64_t bytes, const std::vector<RankId>& ranks,
                         const ClusterProfile& cluster);

struct Evaluation {
  std::vector<AllReduce> allreduce;  ///< Per pipeline device.
  double iteration_s = 0;
  double samples_per_s = 0;
  double bubble_ratio = 0;         ///< Idle share of pipeline device time up to the makespan.
  double allreduce_exposed_s = 0;  ///< Iteration time beyond the pipeline makespan.
};

/// One pipeline device's data-parallel collectives in an iteration of M microbatches, by
/// the ZeRO stage (W weight bytes, G gradient bytes of the device; a reduce-scatter RS or
/// an all-gather AG takes half a ring all-reduce AR of the same bytes):
///
///   stage 0, 1  one AR of G after the last backward
///   stage 2     an RS of G per microbatch, the first M-1 beside the backward, the last after
///               it with the AG of the W updated weights (M = 1: stage 0's AR to the byte)
///   stage 3     per microbatch an AG of W in forward and again in backward and an RS of G,
///               beside the forward and backward, but the last RS and one AG, after the last
///               backward
///
/// Every stage thus pays one all-reduce's worth after the last op, as stages 0 and 1 do (the
/// all-reduce is not overlapped with the last backward here), and only what it moves beyond
/// that runs beside the compute: sharding wins a comparison by what its memory buys, not by
/// a kinder clock. `data_parallel_bytes` is what the plan's `allreduce.bytes` states: the
/// bytes that, all-reduced, move as much (2(n-1) x them over the n members): G, (M G + W) / 2
/// and M (2 W + G) / 2.
std::int64_t data_parallel_bytes(const MemoryModel& memory, std::int64_t params,
                                 int num_microbatches);

/// Per pipeline device: the seconds its data-parallel collectives add after its last op,
/// `ranks[r][d]` being the cluster rank of pipeline device d in replica r; rounded to the
/// nanosecond. Stages 0 and 1: the all-reduce's time. Stages 2 and 3: RS + AG after the last
/// op, plus what of the others the compute window (M x the device's backward; under stage 3
/// its forward too) does not cover, the collectives running beside compute at full link
/// speed (FSDP's prefetch, ZeRO-2's bucketed reduce-scatter).
std::vector<double> allreduce_times(const PipelineModel& model,
                                    const std::vector<std::vector<RankId>>& ranks,
                                    const MemoryModel& memory, const ClusterProfile& cluster,
                                    int num_microbatches);

/// From a replayed timeline and each device's all-reduce time to the iteration's figures.
Evaluation evaluate(const PipelineModel& model, const Timeline& timeline,
                    const std::vector<double>& allreduce_s, int global_batch,
                    const MemoryModel& memory);

/// The same, with the all-reduce times computed on `cluster` (allreduce_times).
Evaluation evaluate(const PipelineModel& model, const Timeline& timeline,
                    const std::vector<std::vector<RankId>>& ranks, int global_batch,
                    const MemoryModel& memory, const ClusterProfile& cluster);

}  // namespace pulse
