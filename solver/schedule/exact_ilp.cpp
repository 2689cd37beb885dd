// The exact schedule model, for small instances.
//
// Operations o = (type t, microbatch m); p_t its occupancy (compute plus blocking sends),
// lat(t, u) the latency of a dependency edge of the op graph, K_d the microbatches device d
// may hold in flight, H the makespan of the best known schedule.
//
//   variables  s_o in [head_t, H - p_t]   start of o
//              C                          makespan
//              y_ab in {0, 1}             a before b, for pairs on one device whose order
//                                         no constraint below already implies
//   minimise   C
//   (a) end[o]        C - s_o >= p_t
//   (b) dep[a,b]      s_(u,m) - s_(t,m) >= lat(t, u)                 edges of the op graph
//   (c) order[t,m]    s_(t,m+1) - s_(t,m) >= p_t                     a stage runs microbatches
//                                                                    in order (symmetry breaking)
//   (d) before[a,b]   s_b - s_a >= p_a - H (1 - y_ab)                one op at a time
//       after[a,b]    s_a - s_b >= p_b - H y_ab
//   (e) mem[d,m]      s_(enter_d, m+K_d) - s_(leave_d, m) >= p_leave microbatch m+K_d enters
//                                                                    device d after m leaves
//   (f) bytes[f]      sum over holds h of f's device, h != f:        at the start of every
//                       A_h (after(W_h, f) - after(F_h, f))          forward f, what its
//                     <= room_d - A_f                                device holds fits
//
// where a hold h is a stage's microbatch on the device, from the start of its forward F_h to
// the end of its last backward W_h (W, or B without a split), holding A_h bytes (with the
// skip bytes on the device's first stage); after(x, f) is 1 when x runs after f on their
// device: the pair's y, or a constant where the order is implied. Held at f's start is
// "W_h after f" less "F_h after f" (an F after f has its W after f too), so (f) is linear,
// and with it the model is exact for the memory rule (cost/memory.hpp), not only for
// in-flight counts. K_d is then the most any order can hold (memory.hpp), an implied cut.
//
// A pair needs no y when (b)+(c) order it (t an ancestor of u and m_a <= m_b) or (e) does
// (m_b >= m_a + K_d and a's type precedes the leaving op). The timing rules are the
// execution engine's, so with blocking sends the optimum of this model is the optimum
// schedule under the cost model.

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "exact_ilp.hpp"
#include "op_graph.hpp"
#include "pulse/cost/memory.hpp"

namespace pulse::detail {

namespace {

// ancestor[t][u]: type t precedes type u within one microbatch (reflexive).
std::vector<std::vector<char>> ancestors(const OpGraph& g) {
  const std::size_t n = g.ops.size();
  std::vector<std::vector<char>> a(n, std::vector<char>(n, 0));
  for (std::size_t i = 0; i < n; ++i) a[i][i] = 1;
  std::vector<OpEdge> edges = g.edges;
  std::sort(edges.begin(), edges.end(),
            [](const OpEdge& x, const OpEdge& y) { return x.to < y.to; });
  // Topological order by index: close over predecessors in increasing target order.
  for (const OpEdge& e : edges) {
    for (std::size_t t = 0; t < n; ++t) {
      if (a[t][e.from]) a[t][e.to] = 1;
    }
  }
  return a;
}

struct ExactBuilder {
  const OpGraph& g;
  const EngineInput& in;
  double horizon;
  milp::Model model;
  std::vector<std::vector<int>> s;  // [type][microbatch] -> variable
  int makespan = -1;
  const std::vector<std::vector<char>>* anc = nullptr;
  std::map<std::tuple<int, int, int, int>, int> order_var;  // (t, ma, u, mb) -> y

  std::string op_name(int t, int m) const {
    return fmt::format("{}{}.{}", op_letter(g.ops[t].kind), g.ops[t].stage, m);
  }

  void variables() {
    const int M = in.num_microbatches;
    makespan = model.add_var("C", 0, horizon, 1.0, false);
    s.assign(g.ops.size(), std::vector<int>(M));
    for (std::size_t t = 0; t < g.ops.size(); ++t) {
      const double latest = std::max(g.head[t], horizon - std::max(g.tail[t], g.ops[t].occupancy));
      for (int m = 0; m < M; ++m) {
        s[t][m] = model.add_var("s[" + op_name(t, m) + "]", g.head[t], latest, 0.0, false);
      }
    }
  }

