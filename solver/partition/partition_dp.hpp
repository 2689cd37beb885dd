// Pieces the partition dynamic programs share: prefix sums over the layer sequence, the
// lexicographic value they minimise, and the upper-bound schedule that keeps them fast.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "pulse/cost/cost_model.hpp"
#include "pulse/cost/memory.hpp"
#include "pulse/graph/layer_graph.hpp"
#include "pulse/partition/partition.hpp"

namespace pulse::detail {

/// Prefix sums over layers: index x covers layers [0, x). `upto` arrays are indexed by
/// layer + 1 and count carried tensors whose producer is at or before that layer (input
/// tensors, producer -1, count everywhere).
struct LayerPrefix {
  explicit LayerPrefix(const LayerGraph& graph);

  int num_layers = 0;
  std::vector<double> compute;  ///< forward + backward seconds.
  std::vector<std::int64_t> params;
  std::vector<std::int64_t> activation;
  std::vector<std::int64_t> output;  ///< Per layer, not a prefix.
  std::vector<std::int64_t> skip_bytes_by_producer;
  std::vector<std::int64_t> skip_bytes_by_consumer;
  std::vector<int> skip_count_by_producer;
  std::vector<int> skip_count_by_consumer;
  std::vector<std::int64_t> carried_bytes_upto;
  std::vector<std::int64_t> carried_grad_bytes_upto;
  std::vector<int> carried_count_upto;
  std::vector<int> carried_grad_count_upto;

  /// Sums over the inclusive layer range [a, b]; zero when b < a.
  double compute_in(int a, int b) const { return b < a ? 0.0 : compute[b + 1] - compute[a]; }
  std::int64_t params_in(int a, int b) const { return b < a ? 0 : params[b + 1] - params[a]; }
  std::int64_t activation_in(int a, int b) const {
    return b < a ? 0 : activation[b + 1] - activation[a];
  }
  /// No partition over `pp` devices has a device load under this: the total compute shared
  /// evenly, and the heaviest single layer, which some device must run whole.
  double load_lower_bound(int pp) const;
};

/// The skips of a model as a grid over ranks, for sums over a producer range and a consumer
/// range in O(1) (sum()): cells[x * cols + y] sums the skips whose producer is among the x
/// first producers and whose consumer among the y first consumers; producer_rank[a]
/// (consumer_rank[b]) counts the producers (consumers) before layer a (b). So skips with
/// p < a and c < b are at [producer_rank[a] * cols + consumer_rank[b]], and the grid has
/// (skips + 1)^2 cells at most, not (L + 1)^2 (8 skips of a 4096-layer model: 81; 2048
/// skips: 4.2 M, 67 MB).
///
/// A function of the layer count and the skips alone, so the DPs of a thread share the last
/// two built (of()): the tuner builds DPs per configuration over two or three distinct skip
/// sets (the microbatch sizes scale the bytes), and at 2048 skips building and faulting in
/// a grid each time cost about a tenth of the 4096-layer tuned limits row.
struct SkipGrid {
  struct Skips {
    std::int64_t bytes = 0, count = 0;
  };
  int num_layers = 0;
  std::vector<SkipPair> skips;  ///< What it was built from (their index aside).
  std::vector<Skips> cells;
  std::vector<int> producer_rank, consumer_rank;
  std::size_t cols = 0;

  /// The grid of these skips: one this thread built lately, or a new one.
  static std::shared_ptr<const SkipGrid> of(int num_layers, const std::vector<SkipPair>& skips);

  /// Skips with producer in [pa, pb] and consumer in [ca, cb]; empty ranges give none.
  Skips sum(int pa, int pb, int ca, int cb) const {
    if (pb < pa || cb < ca) return {};
    auto at = [&](int a, int b) -> const Skips& {
      return cells[producer_rank[a] * cols + consumer_rank[b]];
    };
    const Skips &x = at(pb + 1, cb + 1), &y = at(pa, cb + 1), &z = at(pb + 1, ca), &w = at(pa, ca);
    return {x.bytes - y.bytes - z.bytes + w.bytes, x.count - y.count - z.count + w.count};
  }

