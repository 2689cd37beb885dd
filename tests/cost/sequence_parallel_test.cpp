// Sequence parallelism's cost rules (cost/sequence_parallel.hpp), each figure worked out by
// hand on a two-node cluster of four devices per node: in the node 100 GB/s and 1 us per
// message, between nodes 10 GB/s and 5 us.
#include <gtest/gtest.h>

#include "pulse/cost/memory.hpp"
#include "pulse/cost/sequence_parallel.hpp"
#include "pulse/simulate/evaluate.hpp"

namespace pulse {
namespace {

ClusterProfile two_nodes() {
  ClusterProfile c;
  c.name = "two-nodes";
  c.devices_per_node = 4;
  c.nodes = 2;
  c.link_classes = {{"nvlink", 100e9, 1e-6}, {"ib", 10e9, 5e-6}};
  c.intra_node.assign(4, std::vector<int>(4, 0));
  for (int i = 0; i < 4; ++i) c.intra_node[i][i] = -1;
  c.inter_node = 1;
  return c;
}

// 4096 tokens, 8 heads of 64 (width 512); attention 600 of the layer's 1000 FLOPs.
const SequenceShape kShape{4096, 8, 64, 600};

TEST(SequenceParallel, UlyssesWithinANodeMovesFourChunksPerPeer) {
  const SequenceTraffic t = sequence_traffic(kShape, 1e-3, 2e-3, 1000, {4, 1}, 1, two_nodes());
  // Each device holds 4096/4 tokens x 512 x 2 bytes and sends a quarter to each of 3 peers.
  EXPECT_EQ(t.all_to_all_chunk_bytes, 1024 * 512 * 2 / 4);
  // 3 messages of 1 us, 3 x 262144 bytes at 100 GB/s.
  EXPECT_DOUBLE_EQ(t.all_to_all_s, 3e-6 + 3 * 262144 / 100e9);
  EXPECT_DOUBLE_EQ(t.forward_comm_s, 4 * t.all_to_all_s);  // q, k, v, output
  EXPECT_DOUBLE_EQ(t.backward_comm_s, 4 * t.all_to_all_s);
  EXPECT_EQ(t.ring_block_bytes, 0);
}

TEST(SequenceParallel, UlyssesOverTwoNodesIsPacedByTheInterNodeLink) {
  const SequenceTraffic t = sequence_traffic(kShape, 1e-3, 2e-3, 1000, {8, 1}, 2, two_nodes());
  // Two samples: 2 x 512 tokens x 512 x 2 bytes / 8 per peer; 3 peers on NVLink, 4 on IB.
  EXPECT_EQ(t.all_to_all_chunk_bytes, 131072);
  EXPECT_DOUBLE_EQ(t.all_to_all_s, 7 * 5e-6 + 4 * 131072 / 10e9);
}

TEST(SequenceParallel, RingHidesItsSendsBehindLongAttention) {
  // Block: keys and values of 1024 tokens x 512 x 2 bytes = 2 MiB; a step's attention is
  // 0.6 x 1 ms / (4 x 4) = 37.5 us forward, longer than the 21.97 us send: nothing exposed.
  const SequenceTraffic t = sequence_traffic(kShape, 1e-3, 2e-3, 1000, {1, 4}, 1, two_nodes());
  EXPECT_EQ(t.ring_block_bytes, 2 * 1024 * 512 * 2);
  EXPECT_DOUBLE_EQ(t.ring_send_s, 1e-6 + 2097152 / 100e9);
  EXPECT_EQ(t.forward_comm_s, 0);
  EXPECT_EQ(t.backward_comm_s, 0);
}

TEST(SequenceParallel, RingExposesWhatAttentionDoesNotCover) {
  // 0.1 ms forward: a step's attention is 3.75 us, the send 21.97152 us; three steps.
  const SequenceTraffic t = sequence_traffic(kShape, 1e-4, 2e-4, 1000, {1, 4}, 1, two_nodes());
  EXPECT_NEAR(t.forward_comm_s, 3 * (1e-6 + 2097152 / 100e9 - 3.75e-6), 1e-15);
  // Backward: keys, values and their gradients (twice the bytes) against 7.5 us.
  EXPECT_NEAR(t.backward_comm_s, 3 * (1e-6 + 2 * 2097152 / 100e9 - 7.5e-6), 1e-15);
}

TEST(SequenceParallel, ARingOverTwoNodesIsPacedByItsInterNodeHop) {
  // Ring 8: ranks 3 -> 4 and 7 -> 0 cross nodes, so every step is paced by 10 GB/s, 5 us.
  // Block: 512 tokens x 512 x 2 bytes, keys and values: 1 MiB. 0.1 ms forward: a step's
  // attention is 0.6 x 1e-4 / 64 = 0.9375 us.
  const SequenceTraffic t = sequence_traffic(kShape, 1e-4, 2e-4, 1000, {1, 8}, 1, two_nodes());
  EXPECT_EQ(t.ring_block_bytes, 2 * 512 * 512 * 2);
  EXPECT_DOUBLE_EQ(t.ring_send_s, 5e-6 + 1048576 / 10e9);
  EXPECT_NEAR(t.forward_comm_s, 7 * (5e-6 + 1048576 / 10e9 - 0.6e-4 / 64), 1e-15);
}

TEST(SequenceParallel, TwoDimensionsRingBetweenUlyssesGroups) {
  // Ulysses 2 x ring 4 on 8 ranks: ring peers are 2 apart, so 2 -> 4 and 3 -> 5 cross nodes.
  const SequenceTraffic t = sequence_traffic(kShape, 1e-4, 2e-4, 1000, {2, 4}, 1, two_nodes());
  EXPECT_EQ(t.all_to_all_chunk_bytes, 512 * 512 * 2 / 2);  // 4096/8 tokens, to 1 peer
  EXPECT_EQ(t.ring_block_bytes, 2 * 1024 * 256 * 2);       // 4096/4 tokens x 4 heads of 64
  const double step = 0.6 * 1e-4 / (8 * 4);
  const double all_to_all = 1e-6 + 262144 / 100e9;
  EXPECT_NEAR(t.forward_comm_s, 4 * all_to_all + 3 * (5e-6 + 1048576 / 10e9 - step), 1e-15);
}

ModelProfile two_layer_model() {
  ModelProfile m;
  m.name = "mini";
  m.microbatch_sizes = {1, 2};
  m.device_types = {"GPU"};
  Layer embed;
  embed.name = "embed";
  embed.forward_s = {{1e-3, 2e-3}};
  embed.backward_s = {{2e-3, 4e-3}};
  embed.activation_bytes_per_sample = 1000;
  embed.output_bytes_per_sample = 4000;
  Layer block = embed;
  block.name = "block";
  block.forward_flops_per_sample = 1000;
  block.activation_bytes_per_sample = 1001;
  block.sequence = kShape;
  m.layers = {embed, block};
  return m;
}

TEST(SequenceParallel, TheModelOfOneDeviceDividesSequenceLayersOnly) {
  const ClusterProfile c = two_nodes();
  const ModelProfile m = sequence_parallel_model(two_layer_model(), {4, 1}, c);
  EXPECT_EQ(m.layers[0].forward_s, (std::vector<std::vector<double>>{{1e-3, 2e-3}}));
  EXPECT_EQ(m.layers[0].activation_bytes_per_sample, 1000);
  const double a2a_1 = 3e-6 + 3 * 262144 / 100e9, a2a_2 = 3e-6 + 3 * 524288 / 100e9;
  EXPECT_DOUBLE_EQ(m.layers[1].forward_s[0][0], 1e-3 / 4 + 4 * a2a_1);
  EXPECT_DOUBLE_EQ(m.layers[1].forward_s[0][1], 2e-3 / 4 + 4 * a2a_2);
  EXPECT_DOUBLE_EQ(m.layers[1].backward_s[0][1], 4e-3 / 4 + 4 * a2a_2);
  EXPECT_EQ(m.layers[1].activation_bytes_per_sample, 251);  // 1001 / 4, rounded up
  EXPECT_EQ(m.layers[1].output_bytes_per_sample, 1000);
}

TEST(SequenceParallel, LayoutsAreChecked) {
  const ClusterProfile c = two_nodes();
  ModelProfile m = two_layer_model();
  EXPECT_TRUE(check_sequence_layout(m, c, {8, 1}));
  EXPECT_EQ(check_sequence_layout(m, c, {1, 3}).error().message,
            "sequence layout ring 3: degree 3 must divide the 8 devices of two-nodes and lie "
            "within a node of 4 or cover whole nodes");
  m.layers[1].sequence->heads = 6;
  EXPECT_EQ(check_sequence_layout(m, c, {4, 1}).error().message,
            "sequence layout Ulysses 4: Ulysses degree 4 must divide the 6 heads of layer "
            "\"block\"");
  m.layers[1].sequence.reset();
  EXPECT_FALSE(check_sequence_layout(m, c, {1, 2}));
}

TEST(SequenceParallel, LayoutsWorthPlanning) {
  ModelProfile m = two_layer_model();
  m.layers[1].sequence->heads = 40;
  std::vector<std::string> labels;
  for (const SequenceLayout& l : sequence_layouts(m, two_nodes())) labels.push_back(l.label());
  // Ulysses 3 does not divide 8 devices; Ulysses 8 would leave the node of 4.
  EXPECT_EQ(labels, (std::vector<std::string>{"Ulysses 2", "ring 2", "Ulysses 4", "ring 4",
                                              "ring 8", "Ulysses 4 x ring 2"}));
}

TEST(SequenceParallel, TheClusterOfGroups) {
  const ClusterProfile in_node = sequence_group_cluster(two_nodes(), {1, 2});
  EXPECT_EQ(in_node.num_devices(), 4);
  EXPECT_EQ(in_node.devices_per_node, 2);
  EXPECT_EQ(in_node.link(0, 1).name, "nvlink");
  EXPECT_EQ(in_node.link(0, 2).name, "ib");
  EXPECT_EQ(in_node.sequence_degree, 2);
  EXPECT_EQ(in_node.sequence_link, 0);
  const ClusterProfile whole = sequence_group_cluster(two_nodes(), {4, 2});
  EXPECT_EQ(whole.num_devices(), 1);
  EXPECT_EQ(whole.sequence_link, 1);  // the group spans both nodes
  // All-reduce of 4 GB over one group of 8 ranks: 14 steps of 0.5 GB at 10 GB/s.
  EXPECT_DOUBLE_EQ(allreduce_seconds(4'000'000'000, {0}, whole), 14 * (5e-6 + 0.5e9 / 10e9));
  // Two groups of 2 in a node: a ring of 4 on NVLink.
  EXPECT_DOUBLE_EQ(allreduce_seconds(4'000'000'000, {0, 1}, in_node), 6 * (1e-6 + 1e9 / 100e9));
}

TEST(SequenceParallel, ZeroShardsOverEveryRankOfTheGroups) {
  MemoryModel m;
  m.zero_stage = 3;
  m.sequence_degree = 4;
  // (2 + 2 + 12) bytes per parameter over dp 2 x 4 ranks.
  EXPECT_EQ(m.static_bytes(1000, 2), 2000);
  m.zero_stage = 2;  // weights whole, the rest over dp 1 x 4 ranks
  EXPECT_EQ(m.static_bytes(1000, 1), 2000 + 500 + 3000);
}

}  // namespace
}  // namespace pulse
