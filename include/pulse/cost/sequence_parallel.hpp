// Sequence (context) parallelism: a group of s = u x r devices shares every sample, each
// holding 1/s of its tokens. Written as math here, once; the compiler plans a layout as a
// level of its own (src/compile/alternatives.cpp) on the model and cluster below.
//
// Ranks. Sequence group g is ranks g*s ... g*s + s - 1; inside it, Ulysses groups are u
// contiguous ranks, and ring peers are u ranks apart (rank i sends to the rank u after it,
// in the group, modulo s). A layer's sequence (profile.hpp SequenceShape): L tokens, H heads
// of width D, W = H * D, e = 2 bytes per element, b samples per microbatch.
//
// Ulysses (degree u, H divisible by u): before attention each device holds L/s tokens of q,
// k and v over all heads; one all-to-all per tensor regroups them into L/r tokens over H/u
// heads, and one more brings the output back. Each all-to-all sends, from every device, a
// chunk of b * (L/s) * W * e / u bytes to each of its u - 1 peers:
//
//   all_to_all_s = (u - 1) * latency_max + max over link classes c of
//                  (peers on c) * chunk / bandwidth(c)
//
// four per forward (q, k, v, output) and four per backward (their gradients), on the
// critical path.
//
// Ring (degree r): r steps; in each of the first r - 1 a device sends its current key and
// value block, 2 * b * (L/r) * (W/u) * e bytes, to its ring peer while it computes the
// attention of its queries against the block it holds. The attention core's share of the
// layer's time is its share of the layer's FLOPs (a = attention_flops / forward_flops); a
// device's attention per step is a * t / (s * r). What is not hidden is exposed:
//
//   ring_forward_s  = (r - 1) * max(0, send(1 x block) - a * forward_s  / (s * r))
//   ring_backward_s = (r - 1) * max(0, send(2 x block) - a * backward_s / (s * r))
//
// (the backward passes the key and value blocks and their gradients), with send(x) =
// latency + x / bandwidth of the ring's slowest hop (the ring steps in lockstep).
//
// A layer with a sequence runs 1/s of its tokens: its forward and backward are t / s plus
// the above, its activations and its output 1/s. A layer without one (the timestep and
// text embedders) runs whole on every device of the group. Weights, gradients and optimizer
// state are replicated in a group and sharded by ZeRO over all dp x s ranks
// (MemoryModel::sequence_degree); gradients are reduced over all dp x s ranks.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "pulse/base/result.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// A sequence-parallel layout: Ulysses degree times ring degree; 1 x 1 is none.
struct SequenceLayout {
  int ulysses = 1;
  int ring = 1;

  int degree() const { return ulysses * ring; }
  bool none() const { return degree() == 1; }
  /// "none", "Ulysses 4", "ring 2", "Ulysses 8 x ring 2".
  std::string label() const;

  auto operator<=>(const SequenceLayout&) const = default;
};

/// The figures of one layer's sequence under a layout, per microbatch of `b` samples.
struct SequenceTraffic {
  std::int64_t all_to_all_chunk_bytes = 0;  ///< What one device sends each Ulysses peer.
  double all_to_all_s = 0;                  ///< One all-to-all of one tensor.
  std::int64_t ring_block_bytes = 0;        ///< The key and value block of one ring step.
  double ring_send_s = 0;                   ///< Sending one block to the ring peer.
  double forward_comm_s = 0;                ///< Ulysses all-to-alls plus ring exposure, forward.
  double backward_comm_s = 0;               ///< The same, backward.
};

/// Ranks of sequence group 0 (all groups alike on a cluster of equal nodes): 0 ... s - 1.
/// Its link classes decide the times below.
SequenceTraffic sequence_traffic(const SequenceShape& shape, double forward_s, double backward_s,
                                 double forward_flops, const SequenceLayout& layout, int b,
                                 const ClusterProfile& cluster);

/// Why `layout` cannot run `model` on `cluster`, or Ok: its degree divides the cluster's
/// devices and lies within a node or covers whole nodes; the Ulysses degree divides every
/// layer's heads; some layer has a sequence.
Status check_sequence_layout(const ModelProfile& model, const ClusterProfile& cluster,
                             const SequenceLayout& layout);

/// The model one device of a sequence group runs (the rules at the top of the file), at
/// every device type and profiled microbatch size; the layout must pass
/// check_sequence_layout.
ModelProfile sequence_parallel_model(const ModelProfile& model, const SequenceLayout& layout,
                                     const ClusterProfile& cluster);

/// The cluster of sequence groups: one device per group (its first rank), the links between
/// groups those between their first ranks, `sequence_degree` and `sequence_link` set so the
/// gradient all-reduce spans every rank (simulate/evaluate.hpp).
ClusterProfile sequence_group_cluster(const ClusterProfile& cluster, const SequenceLayout& layout);

/// The layouts worth planning for `model` on `cluster`: Ulysses degrees (dividing the heads)
/// within a node, ring degrees, and the 2-D layouts of a Ulysses degree within a node times a
/// ring degree, each passing check_sequence_layout, degree 2 or more, least degree first.
std::vector<SequenceLayout> sequence_layouts(const ModelProfile& model,
                                             const ClusterProfile& cluster);

}  // namespace pulse