 private:
  bool built_from(int layers, const std::vector<SkipPair>& pairs) const;
  void build();
};

/// What a device's share costs per microbatch.
struct DeviceCost {
  double load = 0;          ///< Compute plus blocking sends, seconds.
  std::int64_t memory = 0;  ///< Bound on bytes held with the assumed microbatches in flight.
  std::int64_t bytes = 0;   ///< P2P bytes it sends, both directions.
};

/// Which quantity the DP minimises the maximum of.
enum class Objective { time, memory };

/// Lexicographic DP value: the largest primary cost so far, then bytes moved, then the
/// smallest memory headroom (larger is better).
struct DpValue {
  double primary = 0;
  std::int64_t bytes = 0;
  std::int64_t headroom = std::numeric_limits<std::int64_t>::max();
};

/// A partition DP's answer: stage boundaries, its value, each device's cost, states explored.
struct DpFound {
  std::vector<LayerId> first_layer;
  DpValue value;
  std::vector<DeviceCost> devices;
  int states = 0;
  bool exact = true;  ///< False when a bounded search (not the full DP) found it.
  /// The most transitions any exact run of the search examined (PartitionResult's).
  std::int64_t exact_transitions = 0;
};

inline double primary_of(const DeviceCost& c, Objective objective) {
  return objective == Objective::time ? c.load : static_cast<double>(c.memory);
}

inline DpValue extend(const DpValue& v, const DeviceCost& c, Objective objective,
                      std::int64_t capacity) {
  return DpValue{std::max(v.primary, primary_of(c, objective)), v.bytes + c.bytes,
                 std::min(v.headroom, capacity - c.memory)};
}

/// True when `a` is strictly better than `b`. Primary costs within a relative 1e-12 tie.
inline bool better(const DpValue& a, const DpValue& b) {
  const double tol = 1e-12 * std::max(std::fabs(a.primary), std::fabs(b.primary));
  if (a.primary < b.primary - tol) return true;
  if (a.primary > b.primary + tol) return false;
  if (a.bytes != b.bytes) return a.bytes < b.bytes;
  return a.headroom > b.headroom;
}

/// Upper bounds tried in turn, as multiples of the lower bound. A DP run only keeps states
/// whose devices stay under the bound, so early runs are cheap; the first run that finds a
/// partition has found the optimum, because the optimum is under that bound too.
///
/// Two schedules, because the two DPs pay differently for a loose bound. The V DP's states
/// form a band whose width grows with the slack (bound - lower bound), and its transitions
/// per state grow the same way, so a run costs about the slack squared; runs under the
/// optimum die early. Fine steps near 1 therefore pay off: on a 1000-layer model without
/// skips at P = 32 they cut the time from 3.2 s to 27 ms (bench/bench_partition.cpp). The
/// sequential DP's run costs about the same at any bound, so it takes few, coarse steps.
inline const std::vector<double>& fine_upper_bound_factors() {
  static const std::vector<double> factors = {
      1.0001, 1.0003, 1.001, 1.003, 1.01, 1.02, 1.05,
      1.1,    1.2,    1.4,   1.8,   2.6,  4.2,  std::numeric_limits<double>::infinity()};
  return factors;
}
inline const std::vector<double>& coarse_upper_bound_factors() {
  static const std::vector<double> factors = {
      1.02, 1.05, 1.1, 1.2, 1.4, 1.8, 2.6, 4.2, std::numeric_limits<double>::infinity()};
  return factors;
}

/// Runs `program` under each upper bound in turn; the first bound that admits a partition
/// gives the optimum.
template <class Program>
auto solve_increasing(Program& program, double lower_bound, const std::vector<double>& factors)
    -> decltype(program.run(0.0)) {
  for (double factor : factors) {
    if (auto found = program.run(lower_bound * factor)) return found;
  }
  return std::nullopt;
}

/// When no partition fits: runs `memory_program` (a DP minimising the largest device memory)
/// and reports that partition's fullest device, so the message can say by how much.
template <class Program>
std::optional<MemoryShortfall> smallest_shortfall(Program& memory_program,
                                                  const PartitionRequest& request,
                                                  const LayerPrefix& prefix) {
  MemoryShortfall shortfall;
  shortfall.capacity_bytes = request.memory_capacity;
  // The fullest device holds at least an even share of the weights' state and of the
  // activations at the fewest microbatches any device keeps in flight. Only where the search
  // starts: the first bound that admits a partition gives the optimum whatever the floor,
  // but from the weights alone a model whose activations dominate only found one at the
  // unbounded (unpruned, slowest) run.
  const int L = prefix.num_layers;
  const int fewest = request.inflight.empty()
                         ? 1
                         : *std::min_element(request.inflight.begin(), request.inflight.end());
  const double floor =
      (static_cast<double>(request.memory.static_bytes(prefix.params[L], request.dp)) +
       static_cast<double>(fewest) * static_cast<double>(prefix.activation[L])) /
      request.pp;
  const auto found =
      solve_increasing(memory_program, std::max(floor, 1.0), coarse_upper_bound_factors());
  if (!found) return std::nullopt;  // no partition of this shape at all, memory aside
  for (std::size_t d = 0; d < found->devices.size(); ++d) {
    if (found->devices[d].memory > shortfall.needed_bytes) {
      shortfall.needed_bytes = found->devices[d].memory;
      shortfall.device = static_cast<DeviceId>(d);
    }
  }
  return shortfall;
}

/// Whether the weights' state alone (weights, gradients, optimizer state) overflows a device
/// under every partition: some device holds at least ceil(params / pp) of the parameters,
/// and every memory bound the DPs check is at least that many parameters' static bytes.
/// Then no run of a time DP can admit a partition (each would try every upper bound in
/// turn, the last unpruned), and the answer is the memory DP's shortfall at once.
inline std::int64_t weights_alone_bytes(const PartitionRequest& request,
                                        const LayerPrefix& prefix) {
  const std::int64_t total = prefix.params[prefix.num_layers];
  return request.memory.static_bytes((total + request.pp - 1) / request.pp, request.dp);
}
inline bool weights_alone_overflow(const PartitionRequest& request, const LayerPrefix& prefix) {
  return weights_alone_bytes(request, prefix) > request.memory_capacity;
}

/// Past this many layers a memory DP run (the smallest shortfall below) takes seconds and
/// the search for the most frugal partition minutes: where the weights alone overflow, the
/// shortfall is their floor (MemoryShortfall::weights_alone).
inline constexpr int kShortfallSearchMaxLayers = 1024;

/// The shortfall from the weights' floor, when it is the answer (above); nullopt otherwise.
inline std::optional<MemoryShortfall> weights_alone_shortfall(const PartitionRequest& request,
                                                              const LayerPrefix& prefix) {
  if (prefix.num_layers <= kShortfallSearchMaxLayers) return std::nullopt;
  if (!weights_alone_overflow(request, prefix)) return std::nullopt;
  return MemoryShortfall{0, weights_alone_bytes(request, prefix), request.memory_capacity, true};
}

/// Copies per-device loads and memory bounds into a result.
inline void record_devices(const std::vector<DeviceCost>& devices, PartitionResult& result) {
  for (const DeviceCost& c : devices) {
    result.device_load_s.push_back(c.load);
    result.device_memory_bytes.push_back(c.memory);
  }
}

/// partition_v for request.waves > 1 (partition_waves.cpp).
PartitionAnswer partition_waves(const PartitionRequest& request, SkipPolicy policy);

/// The link a non-local skip may take when the DP cannot know its destination: the slowest
/// among the pipeline's device pairs (so the DP never underestimates).
LinkClass slowest_link(const PipelineLinks& links);
/// True when every pair of distinct pipeline devices has the same link.
bool links_uniform(const PipelineLinks& links);

}  // namespace pulse::detail
