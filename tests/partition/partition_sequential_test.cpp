// The sequential DP's shortcuts against its own recurrence, walked in full.
//
// partition_sequential.cpp prunes the walk over each cell's starts several ways (the bound
// ladder, the floors of the previous stages' values and bytes, the jump over starts whose
// previous stages reach nothing, the per-start floors before cost()). Each is meant to
// leave out only starts that cannot replace the cell's best, so the answer must be the one
// the recurrence gives with every start tried, to the layout and the bytes: ties on the
// primary objective are broken by bytes, and a shortcut that cut a tie short would move the
// layout without moving the objective the brute-force tests compare.

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "partition/partition_dp.hpp"
#include "pulse/graph/layer_graph.hpp"
#include "pulse/partition/partition.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using detail::DeviceCost;
using detail::DpValue;

// Stage s taking layers [a, b] of a sequential layout, costed by the pipeline model of a
// layout that holds it (the other stages a layer each, the last the rest): its load, the
// memory bound of test::memory_bound and the bytes it sends both ways.
DeviceCost stage_cost(const PartitionRequest& r, int s, int a, int b) {
  const int n = r.graph->num_layers();
  std::vector<LayerId> first;
  for (int i = 0; i < s; ++i) first.push_back(i);
  first.push_back(a);
  for (int i = s + 1; i < r.pp; ++i) first.push_back(b + 1 + (i - s - 1));
  first.push_back(n);
  const PipelineModel m = build_pipeline_model(*r.graph, sequential_layout(first, r.pp), r.routing,
                                               r.links, r.overlap_comm);
  DeviceCost c;
  c.load = m.device_load()[s];
  c.memory = test::memory_bound(m, r)[s];
  for (const Transfer& t : m.transfers) {
    if (t.from == s) c.bytes += t.forward.total();
    if (t.to == s) c.bytes += t.backward.total();
  }
  return c;
}

struct Reference {
  std::vector<LayerId> first_layer;  // empty: no partition fits
  DpValue value;
};

// Every stage's cost, by [s][a][b] (costs do not depend on the memory capacity); stage 0
// starts at layer 0.
using StageCosts = std::vector<std::vector<std::vector<DeviceCost>>>;
StageCosts stage_costs(const PartitionRequest& r) {
  const int n = r.graph->num_layers(), P = r.pp;
  StageCosts costs(P, std::vector<std::vector<DeviceCost>>(n, std::vector<DeviceCost>(n)));
  for (int s = 0; s < P; ++s) {
    for (int a = s; a <= (s == 0 ? 0 : n - P + s); ++a) {
      for (int b = a; b <= n - P + s; ++b) costs[s][a][b] = stage_cost(r, s, a, b);
    }
  }
  return costs;
}

// The recurrence of partition_sequential.cpp with no bound and no shortcut: each cell
// (s, b) tries every start a from b down to s, in the walk's order, and keeps a start
// whose value is better() than the best so far.
Reference full_walk(const PartitionRequest& r, const StageCosts& costs) {
  const int n = r.graph->num_layers(), P = r.pp;
  struct Cell {
    DpValue value;
    int start = -1;
  };
  std::vector<std::vector<Cell>> table(P, std::vector<Cell>(n));
  for (int s = 0; s < P; ++s) {
    for (int b = s; b <= n - P + s; ++b) {
      if (s == P - 1 && b != n - 1) continue;
      Cell best;
      for (int a = b; a >= (s == 0 ? 0 : s); --a) {
        if (s == 0 && a != 0) continue;
        if (s > 0 && table[s - 1][a - 1].start < 0) continue;
        const DeviceCost& c = costs[s][a][b];
        if (c.memory > r.memory_capacity) continue;
        const DpValue before = s == 0 ? DpValue{} : table[s - 1][a - 1].value;
        const DpValue v = detail::extend(before, c, detail::Objective::time, r.memory_capacity);
        if (best.start < 0 || detail::better(v, best.value)) best = Cell{v, a};
      }
      table[s][b] = best;
    }
  }
  Reference out;
  if (table[P - 1][n - 1].start < 0) return out;
  out.value = table[P - 1][n - 1].value;
  out.first_layer.assign(P + 1, n);
  for (int s = P - 1, b = n - 1; s >= 0; b = table[s][b].start - 1, --s) {
    out.first_layer[s] = table[s][b].start;
  }
  return out;
}

