#include "pulse/cost/pipeline_model.hpp"

#include <gtest/gtest.h>

#include "pulse/cost/memory.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

constexpr std::int64_t MiB = 1 << 20;

// The tiny UNet's byte shape: 10 layers, outputs 1 MiB, activations 4 MiB, skips of 1 MiB
// nested 0->9, 1->8, 2->7, 3->6.
ModelProfile tiny() {
  std::vector<test::LayerSpec> layers(10, test::LayerSpec{0.001, 1000, 4 * MiB, MiB});
  return test::make_model(layers, {{0, 9}, {1, 8}, {2, 7}, {3, 6}}, MiB);
}

TEST(PipelineModel, VKeepsSkipsLocalAndMovesOnlyTheMainPath) {
  const ModelProfile m = tiny();
  const LayerGraph g = LayerGraph::build(m, 0, 1);
  const StageLayout layout = v_layout({0, 3, 5, 7, 10}, 2);
  const PipelineModel pm =
      build_pipeline_model(g, layout, SkipRouting::direct, test::free_links(2), false);
  // Stages 1 and 2 share device 1: two transfers, 0->1 and 2->3, 1 MiB each way.
  ASSERT_EQ(pm.transfers.size(), 2u);
  EXPECT_EQ(pm.transfers[0].from, 0);
  EXPECT_EQ(pm.transfers[1].from, 2);
  const Bytes b = pm.bytes_per_microbatch();
  EXPECT_EQ(b.activation, 4 * MiB);
  EXPECT_EQ(b.skip, 0);
  for (const SkipPlacement& s : pm.skips) EXPECT_TRUE(s.local);
  // Device 0: six layers of 4 MiB activations + skips 0, 1, 2 cached (3 MiB).
  // Device 1: four layers (16 MiB) + skip 3->6 (1 MiB).
  EXPECT_EQ(bytes_per_microbatch_at_most(pm), (std::vector<std::int64_t>{27 * MiB, 17 * MiB}));
  EXPECT_EQ(pm.device_params(), (std::vector<std::int64_t>{6000, 4000}));
}

TEST(PipelineModel, SequentialRelaysEverySkipAcrossTheCut) {
  const ModelProfile m = tiny();
  const LayerGraph g = LayerGraph::build(m, 0, 1);
  const PipelineModel pm = build_pipeline_model(g, sequential_layout({0, 5, 10}, 2),
                                                SkipRouting::forwarded, test::free_links(2), false);
  // The cut after layer 4 is crossed by all four skips: 1 MiB activation + 4 MiB of skips,
  // five messages, each way.
  ASSERT_EQ(pm.transfers.size(), 1u);
  EXPECT_EQ(pm.transfers[0].forward.total(), 5 * MiB);
  EXPECT_EQ(pm.transfers[0].forward_messages, 5);
  EXPECT_EQ(pm.bytes_per_microbatch().skip, 8 * MiB);
  EXPECT_EQ(pm.bytes_per_microbatch().total(), 10 * MiB);
}

TEST(PipelineModel, SequentialRelayVisitsEveryIntermediateStage) {
  // Skip 0->5 over three stages [0,1] [2,3] [4,5]: relayed across both boundaries.
  const auto m = test::make_model(std::vector<test::LayerSpec>(6), {{0, 5}}, 1000);
  const LayerGraph g = LayerGraph::build(m, 0, 1);
  const PipelineModel pm = build_pipeline_model(g, sequential_layout({0, 2, 4, 6}, 3),
                                                SkipRouting::forwarded, test::free_links(3), false);
  EXPECT_EQ(pm.bytes_per_microbatch().skip, 4 * 1000);
  // The middle device receives it and sends it on: counted on both sides of it.
  EXPECT_EQ(bytes_per_microbatch_at_most(pm)[1], 2 * 1000 + 2 * 1000);
}

TEST(PipelineModel, DirectSkipsTakeOneHop) {
  const auto m = test::make_model(std::vector<test::LayerSpec>(6), {{0, 5}}, 1000);
  const LayerGraph g = LayerGraph::build(m, 0, 1);
  const PipelineModel pm = build_pipeline_model(g, sequential_layout({0, 2, 4, 6}, 3),
                                                SkipRouting::direct, test::free_links(3), false);
  EXPECT_EQ(pm.bytes_per_microbatch().skip, 2 * 1000);
  ASSERT_EQ(pm.transfers.size(), 3u);
  EXPECT_FALSE(pm.transfers[2].main_path);
  EXPECT_EQ(pm.transfers[2].from, 0);
  EXPECT_EQ(pm.transfers[2].to, 2);
}

TEST(PipelineModel, CarriedTensorsTravelOnlyToDevicesThatLackThem) {
  // A conditioning tensor from the input (no gradient) and one made by layer 0 (with
  // gradient). On the V, device 0 runs stages 0 and 3, so the way back up needs neither.
  ModelProfile m = tiny();
  m.carried = {Carried{"text", -1, 300, false}, Carried{"temb", 0, 20, true}};
  const LayerGraph g = LayerGraph::build(m, 0, 1);
  const PipelineModel v = build_pipeline_model(g, v_layout({0, 3, 5, 7, 10}, 2),
                                               SkipRouting::direct, test::free_links(2), false);
  EXPECT_EQ(v.transfers[0].forward.carried, 320);
  EXPECT_EQ(v.transfers[0].backward.carried, 20);
  EXPECT_EQ(v.transfers[0].forward_messages, 3);
  EXPECT_EQ(v.transfers[1].forward.carried, 0);
  const PipelineModel seq = build_pipeline_model(
      g, sequential_layout({0, 4, 7, 10}, 3), SkipRouting::forwarded, test::free_links(3), false);
  EXPECT_EQ(seq.bytes_per_microbatch().carried, 2 * (320 + 20));
}

TEST(PipelineModel, DeviceLoadChargesSendsToTheSender) {
  // Two layers of 1 ms forward / 2 ms backward, 1000-byte output, 1e6 B/s, 1 ms latency:
  // the transfer takes 1 ms + 1 ms = 2 ms each way; device 0 sends forward, device 1 back.
  const auto m = test::make_model({{0.001, 1, 1, 1000}, {0.001, 1, 1, 1000}}, {});
  const LayerGraph g = LayerGraph::build(m, 0, 1);
  const auto links = test::uniform_links(2, 1e6, 1e-3);
  const PipelineModel pm = build_pipeline_model(g, sequential_layout({0, 1, 2}, 2),
                                                SkipRouting::forwarded, links, false);
  EXPECT_NEAR(pm.device_load()[0], 0.003 + 0.002, 1e-15);
  EXPECT_NEAR(pm.device_load()[1], 0.003 + 0.002, 1e-15);
  // Overlapped, the 2 ms of sends hide behind 3 ms of compute...
  const PipelineModel overlapped =
      build_pipeline_model(g, sequential_layout({0, 1, 2}, 2), SkipRouting::forwarded, links, true);
  EXPECT_NEAR(overlapped.device_load()[0], 0.003, 1e-15);
  // ...but on a link 10x slower the 11 ms send paces the device: overlap is not free.
  const PipelineModel slow =
      build_pipeline_model(g, sequential_layout({0, 1, 2}, 2), SkipRouting::forwarded,
                           test::uniform_links(2, 1e5, 1e-3), true);
  EXPECT_NEAR(slow.device_load()[0], 0.001 + 0.01, 1e-15);
}

}  // namespace
}  // namespace pulse
