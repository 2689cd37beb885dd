#include "test_support.hpp"

#include "pulse/compile/plan_builder.hpp"
#include "pulse/cost/memory.hpp"
#include "pulse/plan/plan_codec.hpp"

#include <algorithm>
#include <functional>
#include <limits>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace pulse::test {

std::string plan_text(const CompiledPlan& plan, const ModelProfile& model,
                      const ClusterProfile& cluster) {
  return write_plan(build_plan(plan, model, cluster));
}

std::string source_dir() {
  return PULSE_SOURCE_DIR;
}
std::string profile_path(const std::string& relative) {
  return fmt::format("{}/profiles/{}", source_dir(), relative);
}

Inputs shipped(const std::string& model, const std::string& cluster) {
  auto m = load_model_profile(profile_path("models/" + model + ".json"));
  auto c = load_cluster_profile(profile_path("clusters/" + cluster + ".json"));
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return {m.value(), c.value()};
}

CompiledPlan compile_ok(const Inputs& in, const PlanOptions& options) {
  auto plan = compile_plan(in.model, in.cluster, options);
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
  return plan.value();
}

std::string tiny_v_plan_text() {
  const Inputs in = shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.pp = 2;
  o.family = "v";
  o.global_batch = 16;
  o.microbatch_size = 1;
  return plan_text(compile_ok(in, o), in.model, in.cluster);
}

ModelProfile make_model(const std::vector<LayerSpec>& layers,
                        const std::vector<std::pair<int, int>>& skips, std::int64_t skip_bytes) {
  ModelProfile m;
  m.name = "synthetic";
  m.microbatch_sizes = {1};
  m.device_types = {"T"};
  for (std::size_t i = 0; i < layers.size(); ++i) {
    Layer l;
    l.name = fmt::format("L{}", i);
    l.params = layers[i].params;
    l.forward_s = {{layers[i].forward_s}};
    l.backward_s = {{2 * layers[i].forward_s}};
    l.activation_bytes_per_sample = layers[i].activation_bytes;
    l.output_bytes_per_sample = layers[i].output_bytes;
    m.layers.push_back(l);
  }
  for (const auto& [p, c] : skips) {
    m.skips.push_back(Skip{fmt::format("L{}->L{}", p, c), p, c, skip_bytes});
  }
  m.file.name = m.file.path = "synthetic.json";
  return m;
}

PipelineLinks uniform_links(int pp, double bandwidth, double latency) {
  return PipelineLinks(pp, LinkClass{"L", bandwidth, latency});
}

PipelineLinks free_links(int pp) {
  return uniform_links(pp, std::numeric_limits<double>::infinity(), 0.0);
}

ClusterProfile make_cluster(int per_node, int nodes, std::int64_t memory_bytes, double bandwidth,
                            double latency) {
  ClusterProfile c;
  c.name = "synthetic-cluster";
  c.file.name = c.file.path = "synthetic-cluster.json";
  c.device_type = std::string("T");  // not a literal: GCC 12 -Wrestrict false positive
  c.memory_bytes = memory_bytes;
  c.devices_per_node = per_node;
  c.nodes = nodes;
  c.link_classes = {LinkClass{"L", bandwidth, latency}, LinkClass{"N", bandwidth / 4, 4 * latency}};
  c.intra_node.assign(per_node, std::vector<int>(per_node, 0));
  for (int i = 0; i < per_node; ++i) c.intra_node[i][i] = -1;
  c.inter_node = nodes > 1 ? 1 : -1;
  return c;
}

std::vector<std::pair<int, int>> random_nested_skips(int n, std::mt19937& rng) {
  // Pair positions around a random centre: producer i < centre pairs with a consumer after
  // the centre, in mirrored order, skipping some layers on either side.
  std::vector<std::pair<int, int>> skips;
  std::uniform_int_distribution<int> coin(0, 2);
  int p = 0, c = n - 1;
  while (p + 1 < c) {
    if (coin(rng) == 0) {
      ++p;
    } else if (coin(rng) == 0) {
      --c;
    } else {
      skips.push_back({p++, c--});
    }
  }
  return skips;
}

std::vector<std::pair<int, int>> random_skips(int n, std::mt19937& rng) {
  std::vector<std::pair<int, int>> skips;
  std::uniform_int_distribution<int> layer(0, n - 1);
  for (int k = 0; k < n / 3; ++k) {
    int a = layer(rng), b = layer(rng);
    if (a == b) continue;
    if (a > b) std::swap(a, b);
    if (std::find(skips.begin(), skips.end(), std::pair{a, b}) == skips.end()) {
      skips.push_back({a, b});
    }
  }
  return skips;
}

std::vector<std::int64_t> memory_bound(const PipelineModel& model, const PartitionRequest& r) {
  std::vector<std::int64_t> out;
  const auto params = model.device_params();
  const auto per_mb = bytes_per_microbatch_at_most(model);
  for (int d = 0; d < model.num_devices(); ++d) {
    out.push_back(r.memory.static_bytes(params[d], r.dp) + r.inflight[d] * per_mb[d]);
  }
  return out;
}