// A random chain of 8 to `max_layers` layers: forward 1-4 ms, `params` x 1-4 parameters,
// `activation` x 1-4 bytes of activations, 1000-4000 bytes of output; random nested skips
// of 4000 bytes.
LayerGraph random_chain(std::mt19937& rng, int max_layers, int params, int activation) {
  std::uniform_int_distribution<int> ms(1, 4), size(8, max_layers), bytes(1, 4);
  const int n = size(rng);
  std::vector<test::LayerSpec> layers;
  for (int i = 0; i < n; ++i) {
    layers.push_back(
        {ms(rng) / 1000.0, params * ms(rng), activation * bytes(rng), 1000 * bytes(rng)});
  }
  return LayerGraph::build(test::make_model(layers, test::random_nested_skips(n, rng), 4000), 0, 1);
}

// `pp` stages of `g` on links of one class: at 1e6 B/s a 4000-byte skip relayed is 4 ms, as
// much as the largest layer's forward.
PartitionRequest chain_request(const LayerGraph& g, int pp) {
  PartitionRequest r;
  r.graph = &g;
  r.pp = pp;
  r.links = test::uniform_links(pp, 1e6, 1e-4);
  return r;
}

// Under ASan + UBSan the full walk's pipeline models make this test 25 s: there the first
// half of the instances.
constexpr int kTrials = test::kSanitizedBuild ? 200 : 400;

// Random models whose sends outweigh their compute where the skips are relayed (the case
// the shortcuts are for: a stage's load stays under the bound over many starts, and the
// previous stages' value ties the cell's primary), on links of one class, with costs in
// whole milliseconds so ties are common; memory loose, then binding.
TEST(PartitionSequential, TheWalksShortcutsKeepTheFullWalksChoice) {
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int> pp_of(2, 6);
  int compared = 0, differing_layouts = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const LayerGraph g = random_chain(rng, 22, 1000, 100);
    const int pp = std::min(pp_of(rng), g.num_layers() / 2);
    PartitionRequest r = chain_request(g, pp);
    r.overlap_comm = trial % 2 == 1;
    r.routing = trial % 3 == 2 ? SkipRouting::direct : SkipRouting::forwarded;
    for (int s = 0; s < pp; ++s) r.inflight.push_back(pp - s);
    r.memory_capacity = std::int64_t{1} << 40;
    const StageCosts costs = stage_costs(r);
    const test::BruteForce loose = test::brute_force_sequential(r);
    for (const bool squeezed : {false, true}) {
      if (squeezed) r.memory_capacity = loose.min_peak_memory * 21 / 20;
      const Reference expected = full_walk(r, costs);
      const PartitionAnswer got = partition_sequential(r);
      SCOPED_TRACE("trial " + std::to_string(trial) + " pp " + std::to_string(pp) +
                   (squeezed ? " squeezed" : ""));
      ASSERT_EQ(got.found(), !expected.first_layer.empty());
      if (!got.found()) continue;
      EXPECT_EQ(got.result.layout.first_layer, expected.first_layer);
      EXPECT_EQ(got.result.bytes_per_microbatch, expected.value.bytes);
      EXPECT_NEAR(got.result.objective_s, expected.value.primary, 1e-12);
      ++compared;
      // How often the layout is not the one that first reaches the optimum by the least
      // primary alone: evidence that the ties the bytes break are here to be broken.
      if (!squeezed) differing_layouts += loose.first_layer != expected.first_layer;
    }
  }
  // Every instance fits at 1.05 x its least peak: 2 comparisons each at this seed. The
  // layouts differ in 158 of the 400 loose ones (75 of the first 200).
  EXPECT_EQ(compared, 2 * kTrials);
  EXPECT_GT(differing_layouts, kTrials / 4);
}

