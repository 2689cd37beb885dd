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

}  // namespace pulse::detail
