// Evaluate: from a replayed pipeline schedule to the figures a plan reports. The pipeline
// makespan comes from the simulator; this adds the data-parallel gradient all-reduce (each
// pipeline device's replicas, starting when the device finishes its last backward, so the
// part that overlaps the ramp-down of other devices is hidden) and derives iteration time,
// throughput and bubble. `plan` and `simulate` both call it.
#pragma once

#include <cstdint>
#include <vector>

#include "pulse/cost/cost_model.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/simulate/simulate.hpp"
#include "pulse/cost/memory.hpp"

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
double allreduce_seconds(std::int64_t bytes, const std::vector<RankId>& ranks,
                         const ClusterProfile& cluster);

struct Evaluation {
  std::vector<AllReduce> allreduce;  ///< Per pipeline device.
  double iteration_s = 0;
  double samples_per_s = 0;
  double bubble_ratio = 0;         ///< Idle share of pipeline device time up to the makespan.
  double allreduce_exposed_s = 0;  ///< Iteration time beyond the pipeline makespan.
};

/// Per pipeline device: its gradient all-reduce among the replicas, `ranks[r][d]` being the
/// cluster rank of pipeline device d in replica r; seconds, rounded to the nanosecond.
std::vector<double> allreduce_times(const PipelineModel& model,
                                    const std::vector<std::vector<RankId>>& ranks,
                                    const MemoryModel& memory, const ClusterProfile& cluster);

/// From a replayed timeline and each device's all-reduce time to the iteration's figures.
Evaluation evaluate(const PipelineModel& model, const Timeline& timeline,
                    const std::vector<double>& allreduce_s, int global_batch,
                    const MemoryModel& memory);

/// The same, with the all-reduce times computed on `cluster` (allreduce_times).
Evaluation evaluate(const PipelineModel& model, const Timeline& timeline,
                    const std::vector<std::vector<RankId>>& ranks, int global_batch,
                    const MemoryModel& memory, const ClusterProfile& cluster);

}  // namespace pulse
