// The layer graph: layers as vertices with their costs at one microbatch size on one device
// type, main-path edges (layer i -> i+1) and skip edges, both with bytes per microbatch.
// Built on Boost.Graph; the passes use the queries below, and flat arrays derived from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "pulse/profile.hpp"

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

using BoostLayerGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, LayerNode, LayerEdge>;

class LayerGraph {
 public:
  /// Costs of `model` on device type `device_type` (an index into its device_types) at
  /// microbatch size `microbatch`.
  static LayerGraph build(const ModelProfile& model, int device_type, int microbatch);

  int num_layers() const { return static_cast<int>(boost::num_vertices(graph_)); }
  const LayerNode& layer(LayerId id) const { return graph_[static_cast<std::size_t>(id)]; }
  const BoostLayerGraph& boost_graph() const { return graph_; }
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
  BoostLayerGraph graph_;
  std::vector<SkipPair> skips_;
  std::vector<CarriedTensor> carried_;
  int microbatch_ = 1;
};

}  // namespace pulse