// Whether anything fits is decided before the time DP where it can be (partition_sequential:
// a greedy walk that is complete for memory that grows with the stage, else a table of yes
// and no), and the time DP then starts at the better of two greedy walks' loads. Neither may
// change the answer: against the full walk at capacities around the least peak, where about
// half the instances fit, with the in-flight counts falling (1F1B), equal (GPipe), rising and
// in no order, both routings. A walk taken as complete where memory shrinks as a stage grows
// (a relayed skip is held by the stages it passes, not the two it ends in) would say "does
// not fit" to some instance the full walk fits.
TEST(PartitionSequential, WhatFitsAndWhereTheSearchStartsKeepTheFullWalksAnswer) {
  std::mt19937 rng(20261203);
  std::uniform_int_distribution<int> pp_of(2, 5);
  const int trials = test::kSanitizedBuild ? 30 : 60;
  int fitted = 0, unfitted = 0;
  for (int trial = 0; trial < trials; ++trial) {
    // Activations outweigh the weights' state, so the counts in flight shape what fits.
    const LayerGraph g = random_chain(rng, 16, 10, 1000);
    const int pp = std::min(pp_of(rng), g.num_layers() / 2);
    PartitionRequest r = chain_request(g, pp);
    r.routing = trial % 2 == 1 ? SkipRouting::direct : SkipRouting::forwarded;
    for (int pattern = 0; pattern < 4; ++pattern) {
      r.inflight.clear();
      for (int s = 0; s < pp; ++s) {
        r.inflight.push_back(pattern == 0   ? pp - s
                             : pattern == 1 ? pp
                             : pattern == 2 ? 1 + s
                                            : 1 + (s * 7 + trial) % pp);
      }
      r.memory_capacity = std::int64_t{1} << 40;
      const StageCosts costs = stage_costs(r);
      const std::int64_t least = test::brute_force_sequential(r).min_peak_memory;
      for (const int percent : {90, 99, 100, 103}) {
        r.memory_capacity = least * percent / 100;
        const Reference expected = full_walk(r, costs);
        const PartitionAnswer got = partition_sequential(r);
        SCOPED_TRACE("trial " + std::to_string(trial) + " in flight " + std::to_string(pattern) +
                     " at " + std::to_string(percent) + "%");
        ASSERT_EQ(got.found(), !expected.first_layer.empty());
        ++(got.found() ? fitted : unfitted);
        if (!got.found()) continue;
        EXPECT_EQ(got.result.layout.first_layer, expected.first_layer);
        EXPECT_EQ(got.result.bytes_per_microbatch, expected.value.bytes);
      }
    }
  }
  // Below the least peak nothing fits; at it and above, everything does.
  EXPECT_EQ(unfitted, 2 * 4 * trials);
  EXPECT_EQ(fitted, 2 * 4 * trials);
}

