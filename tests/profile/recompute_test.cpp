#include "pulse/profile/recompute.hpp"

#include <gtest/gtest.h>

namespace pulse {
namespace {

Layer layer(const char* name, const char* kind, std::int64_t act, std::int64_t out, double f,
            double b) {
  Layer l;
  l.name = name;
  l.kind = kind;
  l.activation_bytes_per_sample = act;
  l.output_bytes_per_sample = out;
  l.forward_s = {{f, 2 * f}};
  l.backward_s = {{b, 2 * b}};
  l.backward_weight_fraction = 0.5;
  return l;
}

// conv_in (keeps 10, outputs 4), a resnet (keeps 100, input 4), an attention block (keeps
// 300, input 8), a head (keeps 2, input 16: not worth recomputing).
ModelProfile model() {
  ModelProfile m;
  m.layers = {layer("conv_in", "conv", 10, 4, 1, 2), layer("res", "resnet", 100, 8, 1, 2),
              layer("attn", "transformer", 300, 16, 2, 5), layer("head", "head", 2, 1, 1, 2)};
  return m;
}

TEST(Recompute, NoneLeavesTheProfileAsItIs) {
  ModelProfile m = model();
  EXPECT_EQ(apply_recompute("none", m), 0);
  EXPECT_EQ(m.layers[2].activation_bytes_per_sample, 300);
  EXPECT_EQ(m.layers[2].backward_s[0][0], 5);
}

TEST(Recompute, SelectiveRecomputesTheAttentionBlocksOnly) {
  ModelProfile m = model();
  EXPECT_EQ(apply_recompute("selective", m), 1);
  const Layer& a = m.layers[2];
  // Keeps its input (res's output, 8 bytes); rebuilds 300 - 8 = 292 in its backward.
  EXPECT_EQ(a.activation_bytes_per_sample, 8);
  EXPECT_EQ(a.recompute_workspace_bytes_per_sample, 292);
  // Backward + forward at every size: 5 + 2, 10 + 4.
  EXPECT_EQ(a.backward_s[0][0], 7);
  EXPECT_EQ(a.backward_s[0][1], 14);
  // Weight-gradient seconds unchanged: 0.5 x (5 + 10) = 7.5 of 7 + 14 = 21.
  EXPECT_DOUBLE_EQ(a.backward_weight_fraction, 7.5 / 21);
  EXPECT_EQ(m.layers[1].activation_bytes_per_sample, 100);  // a resnet: not selected
}

TEST(Recompute, FullRecomputesEveryLayerThatSavesMoreThanItsInput) {
  ModelProfile m = model();
  // conv_in keeps its own output (4 < 10), res 4 < 100, attn 8 < 300; head: 16 >= 2, left.
  EXPECT_EQ(apply_recompute("full", m), 3);
  EXPECT_EQ(m.layers[0].activation_bytes_per_sample, 4);
  EXPECT_EQ(m.layers[1].activation_bytes_per_sample, 4);
  EXPECT_EQ(m.layers[1].recompute_workspace_bytes_per_sample, 96);
  EXPECT_EQ(m.layers[3].activation_bytes_per_sample, 2);
  EXPECT_EQ(m.layers[3].backward_s[0][0], 2);
  const ModelProfile original = model();
  EXPECT_TRUE(recomputes("full", original, 1));
  EXPECT_FALSE(recomputes("full", original, 3));
  EXPECT_FALSE(recomputes("selective", original, 1));
}

TEST(Recompute, KnowsItsModes) {
  EXPECT_TRUE(is_recompute_mode("none"));
  EXPECT_TRUE(is_recompute_mode("selective"));
  EXPECT_TRUE(is_recompute_mode("full"));
  EXPECT_FALSE(is_recompute_mode("Full"));
  EXPECT_FALSE(is_recompute_mode(""));
}

}  // namespace
}  // namespace pulse
