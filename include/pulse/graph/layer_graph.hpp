// The layer graph: layers as vertices with their costs at one microbatch size on one device
// type, main-path edges (layer i -> i+1) and skip edges, both with bytes per microbatch.
// Built on Boost.Graph (only layer_graph.cpp includes it); the passes use the queries below,
// and flat arrays derived from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <memory>

#include "pulse/profile/profile.hpp"

namespace pulse {

/// One layer's costs for one microbatch.
struct LayerNode {
  std::string name;
  double forward_s = 0;
  double backward_s = 0;
  double backward_weight_fraction = 0.5;
  std::int64_t params = 0;
  std::int64_t activation_bytes = 0;  ///< Kept for backward, per microbatch.
  std::int64_t output_bytes = 0;      ///< Main-path output, per microbatch.
  /// Recomputed layer: what its backward rebuilds beyond activation_bytes, per microbatch.
  std::int64_t recompute_workspace_bytes = 0;
};

enum class EdgeKind { main_path, skip };

struct LayerEdge {
  EdgeKind kind = EdgeKind::main_path;
  std::int64_t bytes = 0;  ///< Per microbatch.
  int skip_index = -1;     ///< Index into ModelProfile::skips for skip edges.
};

/// A skip edge in flat form.
struct SkipPair {
  int index = 0;  ///< Index into ModelProfile::skips.
  LayerId producer = 0;
  LayerId consumer = 0;
  std::int64_t bytes = 0;  ///< Per microbatch.
};

/// A carried tensor in flat form (see Carried).
struct CarriedTensor {
  LayerId producer = -1;
  std::int64_t bytes = 0;  ///< Per microbatch.
  bool needs_gradient = false;
};

class LayerGraph {
 public:
  /// Costs of `model` on device type `device_type` (an index into its device_types) at
  /// microbatch size `microbatch`.
  static LayerGraph build(const ModelProfile& model, int device_type, int microbatch);

  int num_layers() const;
  const LayerNode& layer(LayerId id) const;
  /// Main-path and skip edges.
  int num_edges() const;
  int microbatch() const { return microbatch_; }

  /// Skip edges sorted by (producer, consumer).
  const std::vector<SkipPair>& skip_pairs() const { return skips_; }
  const std::vector<CarriedTensor>& carried() const { return carried_; }

  /// True when no two skips cross (p1 < p2 < c1 < c2); shared endpoints do not cross.
  bool skips_nested() const;
  /// True when every skip straddles one common cut, so a V can keep them all local.
  bool skips_straddle_a_center() const;
  /// Skip bytes live across the cut after layer `cut_after`: producer <= cut < consumer.
  std::int64_t skip_bytes_crossing(LayerId cut_after) const;
  /// Everything a sequential pipeline moves forward across that cut: main-path output,
  /// live skips and carried tensors already produced.
  std::int64_t bytes_crossing(LayerId cut_after) const;

 private:
  struct Storage;  // the Boost.Graph adjacency list; immutable once built, so copies share it
  std::shared_ptr<const Storage> storage_;
  std::vector<SkipPair> skips_;
  std::vector<CarriedTensor> carried_;
  int microbatch_ = 1;
};

}  // namespace pulse
