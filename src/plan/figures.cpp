#include "pulse/plan/figures.hpp"

#include <algorithm>

namespace pulse {

namespace {

// P2P bytes of one iteration by the link class they cross (both directions, all replicas).
std::map<std::string, std::int64_t> link_class_bytes(const PipelineModel& m, std::int64_t scale) {
  std::map<std::string, std::int64_t> by_class;
  for (const Transfer& t : m.transfers) {
    const DeviceId a = m.layout.device[t.from], b = m.layout.device[t.to];
    by_class[m.links[a][b].name] += t.forward.total() * scale;
    by_class[m.links[b][a].name] += t.backward.total() * scale;
  }
  return by_class;
}

}  // namespace

PlanComm comm_figures(const PipelineModel& model, const std::vector<AllReduce>& allreduce,
                      int num_microbatches, int dp) {
  const Bytes mb = model.bytes_per_microbatch();
  const std::int64_t scale = static_cast<std::int64_t>(num_microbatches) * dp;
  std::int64_t reduced = 0;
  for (const AllReduce& a : allreduce) reduced += 2 * static_cast<std::int64_t>(dp - 1) * a.bytes;
  PlanComm c;
  c.p2p_bytes_per_iteration = mb.total() * scale;
  c.skip_bytes_per_iteration = mb.skip * scale;
  c.activation_bytes_per_iteration = mb.activation * scale;
  c.carried_bytes_per_iteration = mb.carried * scale;
  c.p2p_bytes_per_microbatch_per_pipeline = mb;
  c.p2p_bytes_per_link_class = link_class_bytes(model, scale);
  c.allreduce_bytes_per_iteration = reduced;
  return c;
}

PlanPredicted predicted_figures(const Timeline& timeline, const Evaluation& evaluation,
                                std::int64_t capacity_bytes) {
  PlanPredicted p;
  std::vector<PlanDevicePrediction> devices;
  double exposed = 0;
  for (std::size_t d = 0; d < timeline.devices.size(); ++d) {
    const DeviceTimeline& t = timeline.devices[d];
    const AllReduce& a = evaluation.allreduce[d];
    exposed = std::max(exposed, a.start_s + a.seconds - timeline.makespan_s);
    PlanDevicePrediction x;
    x.device = static_cast<DeviceId>(d);
    x.compute_s = t.compute_s;
    x.send_s = t.send_s;
    x.idle_s = t.idle_s;
    x.allreduce_s = a.seconds;
    x.max_inflight = t.max_inflight;
    x.peak_memory_bytes = t.peak.total();
    x.capacity_bytes = capacity_bytes;
    x.memory = t.peak;
    devices.push_back(x);
    p.peak_memory_bytes.push_back(t.peak.total());
  }
  p.iteration_s = evaluation.iteration_s;
  p.samples_per_s = evaluation.samples_per_s;
  p.bubble_ratio = evaluation.bubble_ratio;
  p.pipeline_makespan_s = timeline.makespan_s;
  p.allreduce_exposed_s = std::max(0.0, exposed);
  p.devices = std::move(devices);
  return p;
}

}  // namespace pulse