namespace {

// Calls `visit` with every strictly increasing sequence of `k` cuts in [1, n-1].
void for_each_cuts(int n, int k, const std::function<void(const std::vector<int>&)>& visit) {
  std::vector<int> cuts(k);
  std::function<void(int, int)> rec = [&](int i, int from) {
    if (i == k) {
      visit(cuts);
      return;
    }
    for (int c = from; c <= n - (k - i); ++c) {
      cuts[i] = c;
      rec(i + 1, c + 1);
    }
  };
  rec(0, 1);
}

void consider(const PartitionRequest& r, const StageLayout& layout, SkipRouting routing,
              bool local_only, BruteForce& best) {
  const PipelineModel model =
      build_pipeline_model(*r.graph, layout, routing, r.links, r.overlap_comm);
  const std::vector<std::int64_t> memory = memory_bound(model, r);
  const std::int64_t peak = *std::max_element(memory.begin(), memory.end());
  if (best.min_peak_memory < 0 || peak < best.min_peak_memory) best.min_peak_memory = peak;
  if (peak > r.memory_capacity) return;
  if (local_only) {
    for (const SkipPlacement& s : model.skips) {
      if (!s.local) return;
    }
  }
  const std::vector<double> load = model.device_load();
  const double objective = *std::max_element(load.begin(), load.end());
  if (best.objective < 0 || objective < best.objective) {
    best.objective = objective;
    best.first_layer = layout.first_layer;
  }
}

}  // namespace

BruteForce brute_force_v(const PartitionRequest& r, bool local_only) {
  // 2P-1 segments: encoder stages 0..P-2, the bottom (stages P-1 and P on one device, its
  // inner split irrelevant to every cost), decoder stages P+1..2P-1.
  BruteForce best;
  const int n = r.graph->num_layers(), P = r.pp;
  for_each_cuts(n, 2 * P - 2, [&](const std::vector<int>& cuts) {
    std::vector<LayerId> first{0};
    for (int i = 0; i < P - 1; ++i) first.push_back(cuts[i]);
    const int bottom_start = P >= 2 ? cuts[P - 2] : 0;
    const int bottom_end = P >= 2 ? cuts[P - 1] : n;
    if (bottom_end - bottom_start < 2) return;
    first.push_back(bottom_start + 1);
    for (int i = P - 1; i < 2 * P - 2; ++i) first.push_back(cuts[i]);
    first.push_back(n);
    consider(r, v_layout(first, P), SkipRouting::direct, local_only, best);
  });
  return best;
}

BruteForce brute_force_sequential(const PartitionRequest& r) {
  BruteForce best;
  const int n = r.graph->num_layers();
  for_each_cuts(n, r.pp - 1, [&](const std::vector<int>& cuts) {
    std::vector<LayerId> first{0};
    first.insert(first.end(), cuts.begin(), cuts.end());
    first.push_back(n);
    consider(r, sequential_layout(first, r.pp), r.routing, false, best);
  });
  return best;
}

void expect_same_timeline(const Timeline& a, const Timeline& b, const std::string& what) {
  EXPECT_EQ(a.makespan_s, b.makespan_s) << what;
  ASSERT_EQ(a.devices.size(), b.devices.size()) << what;
  for (std::size_t d = 0; d < a.devices.size(); ++d) {
    const DeviceTimeline& x = a.devices[d];
    const DeviceTimeline& y = b.devices[d];
    const std::string at = what + ", device " + std::to_string(d);
    ASSERT_EQ(x.ops.size(), y.ops.size()) << at;
    for (std::size_t k = 0; k < x.ops.size(); ++k) {
      EXPECT_EQ(x.ops[k].op, y.ops[k].op) << at;
      EXPECT_EQ(x.ops[k].start_s, y.ops[k].start_s) << at;
      EXPECT_EQ(x.ops[k].end_s, y.ops[k].end_s) << at;
      EXPECT_EQ(x.ops[k].busy_until_s, y.ops[k].busy_until_s) << at;
    }
    EXPECT_EQ(x.compute_s, y.compute_s) << at;
    EXPECT_EQ(x.send_s, y.send_s) << at;
    EXPECT_EQ(x.idle_s, y.idle_s) << at;
    EXPECT_EQ(x.peak.weights, y.peak.weights) << at;
    EXPECT_EQ(x.peak.gradients, y.peak.gradients) << at;
    EXPECT_EQ(x.peak.optimizer, y.peak.optimizer) << at;
    EXPECT_EQ(x.peak.workspace, y.peak.workspace) << at;
    EXPECT_EQ(x.peak.activations, y.peak.activations) << at;
    EXPECT_EQ(x.peak.skip_cache, y.peak.skip_cache) << at;
    EXPECT_EQ(x.max_inflight, y.max_inflight) << at;
    EXPECT_EQ(x.resident_peak, y.resident_peak) << at;
  }
}

}  // namespace pulse::test