// GPipe on a chain makes no retry with one microbatch in flight where no partition holds all
// M (passes.cpp, gpipe_holds_none): the retry's partition must then fail GPipe's room check,
// memory_inflight_limits over static_memory, as the schedule makes it. On random chains at
// capacities from half the least peak with M in flight to just above it, both routings,
// with and without ZeRO-3 over dp 2 (whose gathered layers the room check adds): where
// the DP finds nothing with M in flight, the partition it finds with one has a device with
// room for fewer than M; where it finds one with M and nothing adds a workspace, that
// partition has room for M everywhere (the two charges are the same). And
// sequential_partition_exists says what the DP finds, without it.
TEST(PartitionSequential, WhereNothingHoldsEveryMicrobatchNoPartitionHasGPipesRoom) {
  std::mt19937 rng(20261204);
  std::uniform_int_distribution<int> pp_of(2, 5), m_of(2, 6);
  const int trials = test::kSanitizedBuild ? 30 : 60;
  int refused = 0, admitted = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const LayerGraph g = random_chain(rng, 16, 10, 1000);
    const int pp = std::min(pp_of(rng), g.num_layers() / 2);
    const int M = m_of(rng);
    PartitionRequest r = chain_request(g, pp);
    r.routing = trial % 2 == 1 ? SkipRouting::direct : SkipRouting::forwarded;
    const bool sharded = trial % 4 >= 2;
    if (sharded) {
      r.memory.zero_stage = 3;
      r.dp = 2;
    }
    r.inflight.assign(pp, M);
    r.memory_capacity = std::int64_t{1} << 40;
    const std::int64_t least = test::brute_force_sequential(r).min_peak_memory;
    for (const int percent : {50, 90, 99, 100, 103}) {
      SCOPED_TRACE("trial " + std::to_string(trial) + " at " + std::to_string(percent) + "%");
      r.memory_capacity = least * percent / 100;
      const PartitionAnswer all = partition_sequential(r);
      EXPECT_EQ(sequential_partition_exists(r), all.found());
      PartitionRequest retry = r;
      retry.inflight.assign(pp, 1);
      const PartitionAnswer one = partition_sequential(retry);
      EXPECT_EQ(sequential_partition_exists(retry), one.found());
      const PartitionAnswer& got = all.found() ? all : one;
      if (!got.found()) continue;
      const PipelineModel m =
          build_pipeline_model(g, got.result.layout, r.routing, r.links, r.overlap_comm);
      std::vector<std::int64_t> statics;
      for (const MemoryBreakdown& b : static_memory(m, r.memory, r.dp))
        statics.push_back(b.total());
      const std::vector<int> room =
          memory_inflight_limits(m, statics, r.memory_capacity, std::vector<int>(pp, M));
      const bool holds = *std::min_element(room.begin(), room.end()) >= M;
      if (!all.found()) {
        EXPECT_FALSE(holds);
        ++refused;
      } else if (!sharded) {
        EXPECT_TRUE(holds);
        ++admitted;
      }
    }
  }
  // Both sides are met often at this seed.
  EXPECT_GT(refused, trials);
  EXPECT_GT(admitted, trials / 2);
}

// The forward walk alone would say nothing fits here: with 3, 2 and 1 microbatches in flight
// it gives the first stage layers 0 and 1 (3 x 2000 bytes), and layer 2 alone (2 x 6000)
// overflows the second stage. Layers [0] [1] [2, 3] fit (3 x 1000, 2 x 1000, 1 x 10000), and
// the backward walk, complete where the counts never rise, finds them.
TEST(PartitionSequential, FallingCountsInFlightNeedTheBackwardWalk) {
  std::vector<test::LayerSpec> layers;
  for (const std::int64_t a : {1000, 1000, 6000, 4000}) layers.push_back({0.001, 1, a, 100});
  const ModelProfile model = test::make_model(layers, {}, 100);
  const LayerGraph g = LayerGraph::build(model, 0, 1);
  PartitionRequest r;
  r.graph = &g;
  r.pp = 3;
  r.links = test::uniform_links(3, 1e9, 1e-6);
  r.inflight = {3, 2, 1};
  const std::vector<LayerId> fits{0, 1, 2, 4};
  const PipelineModel m =
      build_pipeline_model(g, sequential_layout(fits, 3), r.routing, r.links, r.overlap_comm);
  const std::vector<std::int64_t> memory = test::memory_bound(m, r);
  r.memory_capacity = *std::max_element(memory.begin(), memory.end());
  ASSERT_EQ(r.memory_capacity, memory[2]);  // the last stage's 10000 bytes bind
  const PartitionAnswer got = partition_sequential(r);
  ASSERT_TRUE(got.found());
  EXPECT_EQ(got.result.layout.first_layer, fits);
}

}  // namespace
}  // namespace pulse
