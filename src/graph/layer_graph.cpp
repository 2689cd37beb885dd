#include "pulse/graph/layer_graph.hpp"

#include <algorithm>

#include <boost/graph/adjacency_list.hpp>

namespace pulse {

struct LayerGraph::Storage {
  boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, LayerNode, LayerEdge>
      graph;
};

int LayerGraph::num_layers() const {
  return storage_ ? static_cast<int>(boost::num_vertices(storage_->graph)) : 0;
}

const LayerNode& LayerGraph::layer(LayerId id) const {
  return storage_->graph[static_cast<std::size_t>(id)];
}

int LayerGraph::num_edges() const {
  return storage_ ? static_cast<int>(boost::num_edges(storage_->graph)) : 0;
}

LayerGraph LayerGraph::build(const ModelProfile& model, int device_type, int microbatch) {
  LayerGraph g;
  auto storage = std::make_shared<Storage>();
  auto& graph = storage->graph;
  g.microbatch_ = microbatch;
  const std::int64_t b = microbatch;
  for (const Layer& l : model.layers) {
    LayerNode node;
    node.name = l.name;
    node.forward_s = interpolate_time(l.forward_s.at(device_type), model.microbatch_sizes, b);
    node.backward_s = interpolate_time(l.backward_s.at(device_type), model.microbatch_sizes, b);
    node.backward_weight_fraction = l.backward_weight_fraction;
    node.params = l.params;
    node.activation_bytes = l.activation_bytes_per_sample * b;
    node.recompute_workspace_bytes = l.recompute_workspace_bytes_per_sample * b;
    node.output_bytes = l.output_bytes_per_sample * b;
    boost::add_vertex(node, graph);
  }
  for (std::size_t i = 0; i + 1 < model.layers.size(); ++i) {
    boost::add_edge(i, i + 1, LayerEdge{EdgeKind::main_path, graph[i].output_bytes, -1}, graph);
  }
  for (std::size_t k = 0; k < model.skips.size(); ++k) {
    const Skip& s = model.skips[k];
    const std::int64_t bytes = s.bytes_per_sample * b;
    boost::add_edge(s.producer, s.consumer, LayerEdge{EdgeKind::skip, bytes, static_cast<int>(k)},
                    graph);
    g.skips_.push_back(SkipPair{static_cast<int>(k), s.producer, s.consumer, bytes});
  }
  std::sort(g.skips_.begin(), g.skips_.end(), [](const SkipPair& a, const SkipPair& b) {
    return std::pair{a.producer, a.consumer} < std::pair{b.producer, b.consumer};
  });
  g.storage_ = std::move(storage);
  for (const Carried& c : model.carried) {
    g.carried_.push_back(CarriedTensor{c.producer, c.bytes_per_sample * b, c.needs_gradient});
  }
  return g;
}

bool LayerGraph::skips_nested() const {
  // Sorted by producer: a skip crosses an earlier one when it starts inside it and ends after.
  for (std::size_t i = 0; i < skips_.size(); ++i) {
    for (std::size_t j = i + 1; j < skips_.size(); ++j) {
      const SkipPair& a = skips_[i];
      const SkipPair& b = skips_[j];
      if (a.producer < b.producer && b.producer < a.consumer && a.consumer < b.consumer) {
        return false;
      }
    }
  }
  return true;
}

bool LayerGraph::skips_straddle_a_center() const {
  if (skips_.empty()) return true;
  LayerId last_producer = 0, first_consumer = num_layers();
  for (const SkipPair& s : skips_) {
    last_producer = std::max(last_producer, s.producer);
    first_consumer = std::min(first_consumer, s.consumer);
  }
  return last_producer < first_consumer;
}

std::int64_t LayerGraph::skip_bytes_crossing(LayerId cut_after) const {
  std::int64_t total = 0;
  for (const SkipPair& s : skips_) {
    if (s.producer <= cut_after && cut_after < s.consumer) total += s.bytes;
  }
  return total;
}

std::int64_t LayerGraph::bytes_crossing(LayerId cut_after) const {
  std::int64_t total = layer(cut_after).output_bytes + skip_bytes_crossing(cut_after);
  for (const CarriedTensor& c : carried_) {
    if (c.producer <= cut_after) total += c.bytes;
  }
  return total;
}

}  // namespace pulse
