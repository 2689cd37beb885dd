#include "op_graph.hpp"

#include <algorithm>
#include <limits>

namespace pulse::detail {

int OpGraph::find(OpKind kind, StageId stage) const {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == kind && ops[i].stage == stage) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// Adds the edges carried by transfers: forward ones from F(from), gradients from the
// backward op of `to`. `offset` accumulates the blocking sends before each.
void add_transfer_edges(const PipelineModel& m, OpGraph& g, OpKind back) {
  const int S = m.layout.num_stages();
  std::vector<double> fwd_sent(S, 0.0), bwd_sent(S, 0.0);
  for (const Transfer& t : m.transfers) {  // engine order: transfer index
    const int f_from = g.find(OpKind::forward, t.from), f_to = g.find(OpKind::forward, t.to);
    fwd_sent[t.from] += t.forward_s;
    const double fwd = m.overlap_comm ? t.forward_s : fwd_sent[t.from];
    g.edges.push_back({f_from, f_to, g.ops[f_from].compute + fwd});
    const int b_to = g.find(back, t.to), b_from = g.find(back, t.from);
    bwd_sent[t.to] += t.backward_s;
    const double bwd = m.overlap_comm ? t.backward_s : bwd_sent[t.to];
    g.edges.push_back({b_to, b_from, g.ops[b_to].compute + bwd});
  }
  if (!m.overlap_comm) {
    for (OpType& op : g.ops) {
      if (op.kind == OpKind::forward) op.occupancy += fwd_sent[op.stage];
      if (op.kind == back) op.occupancy += bwd_sent[op.stage];
    }
  }
}

void longest_paths(OpGraph& g) {
  const std::size_t n = g.ops.size();
  g.head.assign(n, 0.0);
  g.tail.assign(n, 0.0);
  // Ops are created in topological order (forwards by stage, then backwards downwards), and
  // every edge goes forward in that order, so one sweep each way suffices.
  std::vector<OpEdge> edges = g.edges;
  std::sort(edges.begin(), edges.end(),
            [](const OpEdge& a, const OpEdge& b) { return a.from < b.from; });
  for (const OpEdge& e : edges) g.head[e.to] = std::max(g.head[e.to], g.head[e.from] + e.latency);
  for (std::size_t i = 0; i < n; ++i) g.tail[i] = g.ops[i].compute;
  for (auto it = edges.rbegin(); it != edges.rend(); ++it) {
    g.tail[it->from] = std::max(g.tail[it->from], it->latency + g.tail[it->to]);
  }
  for (std::size_t i = 0; i < n; ++i) {
    g.critical_path = std::max(g.critical_path, g.head[i] + g.tail[i]);
  }
}

}  // namespace

OpGraph build_op_graph(const PipelineModel& m, bool split) {
  OpGraph g;
  const int S = m.layout.num_stages();
  const OpKind back = split ? OpKind::backward_input : OpKind::backward;
  for (StageId s = 0; s < S; ++s) {
    const double c = op_compute_s(m.stages[s], OpKind::forward);
    g.ops.push_back({OpKind::forward, s, m.layout.device[s], c, c});
  }
  for (StageId s = S - 1; s >= 0; --s) {
    const double c = op_compute_s(m.stages[s], back);
    g.ops.push_back({back, s, m.layout.device[s], c, c});
    if (split) {
      const double w = op_compute_s(m.stages[s], OpKind::backward_weight);
      g.ops.push_back({OpKind::backward_weight, s, m.layout.device[s], w, w});
    }
  }
  // Hand-overs between consecutive stages on one device, the turn at the last stage, and
  // the weight gradient after the input gradient.
  for (StageId s = 0; s + 1 < S; ++s) {
    if (m.layout.device[s] != m.layout.device[s + 1]) continue;
    const int f = g.find(OpKind::forward, s);
    g.edges.push_back({f, g.find(OpKind::forward, s + 1), g.ops[f].compute});
    const int b = g.find(back, s + 1);
    g.edges.push_back({b, g.find(back, s), g.ops[b].compute});
  }
  const int last_f = g.find(OpKind::forward, S - 1);
  g.edges.push_back({last_f, g.find(back, S - 1), g.ops[last_f].compute});
  if (split) {
    for (StageId s = 0; s < S; ++s) {
      const int i = g.find(back, s);
      g.edges.push_back({i, g.find(OpKind::backward_weight, s), g.ops[i].compute});
    }
  }
  add_transfer_edges(m, g, back);
  g.by_device.assign(m.num_devices(), {});
  for (std::size_t i = 0; i < g.ops.size(); ++i) g.by_device[g.ops[i].device].push_back(i);
  for (DeviceId d = 0; d < m.num_devices(); ++d) {
    const std::vector<StageId> stages = m.layout.stages_on(d);
    if (stages.empty()) {  // an idle device (possible in hand-made layouts)
      g.admitting.push_back(-1);
      g.releasing.push_back(-1);
      continue;
    }
    g.admitting.push_back(g.find(OpKind::forward, stages.front()));
    g.releasing.push_back(
        g.find(split ? OpKind::backward_weight : OpKind::backward, stages.front()));
  }
  longest_paths(g);
  return g;
}

