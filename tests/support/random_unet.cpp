#include "support/random_unet.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

namespace pulse::test {

namespace {

// One layer at depth `level` (0 at the top; the activations shrink 4x per level).
Layer make_layer(const std::string& name, int level, double cost_scale, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> jitter(0.4, 2.5);
  const std::int64_t bytes = (std::int64_t{4} << 20) >> (2 * std::min(level, 4));
  Layer l;
  l.name = name;
  l.kind = "block";
  l.params = static_cast<std::int64_t>(2e6 * jitter(rng) * (1 + level));
  const double forward = 1e-3 * cost_scale * jitter(rng);
  l.forward_s = {{forward}};
  l.backward_s = {{forward * std::uniform_real_distribution<double>(1.6, 2.4)(rng)}};
  l.activation_bytes_per_sample = static_cast<std::int64_t>(bytes * 3 * jitter(rng));
  l.output_bytes_per_sample = bytes;
  return l;
}

}  // namespace

RandomUnet random_unet(std::uint64_t seed, int max_layers) {
  std::mt19937_64 rng(seed);
  RandomUnet out;
  ModelProfile& m = out.model;
  m.name = fmt::format("random-unet-{}", seed);
  m.file.name = m.file.path = m.name + ".json";
  m.microbatch_sizes = {1};
  m.device_types = {"T"};
  const int layers = std::uniform_int_distribution<int>(20, std::max(20, max_layers))(rng);
  const int middle = std::uniform_int_distribution<int>(1, 3)(rng);
  const int side = (layers - middle) / 2;
  const int levels = std::uniform_int_distribution<int>(2, 5)(rng);
  auto level_of = [&](int i) { return std::min(levels - 1, i * levels / std::max(1, side)); };
  for (int i = 0; i < side; ++i) {
    m.layers.push_back(make_layer(fmt::format("down{}", i), level_of(i), 1.0, rng));
  }
  for (int i = 0; i < layers - 2 * side; ++i) {
    m.layers.push_back(make_layer(fmt::format("mid{}", i), levels, 1.0, rng));
  }
  for (int i = side - 1; i >= 0; --i) {  // the decoder mirrors the encoder, heavier
    m.layers.push_back(make_layer(fmt::format("up{}", i), level_of(i), 1.5, rng));
  }
  // Nested skips: encoder layer i to its mirror, each kept with probability 3/4.
  const int n = static_cast<int>(m.layers.size());
  std::uniform_real_distribution<double> keep(0, 1), size(0.2, 3.0);
  for (int i = 0; i < side; ++i) {
    if (keep(rng) > 0.75) continue;
    const int producer = i, consumer = n - 1 - i;
    const std::int64_t bytes =
        static_cast<std::int64_t>(m.layers[producer].output_bytes_per_sample * size(rng));
    m.skips.push_back(Skip{fmt::format("skip{}", i), producer, consumer, bytes});
  }
  m.carried.push_back(Carried{"temb", 0, 5120, true});
  out.pp = std::uniform_int_distribution<int>(2, std::min(8, n / 4))(rng);
  out.global_batch = out.pp * std::uniform_int_distribution<int>(2, 4)(rng);
  // One node of pp devices: a fast class and a slow one, mixed.
  ClusterProfile& c = out.cluster;
  c.name = fmt::format("random-node-{}", seed);
  c.file.name = c.file.path = c.name + ".json";
  c.device_type = m.device_types.front();
  c.memory_bytes = std::int64_t{64} << 30;
  c.devices_per_node = out.pp;
  c.nodes = 1;
  const double fast = std::pow(10.0, std::uniform_real_distribution<double>(9.0, 10.7)(rng));
  c.link_classes = {LinkClass{"FAST", fast, 5e-6}, LinkClass{"SLOW", fast / 8, 2e-5}};
  c.intra_node.assign(out.pp, std::vector<int>(out.pp, 0));
  for (int a = 0; a < out.pp; ++a) {
    for (int b = 0; b < out.pp; ++b) {
      c.intra_node[a][b] = a == b ? -1 : (std::abs(a - b) == 1 || keep(rng) < 0.3 ? 0 : 1);
    }
  }
  for (int a = 0; a < out.pp; ++a) {  // links are symmetric
    for (int b = 0; b < a; ++b) c.intra_node[a][b] = c.intra_node[b][a];
  }
  return out;
}

}  // namespace pulse::test
