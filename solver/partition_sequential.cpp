// The conventional baseline: P contiguous stages, stage s on device s, and every skip
// tensor relayed through each stage boundary between its producer and its consumer (what
// chain-only runtimes such as PyTorch pipelining and DeepSpeed do).
//
//   V_0(b)   = cost_0([0, b])
//   V_s(b)   = min over a of max(V_{s-1}(a-1), cost_s([a, b]))      s = 1..P-1
//   answer   = V_{P-1}(L-1)
//
// cost_s([a, b]) = compute + forward send at cut b (output, live skips, carried tensors;
// one message each) + backward send at cut a-1, as PipelineModel derives them; memory_s
// (weights and state plus in-flight activations and relayed skips) must fit. The same
// growing upper bound as the V partitioner prunes the search.

#include <algorithm>
#include <optional>

#include "partition_common.hpp"
#include "pulse/partition.hpp"

namespace pulse {

namespace {

using detail::DeviceCost;
using detail::DpValue;
using detail::LayerPrefix;
using detail::Objective;

class SequentialDynamicProgram {
 public:
  SequentialDynamicProgram(const PartitionRequest& request, Objective objective)
      : r_(request),
        prefix_(*request.graph),
        L_(prefix_.num_layers),
        P_(request.pp),
        objective_(objective) {
    live_bytes_.assign(L_, 0);
    live_count_.assign(L_, 0);
    by_producer_.assign(L_, {});
    for (const SkipPair& s : request.graph->skip_pairs()) {
      for (int x = s.producer; x < s.consumer; ++x) {
        live_bytes_[x] += s.bytes;
        live_count_[x] += 1;
      }
      by_producer_[s.producer].push_back({s.consumer, s.bytes});
    }
  }

  struct Found {
    std::vector<LayerId> first_layer;
    DpValue value;
    std::vector<DeviceCost> devices;
    int states = 0;
  };

  std::optional<Found> run(double bound);

 private:
  struct Cell {
    DpValue value;
    int start = -1;  // first layer of stage s; -1 when unreachable
    DeviceCost cost;
  };

  /// `inside`: bytes of skips with both ends in [a, b], cached on the device.
  DeviceCost cost(int s, int a, int b, std::int64_t inside) const;
  bool within(const DeviceCost& c, double bound) const {
    if (objective_ == Objective::memory) return static_cast<double>(c.memory) <= bound;
    return c.load <= bound && c.memory <= r_.memory_capacity;
  }

  const PartitionRequest& r_;
  LayerPrefix prefix_;
  int L_, P_;
  Objective objective_;
  std::vector<std::int64_t> live_bytes_;  // [x]: skip bytes crossing the cut after layer x
  std::vector<int> live_count_;
  std::vector<std::vector<std::pair<int, std::int64_t>>> by_producer_;  // (consumer, bytes)
};

DeviceCost SequentialDynamicProgram::cost(int s, int a, int b, std::int64_t inside) const {
  const LayerPrefix& p = prefix_;
  DeviceCost c;
  double sends = 0;
  std::int64_t relayed = 0;
  if (s + 1 < P_) {
    const std::int64_t bytes = p.output[b] + live_bytes_[b] + p.carried_bytes_upto[b + 1];
    sends += detail::message_time(r_.links[s][s + 1],
                                  1 + live_count_[b] + p.carried_count_upto[b + 1], bytes);
    c.bytes += bytes;
    relayed += live_bytes_[b];
  }
  if (s > 0) {
    const std::int64_t bytes = p.output[a - 1] + live_bytes_[a - 1] + p.carried_grad_bytes_upto[a];
    sends += detail::message_time(r_.links[s][s - 1],
                                  1 + live_count_[a - 1] + p.carried_grad_count_upto[a], bytes);
    c.bytes += bytes;
    relayed += live_bytes_[a - 1];
  }
  c.load = p.compute_in(a, b) + (r_.overlap_comm ? 0.0 : sends);
  c.memory = r_.memory.static_bytes(p.params_in(a, b), r_.dp) +
             static_cast<std::int64_t>(r_.inflight[s]) * (p.activation_in(a, b) + relayed + inside);
  return c;
}

std::optional<SequentialDynamicProgram::Found> SequentialDynamicProgram::run(double bound) {
  const bool time = objective_ == Objective::time;
  // table[s][b]: best value with stages 0..s covering layers [0, b].
  std::vector<std::vector<Cell>> table(P_, std::vector<Cell>(L_));
  int states = 0;
  for (int s = 0; s < P_; ++s) {
    // Stage s ends at b in [s, L - P + s]: each later stage needs a layer.
    for (int b = s; b <= L_ - P_ + s; ++b) {
      if (s == P_ - 1 && b != L_ - 1) continue;
      Cell best;
      std::int64_t inside = 0;
      for (int a = b; a >= s; --a) {
        for (const auto& [consumer, bytes] : by_producer_[a]) {
          if (consumer <= b) inside += bytes;
        }
        if (time && prefix_.compute_in(a, b) > bound) break;
        const Cell* prev = s == 0 ? nullptr : &table[s - 1][a - 1];
        if (s == 0 && a != 0) continue;
        if (prev && prev->start < 0) continue;
        const DeviceCost c = cost(s, a, b, inside);
        if (!within(c, bound)) continue;
        const DpValue v =
            detail::extend(prev ? prev->value : DpValue{}, c, objective_, r_.memory_capacity);
        if (best.start < 0 || detail::better(v, best.value)) best = Cell{v, a, c};
      }
      if (best.start >= 0) ++states;
      table[s][b] = best;
    }
  }
  const Cell& last = table[P_ - 1][L_ - 1];
  if (last.start < 0) return std::nullopt;
  Found f;
  f.first_layer.assign(P_ + 1, 0);
  f.first_layer[P_] = L_;
  f.devices.resize(P_);
  int b = L_ - 1;
  for (int s = P_ - 1; s >= 0; --s) {
    const Cell& cell = table[s][b];
    f.first_layer[s] = cell.start;
    f.devices[s] = cell.cost;
    b = cell.start - 1;
  }
  f.value = last.value;
  f.states = states;
  return f;
}

}  // namespace

PartitionOutcome partition_sequential(const PartitionRequest& request) {
  PartitionOutcome outcome;
  const LayerGraph& graph = *request.graph;
  const int L = graph.num_layers();
  if (L < request.pp) return outcome;
  const LayerPrefix prefix(graph);
  const double lower_bound = prefix.compute[L] / request.pp;

  SequentialDynamicProgram time_dp(request, Objective::time);
  if (auto found = detail::solve_increasing(time_dp, lower_bound)) {
    PartitionResult& r = outcome.result;
    outcome.found = true;
    r.layout = sequential_layout(found->first_layer, request.pp);
    r.method = "sequential-dp";
    r.objective_s = found->value.primary;
    r.lower_bound_s = lower_bound;
    r.bytes_per_microbatch = found->value.bytes;
    r.exact = true;
    r.states_explored = found->states;
    bool local = true;
    for (const SkipPair& s : graph.skip_pairs()) {
      local = local && r.layout.stage_of(s.producer) == r.layout.stage_of(s.consumer);
    }
    r.all_skips_local = local;
    detail::record_devices(found->devices, r);
    return outcome;
  }
  SequentialDynamicProgram memory_dp(request, Objective::memory);
  outcome.shortfall = detail::smallest_shortfall(memory_dp, request, prefix.params[L]);
  return outcome;
}

}  // namespace pulse
