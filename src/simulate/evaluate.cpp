#include "pulse/simulate/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "pulse/cost/cost_model.hpp"

namespace pulse {

namespace {

// A ring over `members` in order: 2(n-1) steps, each moving bytes/n over every link at once;
// the slowest link paces it.
double ring_seconds(double bytes, const std::vector<RankId>& members, const ClusterProfile& c) {
  const std::size_t n = members.size();
  if (n < 2) return 0.0;
  double bandwidth = std::numeric_limits<double>::infinity(), latency = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const LinkClass& l = c.link(members[i], members[(i + 1) % n]);
    bandwidth = std::min(bandwidth, l.bandwidth_bytes_per_s);
    latency = std::max(latency, l.latency_s);
  }
  const double steps = 2.0 * static_cast<double>(n - 1);
  return steps * (latency + bytes / static_cast<double>(n) / bandwidth);
}

// On the cluster of sequence groups (cost/sequence_parallel.hpp) each of `members` stands
// for sequence_degree ranks: one ring over all of them, the groups' own link among its links.
double sequence_ring_seconds(double bytes, const std::vector<RankId>& members,
                             const ClusterProfile& c) {
  const std::size_t n = members.size() * static_cast<std::size_t>(c.sequence_degree);
  const LinkClass& own = c.link_classes[c.sequence_link];
  double bandwidth = own.bandwidth_bytes_per_s, latency = own.latency_s;
  for (std::size_t i = 0; members.size() > 1 && i < members.size(); ++i) {
    const LinkClass& l = c.link(members[i], members[(i + 1) % members.size()]);
    bandwidth = std::min(bandwidth, l.bandwidth_bytes_per_s);
    latency = std::max(latency, l.latency_s);
  }
  const double steps = 2.0 * static_cast<double>(n - 1);
  return steps * (latency + bytes / static_cast<double>(n) / bandwidth);
}

}  // namespace

double allreduce_seconds(std::int64_t bytes, const std::vector<RankId>& ranks,
                         const ClusterProfile& cluster) {
  const double b = static_cast<double>(bytes);
  if (cluster.sequence_degree > 1) return sequence_ring_seconds(b, ranks, cluster);
  if (cluster.allreduce != "hierarchical") return ring_seconds(b, ranks, cluster);
  std::map<int, std::vector<RankId>> by_node;
  for (RankId r : ranks) by_node[cluster.node_of(r)].push_back(r);
  if (by_node.size() < 2) return ring_seconds(b, ranks, cluster);
  std::size_t g = 0;
  for (const auto& [node, members] : by_node) g = std::max(g, members.size());
  // Intra-node: reduce-scatter plus all-gather, i.e. one ring all-reduce's traffic.
  double intra = 0;
  for (const auto& [node, members] : by_node) {
    intra = std::max(intra, ring_seconds(b, members, cluster));
  }
  // Inter-node: each node holds one shard of bytes/g; a ring over one member per node.
  std::vector<RankId> leaders;
  for (const auto& [node, members] : by_node) leaders.push_back(members.front());
  return intra + ring_seconds(b / static_cast<double>(g), leaders, cluster);
}

std::int64_t data_parallel_bytes(const MemoryModel& memory, std::int64_t params,
                                 int num_microbatches) {
  const std::int64_t g = memory.gradient_bytes(params), w = memory.weight_bytes(params);
  const std::int64_t M = num_microbatches;
  if (memory.zero_stage <= 1) return g;
  if (memory.zero_stage == 2) return (M * g + w) / 2;
  return M * (2 * w + g) / 2;
}

std::vector<double> allreduce_times(const PipelineModel& model,
                                    const std::vector<std::vector<RankId>>& ranks,
                                    const MemoryModel& memory, const ClusterProfile& cluster,
                                    int num_microbatches) {
  const std::vector<std::int64_t> params = model.device_params();
  const int M = num_microbatches;
  std::vector<double> out(model.num_devices());
  for (int d = 0; d < model.num_devices(); ++d) {
    std::vector<RankId> replicas;
    for (const auto& replica : ranks) replicas.push_back(replica[d]);
    const std::int64_t g = memory.gradient_bytes(params[d]);
    double seconds = allreduce_seconds(g, replicas, cluster);
    if (memory.zero_stage >= 2) {
      // A reduce-scatter or an all-gather is half a ring all-reduce of the same bytes.
      const double rs = seconds / 2;
      const double ag = allreduce_seconds(memory.weight_bytes(params[d]), replicas, cluster) / 2;
      const double overlapped = (M - 1) * rs + (memory.zero_stage >= 3 ? (2 * M - 1) * ag : 0);
      double window = 0;
      for (StageId s : model.layout.stages_on(d)) {
        const StageCost& c = model.stages[s];
        window += c.backward_s + (memory.zero_stage >= 3 ? c.forward_s : 0);
      }
      seconds = rs + ag + std::max(0.0, overlapped - window * M);
    }
    // To the nanosecond, like every time in a plan, so a replay from the plan is exact.
    out[d] = quantize_time(seconds);
  }
  return out;
}

Evaluation evaluate(const PipelineModel& model, const Timeline& timeline,
                    const std::vector<double>& allreduce_s, int global_batch,
                    const MemoryModel& memory) {
  Evaluation e;
  const int P = model.num_devices();
  const std::vector<std::int64_t> params = model.device_params();
  int num_microbatches = 0;
  for (const DeviceTimeline& d : timeline.devices) {
    for (const TimedOp& t : d.ops) num_microbatches = std::max(num_microbatches, t.op.mb + 1);
  }
  e.allreduce.resize(P);
  e.iteration_s = timeline.makespan_s;
  for (int d = 0; d < P; ++d) {
    AllReduce& a = e.allreduce[d];
    a.bytes = data_parallel_bytes(memory, params[d], num_microbatches);
    const auto& ops = timeline.devices[d].ops;
    a.start_s = ops.empty() ? 0.0 : ops.back().busy_until_s;
    a.seconds = allreduce_s[d];
    e.iteration_s = std::max(e.iteration_s, a.start_s + a.seconds);
  }
  e.allreduce_exposed_s = e.iteration_s - timeline.makespan_s;
  // An iteration of 0 s (every time rounded to 0) has no throughput and no bubble; the
  // planner refuses such a model and replay_plan such a plan, so 0 is only a placeholder.
  e.samples_per_s = e.iteration_s > 0 ? global_batch / e.iteration_s : 0;
  double idle = 0;
  for (const DeviceTimeline& d : timeline.devices) idle += d.idle_s;
  e.bubble_ratio = timeline.makespan_s > 0 ? idle / (P * timeline.makespan_s) : 0;
  return e;
}

Evaluation evaluate(const PipelineModel& model, const Timeline& timeline,
                    const std::vector<std::vector<RankId>>& ranks, int global_batch,
                    const MemoryModel& memory, const ClusterProfile& cluster) {
  int num_microbatches = 0;
  for (const DeviceTimeline& d : timeline.devices) {
    for (const TimedOp& t : d.ops) num_microbatches = std::max(num_microbatches, t.op.mb + 1);
  }
  return evaluate(model, timeline, allreduce_times(model, ranks, memory, cluster, num_microbatches),
                  global_batch, memory);
}

}  // namespace pulse