  void rows() {
    const int M = in.num_microbatches;
    for (std::size_t t = 0; t < g.ops.size(); ++t) {
      const double p = g.ops[t].occupancy;
      for (int m = 0; m < M; ++m) {
        model.add_row("end[" + op_name(t, m) + "]", {{makespan, 1}, {s[t][m], -1}}, p,
                      milp::kInfinity);  // (a)
        if (m + 1 < M) {
          model.add_row("order[" + op_name(t, m) + "]", {{s[t][m + 1], 1}, {s[t][m], -1}}, p,
                        milp::kInfinity);  // (c)
        }
      }
    }
    for (const OpEdge& e : g.edges) {
      for (int m = 0; m < M; ++m) {
        model.add_row("dep[" + op_name(e.from, m) + "," + op_name(e.to, m) + "]",
                      {{s[e.to][m], 1}, {s[e.from][m], -1}}, e.latency, milp::kInfinity);  // (b)
      }
    }
    for (std::size_t d = 0; d < g.by_device.size(); ++d) {
      const int enter = g.admitting[d], leave = g.releasing[d], K = in.inflight_limit[d];
      for (int m = 0; enter >= 0 && m + K < M; ++m) {
        model.add_row(fmt::format("mem[{},{}]", d, m), {{s[enter][m + K], 1}, {s[leave][m], -1}},
                      g.ops[leave].occupancy, milp::kInfinity);  // (e)
      }
      disjunctions(d);
      memory_rows(d);
    }
  }

  // (f) on device d, in units of its largest hold (coefficients near 1).
  void memory_rows(std::size_t d) {
    const std::vector<StageId> stages = in.model->layout.stages_on(static_cast<DeviceId>(d));
    if (stages.empty() || in.room.empty()) return;
    const std::int64_t skip = skip_bytes_per_microbatch(*in.model)[d];
    struct Hold {
      int forward, releasing;
      double units;
    };
    std::vector<Hold> holds;
    const OpKind last = in.split_backward ? OpKind::backward_weight : OpKind::backward;
    std::int64_t largest = 1;
    for (std::size_t k = 0; k < stages.size(); ++k) {
      const std::int64_t bytes = in.model->stages[stages[k]].activation_bytes + (k == 0 ? skip : 0);
      largest = std::max(largest, bytes);
      holds.push_back({g.find(OpKind::forward, stages[k]), g.find(last, stages[k]),
                       static_cast<double>(bytes)});
    }
    double all = 0;
    for (Hold& h : holds) {
      all += h.units * in.num_microbatches;
      h.units /= static_cast<double>(largest);
    }
    if (all <= static_cast<double>(in.room[d])) return;  // everything fits: no row binds
    const double room = static_cast<double>(in.room[d]) / static_cast<double>(largest);
    for (const Hold& f : holds) {
      for (int mf = 0; mf < in.num_microbatches; ++mf) memory_row(d, holds, f, mf, room);
    }
  }

  template <class Hold>
  void memory_row(std::size_t d, const std::vector<Hold>& holds, const Hold& f, int mf,
                  double room) {
    std::map<int, double> coef;
    double constant = 0;
    auto add = [&](const Before& b, double units) {
      constant += units * b.constant;
      if (b.var >= 0) coef[b.var] += units * b.coef;
    };
    for (const Hold& h : holds) {
      for (int mh = 0; mh < in.num_microbatches; ++mh) {
        if (h.forward == f.forward && mh == mf) continue;
        add(before(d, f.forward, mf, h.releasing, mh), h.units);
        add(before(d, f.forward, mf, h.forward, mh), -h.units);
      }
    }
    std::vector<milp::Term> terms;
    for (const auto& [var, c] : coef) {
      if (c != 0) terms.push_back({var, c});
    }
    const double limit = room - f.units - constant;
    if (terms.empty() && limit >= -1e-9) return;
    model.add_row("bytes[" + op_name(f.forward, mf) + "]", std::move(terms), -milp::kInfinity,
                  limit + 1e-9);
  }

  // Whether (t, ma) runs before (u, mb) on device d in every schedule of the model.
  bool implied(std::size_t d, int t, int ma, int u, int mb) const {
    if ((*anc)[t][u] && ma <= mb) return true;
    return mb >= ma + in.inflight_limit[d] && (*anc)[t][g.releasing[d]];
  }

  // (t, ma) before (u, mb), both on device d: constant + coef * y (var -1: no y).
  struct Before {
    double constant = 0;
    int var = -1;
    double coef = 0;
  };
  Before before(std::size_t d, int t, int ma, int u, int mb) const {
    if (t == u) return {ma < mb ? 1.0 : 0.0};
    if (auto it = order_var.find({t, ma, u, mb}); it != order_var.end()) return {0, it->second, 1};
    if (auto it = order_var.find({u, mb, t, ma}); it != order_var.end()) return {1, it->second, -1};
    return {implied(d, t, ma, u, mb) ? 1.0 : 0.0};
  }

