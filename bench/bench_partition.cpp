// Partition benchmark: time of the skip-aware V partitioner (and the sequential baseline)
// on generated models, L in {50, 200, 1000} layers and P in {2, 8, 32}.
//
//   build/bench_partition [--repeat N]
//
// Generated models are UNet-shaped: an encoder, a middle and a mirrored decoder, most
// encoder layers feeding a nested skip to their mirror, layer costs varying with
// "resolution" as in a UNet. A second shape has no skips at all (a plain DiT), where the V
// partitioner has no locality band to exploit. A third, "heavy", is the no-skip model with
// one layer a third of the way in carrying 10% of all compute: at P = 32 that layer alone is
// 3.2 even shares, the exact DP's band covers nearly every state, and the partitioner falls
// back to its bounded search (partition_v.cpp). Times are medians of --repeat runs; the
// "x ref" column divides by the time of a fixed reference workload (sorting 2^20 integers)
// measured in the same run, so figures from noisy, shared machines can be compared.
//
// A second table measures what the bounded search gives up: on the heavy shape, where the
// exact DP still finishes (L = 200), the bounded answer's objective over the exact one's.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "pulse/graph/layer_graph.hpp"
#include "pulse/partition/partition.hpp"

using namespace pulse;

namespace {

enum class Shape { unet, noskip, heavy };

const char* name_of(Shape s) {
  switch (s) {
    case Shape::unet:
      return "unet";
    case Shape::noskip:
      return "noskip";
    case Shape::heavy:
      return "heavy";
  }
  return "?";
}

ModelProfile generate(int layers, Shape shape, std::uint32_t seed) {
  const bool skips = shape == Shape::unet;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(0.7, 1.3);
  std::bernoulli_distribution has_skip(0.6);
  ModelProfile m;
  m.name = "generated";
  m.microbatch_sizes = {1};
  m.device_types = {"T"};
  const int encoder = layers * 45 / 100, middle_end = layers - encoder;
  for (int i = 0; i < layers; ++i) {
    // Distance from the ends stands for resolution: outer layers are larger activations
    // and more compute, inner ones carry more parameters.
    const int depth = std::min(i, layers - 1 - i);
    const double outer = 1.0 - static_cast<double>(depth) / (layers / 2.0 + 1);
    Layer l;
    l.name = "layer" + std::to_string(i);
    l.params = static_cast<std::int64_t>(1e6 * (1.5 - outer) * jitter(rng));
    const double forward = 1e-3 * (0.5 + 2.0 * outer) * jitter(rng);
    l.forward_s = {{forward}};
    l.backward_s = {{2 * forward}};
    if (shape == Shape::heavy && i == layers / 3) {
      // About 10% of the model's compute (the average layer is about 1/L of it).
      l.forward_s = {{forward * layers / 10}};
      l.backward_s = {{2 * forward * layers / 10}};
    }
    l.activation_bytes_per_sample = static_cast<std::int64_t>(4e6 * (0.2 + outer));
    l.output_bytes_per_sample = static_cast<std::int64_t>(1e6 * (0.2 + outer));
    m.layers.push_back(l);
  }
  if (skips) {
    for (int p = 0; p < encoder; ++p) {
      const int c = layers - 1 - p;
      if (c >= middle_end && has_skip(rng)) {
        m.skips.push_back(Skip{"", p, c, m.layers[p].output_bytes_per_sample});
      }
    }
  }
  return m;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double reference_workload() {
  std::mt19937 rng(1);
  std::vector<std::uint32_t> v(1 << 20);
  for (auto& x : v) x = rng();
  const auto t0 = std::chrono::steady_clock::now();
  std::sort(v.begin(), v.end());
  return seconds_since(t0);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

PartitionRequest request_for(const LayerGraph& g, int P) {
  PartitionRequest r;
  r.graph = &g;
  r.pp = P;
  r.links = PipelineLinks(P, LinkClass{"L", 2e10, 1e-5});
  r.memory_capacity = std::int64_t{32} << 30;
  r.inflight.assign(P, 1);
  return r;
}

PartitionAnswer partition_v_any(const PartitionRequest& r) {
  PartitionAnswer v = partition_v(r, SkipPolicy::local_only);
  return v.found() ? v : partition_v(r, SkipPolicy::allow_nonlocal);
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::max(1, std::atoi(argv[i + 1]));
  }
  std::vector<double> refs;
  for (int i = 0; i < 5; ++i) refs.push_back(reference_workload());
  const double ref = median(refs);
  std::printf("reference workload (sort 2^20 ints): %.2f ms\n\n", ref * 1e3);
  std::printf(
      "| shape  |    L |  P | V partition ms |   x ref | states | exact | V objective / bound "
      "| sequential ms |\n");
  std::printf(
      "|--------|-----:|---:|---------------:|--------:|-------:|:-----:|--------------------:"
      "|--------------:|\n");
  for (Shape shape : {Shape::unet, Shape::noskip, Shape::heavy}) {
    for (int L : {50, 200, 1000}) {
      const ModelProfile model = generate(L, shape, 42);
      const LayerGraph g = LayerGraph::build(model, 0, 1);
      for (int P : {2, 8, 32}) {
        if (2 * P > L) continue;
        const PartitionRequest r = request_for(g, P);
        std::vector<double> v_times, s_times;
        PartitionAnswer v;
        for (int k = 0; k < repeat; ++k) {
          auto t0 = std::chrono::steady_clock::now();
          v = partition_v_any(r);
          v_times.push_back(seconds_since(t0));
          t0 = std::chrono::steady_clock::now();
          const PartitionAnswer s = partition_sequential(r);
          s_times.push_back(seconds_since(t0));
          if (!s.found()) return 1;
        }
        if (!v.found()) return 1;
        const double vt = median(v_times);
        std::printf("| %-6s | %4d | %2d | %14.2f | %7.4f | %6d | %-5s | %19.4f | %13.2f |\n",
                    name_of(shape), L, P, vt * 1e3, vt / ref, v.result.states_explored,
                    v.result.exact ? "yes" : "no", v.result.objective_s / v.result.lower_bound_s,
                    median(s_times) * 1e3);
      }
    }
  }

  // What the bounded search gives up, where the exact DP can still be waited for.
  std::printf(
      "\nbounded search vs exact DP (heavy shape, unlimited transition budget for the exact "
      "run)\n\n");
  std::printf("|    L |  P | bounded ms | exact ms | bounded / exact objective |\n");
  std::printf("|-----:|---:|-----------:|---------:|--------------------------:|\n");
  for (int L : {50, 200}) {
    const ModelProfile model = generate(L, Shape::heavy, 42);
    const LayerGraph g = LayerGraph::build(model, 0, 1);
    for (int P : {8, 16, 25}) {
      if (2 * P > L) continue;
      PartitionRequest r = request_for(g, P);
      r.exact_transition_budget = 0;  // bounded from the first run
      auto t0 = std::chrono::steady_clock::now();
      const PartitionAnswer bounded = partition_v_any(r);
      const double bt = seconds_since(t0);
      r.exact_transition_budget = std::numeric_limits<std::int64_t>::max();
      t0 = std::chrono::steady_clock::now();
      const PartitionAnswer exact = partition_v_any(r);
      const double et = seconds_since(t0);
      if (!bounded.found() || !exact.found() || !exact.result.exact) return 1;
      std::printf("| %4d | %2d | %10.2f | %8.2f | %25.4f |\n", L, P, bt * 1e3, et * 1e3,
                  bounded.result.objective_s / exact.result.objective_s);
    }
  }
  return 0;
}
