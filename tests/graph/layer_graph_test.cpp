#include "pulse/graph/layer_graph.hpp"

#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace pulse {
namespace {

TEST(Graph, VerticesAndEdgesCarryCostsAndBytes) {
  const ModelProfile model = test::make_model({{0.001, 10, 20, 30}, {0.002}, {0.003}}, {{0, 2}}, 7);
  const LayerGraph g = LayerGraph::build(model, 0, 4);  // microbatch of 4 samples
  ASSERT_EQ(g.num_layers(), 3);
  EXPECT_DOUBLE_EQ(g.layer(0).forward_s, 0.004);  // one size profiled: scaled per sample
  EXPECT_EQ(g.layer(0).activation_bytes, 80);
  EXPECT_EQ(g.layer(0).output_bytes, 120);
  // Two main-path edges and one skip edge.
  EXPECT_EQ(g.num_edges(), 3);
  ASSERT_EQ(g.skip_pairs().size(), 1u);
  EXPECT_EQ(g.skip_pairs()[0].bytes, 28);
}

TEST(Graph, NestedSkipsAreRecognised) {
  const auto nested = test::make_model(std::vector<test::LayerSpec>(8), {{0, 7}, {1, 6}, {2, 5}});
  EXPECT_TRUE(LayerGraph::build(nested, 0, 1).skips_nested());
  EXPECT_TRUE(LayerGraph::build(nested, 0, 1).skips_straddle_a_center());
  // Disjoint skips do not cross, but no single cut separates all producers from consumers.
  const auto disjoint = test::make_model(std::vector<test::LayerSpec>(8), {{0, 2}, {4, 6}});
  EXPECT_TRUE(LayerGraph::build(disjoint, 0, 1).skips_nested());
  EXPECT_FALSE(LayerGraph::build(disjoint, 0, 1).skips_straddle_a_center());
  const auto crossing = test::make_model(std::vector<test::LayerSpec>(8), {{0, 4}, {2, 6}});
  EXPECT_FALSE(LayerGraph::build(crossing, 0, 1).skips_nested());
}

TEST(Graph, BytesCrossingACut) {
  // Outputs 100 bytes; skips 0->3 (7 bytes) and 1->2 (7 bytes).
  const auto m = test::make_model(std::vector<test::LayerSpec>(4), {{0, 3}, {1, 2}}, 7);
  const LayerGraph g = LayerGraph::build(m, 0, 1);
  EXPECT_EQ(g.skip_bytes_crossing(0), 7);
  EXPECT_EQ(g.skip_bytes_crossing(1), 14);
  EXPECT_EQ(g.skip_bytes_crossing(2), 7);
  EXPECT_EQ(g.bytes_crossing(1), 114);
}

TEST(Costs, InterpolatesBetweenProfiledSizes) {
  const std::vector<int> sizes{1, 2, 4};
  const std::vector<double> t{1.0, 1.5, 2.0};
  EXPECT_DOUBLE_EQ(interpolate_time(t, sizes, 2), 1.5);
  EXPECT_DOUBLE_EQ(interpolate_time(t, sizes, 3), 1.75);
  EXPECT_DOUBLE_EQ(interpolate_time(t, sizes, 8), 4.0);  // per-sample beyond the largest
  EXPECT_TRUE(is_profiled_size(sizes, 4));
  EXPECT_FALSE(is_profiled_size(sizes, 3));
}

TEST(Costs, MemoryModelShardsOptimizerStateUnderZero1) {
  MemoryModel m;
  EXPECT_EQ(m.static_bytes(1000, 4), 16000);
  m.zero_stage = 1;
  EXPECT_EQ(m.static_bytes(1000, 4), 2000 + 2000 + 3000);
}

}  // namespace
}  // namespace pulse