namespace {

struct Job {
  double release, work, tail;
};

// Jackson's preemptive schedule: optimal for one machine with release times and tails when
// preemption is allowed, so its value bounds the non-preemptive problem from below.
double jackson_preemptive(std::vector<Job> jobs) {
  std::sort(jobs.begin(), jobs.end(),
            [](const Job& a, const Job& b) { return a.release < b.release; });
  auto by_tail = [](const Job& a, const Job& b) { return a.tail < b.tail; };
  std::vector<Job> ready;  // max-heap on tail
  double t = 0, value = 0;
  std::size_t next = 0;
  while (next < jobs.size() || !ready.empty()) {
    if (ready.empty()) t = std::max(t, jobs[next].release);
    while (next < jobs.size() && jobs[next].release <= t) {
      ready.push_back(jobs[next++]);
      std::push_heap(ready.begin(), ready.end(), by_tail);
    }
    std::pop_heap(ready.begin(), ready.end(), by_tail);
    Job& j = ready.back();
    // Every step either finishes j or advances to the next release, which lies strictly
    // after t (releases up to t were just taken): no step can stall on rounding.
    const double finish = t + j.work;
    if (next < jobs.size() && jobs[next].release < finish) {
      j.work = finish - jobs[next].release;
      t = jobs[next].release;
      std::push_heap(ready.begin(), ready.end(), by_tail);
    } else {
      t = finish;
      value = std::max(value, t + j.tail);
      ready.pop_back();
    }
  }
  return value;
}

}  // namespace

double schedule_lower_bound(const OpGraph& g, int M, const std::vector<int>& inflight_limit) {
  const std::size_t n = g.ops.size();
  // release[t][m]: earliest start; tail[t][m]: least time from the op's end to the end.
  std::vector<std::vector<double>> release(n, std::vector<double>(M, 0.0));
  std::vector<std::vector<double>> tail(n, std::vector<double>(M, 0.0));
  std::vector<OpEdge> edges = g.edges;
  std::sort(edges.begin(), edges.end(),
            [](const OpEdge& a, const OpEdge& b) { return a.from < b.from; });
  for (int m = 0; m < M; ++m) {
    for (std::size_t t = 0; t < n; ++t) {
      if (m > 0) release[t][m] = std::max(release[t][m], release[t][m - 1] + g.ops[t].occupancy);
    }
    for (std::size_t d = 0; d < g.by_device.size(); ++d) {
      const int K = inflight_limit[d];
      if (m >= K && g.admitting[d] >= 0) {
        const int enter = g.admitting[d], leave = g.releasing[d];
        release[enter][m] =
            std::max(release[enter][m], release[leave][m - K] + g.ops[leave].occupancy);
      }
    }
    for (const OpEdge& e : edges) {
      release[e.to][m] = std::max(release[e.to][m], release[e.from][m] + e.latency);
    }
  }
  for (int m = M - 1; m >= 0; --m) {
    for (auto it = edges.rbegin(); it != edges.rend(); ++it) {
      const double after =
          it->latency - g.ops[it->from].occupancy + g.ops[it->to].occupancy + tail[it->to][m];
      tail[it->from][m] = std::max(tail[it->from][m], after);
    }
    for (std::size_t t = 0; t < n; ++t) {
      if (m + 1 < M) tail[t][m] = std::max(tail[t][m], g.ops[t].occupancy + tail[t][m + 1]);
    }
  }
  double bound = g.critical_path;
  for (const std::vector<int>& ops : g.by_device) {
    std::vector<Job> jobs;
    for (int t : ops) {
      for (int m = 0; m < M; ++m) jobs.push_back({release[t][m], g.ops[t].occupancy, tail[t][m]});
    }
    bound = std::max(bound, jackson_preemptive(std::move(jobs)));
  }
  return bound;
}

}  // namespace pulse::detail
