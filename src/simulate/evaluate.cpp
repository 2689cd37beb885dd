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

}  // namespace

double allreduce_seconds(std::int64_t bytes, const std::vector<RankId>& ranks,
                         const ClusterProfile& cluster) {
  const double b = static_cast<double>(bytes);
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

std::vector<double> allreduce_times(const PipelineModel& model,
                                    const std::vector<std::vector<RankId>>& ranks,
                                    const MemoryModel& memory, const ClusterProfile& cluster) {
  const std::vector<std::int64_t> params = model.device_params();
  std::vector<double> out(model.num_devices());
  for (int d = 0; d < model.num_devices(); ++d) {
    std::vector<RankId> replicas;
    for (const auto& replica : ranks) replicas.push_back(replica[d]);
    // To the nanosecond, like every time in a plan, so a replay from the plan is exact.
    out[d] = quantize_time(allreduce_seconds(memory.gradient_bytes(params[d]), replicas, cluster));
  }
  return out;
}

Evaluation evaluate(const PipelineModel& model, const Timeline& timeline,
                    const std::vector<double>& allreduce_s, int global_batch,
                    const MemoryModel& memory) {
  Evaluation e;
  const int P = model.num_devices();
  const std::vector<std::int64_t> params = model.device_params();
  e.allreduce.resize(P);
  e.iteration_s = timeline.makespan_s;
  for (int d = 0; d < P; ++d) {
    AllReduce& a = e.allreduce[d];
    a.bytes = memory.gradient_bytes(params[d]);
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
  return evaluate(model, timeline, allreduce_times(model, ranks, memory, cluster), global_batch,
                  memory);
}

}  // namespace pulse