  // (d) for each pair on device d whose order nothing else fixes.
  void disjunctions(std::size_t d) {
    const int M = in.num_microbatches;
    const auto& types = g.by_device[d];
    for (std::size_t i = 0; i < types.size(); ++i) {
      for (std::size_t j = i + 1; j < types.size(); ++j) {
        const int t = types[i], u = types[j];
        for (int ma = 0; ma < M; ++ma) {
          for (int mb = 0; mb < M; ++mb) {
            if (implied(d, t, ma, u, mb) || implied(d, u, mb, t, ma)) continue;
            const std::string pair = op_name(t, ma) + "," + op_name(u, mb);
            const int y = model.add_var("y[" + pair + "]", 0, 1, 0.0, true);
            order_var[{t, ma, u, mb}] = y;
            model.add_row("before[" + pair + "]", {{s[u][mb], 1}, {s[t][ma], -1}, {y, -horizon}},
                          g.ops[t].occupancy - horizon, milp::kInfinity);
            model.add_row("after[" + pair + "]", {{s[t][ma], 1}, {s[u][mb], -1}, {y, horizon}},
                          g.ops[u].occupancy, milp::kInfinity);
          }
        }
      }
    }
  }

  // The warm start: times and pairwise orders of a known schedule.
  void warm_start(const Timeline& known) {
    std::map<std::pair<int, int>, double> start;  // (type, microbatch) -> start
    for (const DeviceTimeline& d : known.devices) {
      for (const TimedOp& op : d.ops) {
        start[{g.find(op.op.kind, op.op.stage), op.op.mb}] = op.start_s;
      }
    }
    model.start.assign(model.num_vars(), 0.0);
    model.start[makespan] = known.makespan_s;
    for (std::size_t t = 0; t < s.size(); ++t) {
      for (std::size_t m = 0; m < s[t].size(); ++m) model.start[s[t][m]] = start[{t, m}];
    }
    for (const milp::Model::Row& r : model.rows()) {
      if (r.name.rfind("before[", 0) != 0) continue;
      const int y = r.terms[2].var;  // before: s_b - s_a - H y >= p_a - H
      model.start[y] = model.start[r.terms[0].var] >= model.start[r.terms[1].var] ? 1.0 : 0.0;
    }
  }
};

// Per-device orders from the solver's start times. Solver times carry rounding noise; ties
// fall back to microbatch then stage order.
Schedule schedule_from_times(std::vector<std::vector<std::pair<double, Op>>>& by_device,
                             bool split_backward) {
  Schedule s;
  s.split_backward = split_backward;
  for (auto& ops : by_device) {
    std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
      if (std::fabs(a.first - b.first) > 1e-9 * std::max(1.0, std::fabs(a.first))) {
        return a.first < b.first;
      }
      return std::pair{a.second.mb, a.second.stage} < std::pair{b.second.mb, b.second.stage};
    });
    std::vector<Op> order;
    for (const auto& [t, op] : ops) order.push_back(op);
    s.device_ops.push_back(std::move(order));
  }
  return s;
}

}  // namespace

int exact_model_size(const OpGraph& g, int num_microbatches) {
  return static_cast<int>(g.ops.size()) * num_microbatches;
}

EngineOutput solve_exact(const OpGraph& g, const EngineInput& in, const Timeline& best_known,
                         const milp::Limits& limits) {
  const std::vector<std::vector<char>> anc = ancestors(g);
  ExactBuilder b{g, in, best_known.makespan_s, {}, {}, -1, &anc, {}};
  b.variables();
  b.rows();
  EngineOutput out;
  const int rows = out.rows = b.model.num_rows();
  if (rows > kExactMaxRows) return out;
  b.warm_start(best_known);
  milp::Limits bounded = limits;
  bounded.max_nodes = std::min(limits.max_nodes, std::max(1, kExactRowNodes / std::max(rows, 1)));
  out.solved = true;
  out.milp = milp::solve(b.model, bounded);
  if (out.milp.x.empty()) return out;
  std::vector<std::vector<std::pair<double, Op>>> order(g.by_device.size());
  for (std::size_t t = 0; t < g.ops.size(); ++t) {
    for (int m = 0; m < in.num_microbatches; ++m) {
      order[g.ops[t].device].push_back(
          {out.milp.x[b.s[t][m]], Op{g.ops[t].kind, g.ops[t].stage, m}});
    }
  }
  out.schedule = schedule_from_times(order, in.split_backward);
  out.found = true;
  return out;
}

}  // namespace pulse::detail
