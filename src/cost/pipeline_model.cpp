#include "pulse/cost/pipeline_model.hpp"

#include "pulse/cost/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace pulse {

StageId StageLayout::stage_of(LayerId layer) const {
  const auto it = std::upper_bound(first_layer.begin(), first_layer.end(), layer);
  return static_cast<StageId>(it - first_layer.begin()) - 1;
}

std::vector<StageId> StageLayout::stages_on(DeviceId d) const {
  std::vector<StageId> out;
  for (StageId s = 0; s < num_stages(); ++s) {
    if (device[s] == d) out.push_back(s);
  }
  return out;
}

StageLayout v_layout(std::vector<LayerId> first_layer, int pp) {
  return wave_layout(std::move(first_layer), pp, 1);
}

DeviceId wave_device(int level, int pp) {
  const int position = level % pp;
  return (level / pp) % 2 == 0 ? position : pp - 1 - position;
}

StageLayout wave_layout(std::vector<LayerId> first_layer, int pp, int waves) {
  StageLayout layout;
  layout.first_layer = std::move(first_layer);
  layout.num_devices = pp;
  const int stages = 2 * waves * pp;
  for (int s = 0; s < stages; ++s) {
    layout.device.push_back(wave_device(std::min(s, stages - 1 - s), pp));
  }
  return layout;
}

StageLayout sequential_layout(std::vector<LayerId> first_layer, int pp) {
  StageLayout layout;
  layout.first_layer = std::move(first_layer);
  layout.num_devices = pp;
  for (int s = 0; s < pp; ++s) layout.device.push_back(s);
  return layout;
}

namespace {

// Whether device d already holds carried tensor c when stage `before` starts: some earlier
// stage on d ran after c existed (made it or received it).
bool holds_carried(const StageLayout& layout, DeviceId d, StageId before, LayerId producer) {
  for (StageId s = 0; s < before; ++s) {
    if (layout.device[s] == d && producer <= layout.last_layer(s)) return true;
  }
  return false;
}

std::vector<StageCost> stage_costs(const LayerGraph& graph, const StageLayout& layout) {
  std::vector<StageCost> stages(layout.num_stages());
  for (StageId s = 0; s < layout.num_stages(); ++s) {
    for (LayerId l = layout.first_layer[s]; l < layout.first_layer[s + 1]; ++l) {
      const LayerNode& n = graph.layer(l);
      stages[s].forward_s += n.forward_s;
      stages[s].backward_s += n.backward_s;
      stages[s].backward_weight_s += n.backward_s * n.backward_weight_fraction;
      stages[s].params += n.params;
      stages[s].activation_bytes += n.activation_bytes;
      stages[s].recompute_workspace_bytes =
          std::max(stages[s].recompute_workspace_bytes, n.recompute_workspace_bytes);
      stages[s].largest_layer_params = std::max(stages[s].largest_layer_params, n.params);
    }
  }
  return stages;
}

// Main-path transfers between consecutive stages on different devices, with the carried
// tensors the receiving device does not hold yet.
void add_main_transfers(const LayerGraph& graph, PipelineModel& m) {
  const StageLayout& layout = m.layout;
  for (StageId s = 0; s + 1 < layout.num_stages(); ++s) {
    if (layout.device[s] == layout.device[s + 1]) continue;
    Transfer t;
    t.from = s;
    t.to = s + 1;
    t.main_path = true;
    const LayerId last = layout.last_layer(s);
    t.forward.activation = t.backward.activation = graph.layer(last).output_bytes;
    t.forward_messages = t.backward_messages = 1;
    for (std::size_t k = 0; k < graph.carried().size(); ++k) {
      const CarriedTensor& c = graph.carried()[k];
      if (c.producer > last || holds_carried(layout, layout.device[s + 1], s + 1, c.producer)) {
        continue;
      }
      t.carried.push_back(static_cast<int>(k));
      t.forward.carried += c.bytes;
      t.forward_messages += 1;
      if (c.needs_gradient) {
        t.backward.carried += c.bytes;
        t.backward_messages += 1;
      }
    }
    m.transfers.push_back(std::move(t));
  }
}

// Skips: local ones cost nothing; others ride directly or are relayed boundary by boundary.
void add_skip_transfers(const LayerGraph& graph, PipelineModel& m) {
  const StageLayout& layout = m.layout;
  std::map<std::pair<StageId, StageId>, std::size_t> direct;  // stage pair -> transfer index
  std::vector<SkipPair> by_index = graph.skip_pairs();
  std::sort(by_index.begin(), by_index.end(),
            [](const SkipPair& a, const SkipPair& b) { return a.index < b.index; });
  for (const SkipPair& s : by_index) {
    SkipPlacement placement{s.index, layout.stage_of(s.producer), layout.stage_of(s.consumer),
                            false, s.bytes};
    placement.local =
        layout.device[placement.producer_stage] == layout.device[placement.consumer_stage];
    if (m.routing == SkipRouting::forwarded) {
      placement.local = true;
      for (StageId b = placement.producer_stage; b < placement.consumer_stage; ++b) {
        if (layout.device[b] == layout.device[b + 1]) continue;
        placement.local = false;
        auto it = std::find_if(m.transfers.begin(), m.transfers.end(),
                               [&](const Transfer& t) { return t.main_path && t.from == b; });
        it->forward.skip += s.bytes;
        it->backward.skip += s.bytes;
        it->forward_messages += 1;
        it->backward_messages += 1;
        it->skips.push_back(s.index);
      }
    } else if (!placement.local) {
      const auto key = std::pair{placement.producer_stage, placement.consumer_stage};
      auto [it, inserted] = direct.emplace(key, m.transfers.size());
      if (inserted) {
        Transfer t;
        t.from = key.first;
        t.to = key.second;
        m.transfers.push_back(std::move(t));
      }
      Transfer& t = m.transfers[it->second];
      t.forward.skip += s.bytes;
      t.backward.skip += s.bytes;
      t.forward_messages += 1;
      t.backward_messages += 1;
      t.skips.push_back(s.index);
    }
    m.skips.push_back(placement);
  }
}

}  // namespace

PipelineModel build_pipeline_model(const LayerGraph& graph, const StageLayout& layout,
                                   SkipRouting routing, const PipelineLinks& links,
                                   bool overlap_comm) {
  PipelineModel m;
  m.layout = layout;
  m.routing = routing;
  m.overlap_comm = overlap_comm;
  m.links = links;
  m.stages = stage_costs(graph, layout);
  add_main_transfers(graph, m);
  add_skip_transfers(graph, m);
  time_transfers(m);
  return m;
}

void time_transfers(PipelineModel& m) {
  for (Transfer& t : m.transfers) {
    const DeviceId a = m.layout.device[t.from], b = m.layout.device[t.to];
    const LinkClass& ab = m.links[a][b];
    const LinkClass& ba = m.links[b][a];
    t.forward_s = transfer_time(ab, t.forward_messages, t.forward.total());
    t.backward_s = transfer_time(ba, t.backward_messages, t.backward.total());
  }
}

std::vector<double> PipelineModel::device_load() const {
  std::vector<double> compute(num_devices(), 0.0), sends(num_devices(), 0.0);
  for (StageId s = 0; s < layout.num_stages(); ++s) {
    compute[layout.device[s]] += stages[s].forward_s + stages[s].backward_s;
  }
  for (const Transfer& t : transfers) {
    sends[layout.device[t.from]] += t.forward_s;
    sends[layout.device[t.to]] += t.backward_s;
  }
  std::vector<double> load(num_devices());
  for (int d = 0; d < num_devices(); ++d)
    load[d] = pulse::device_load(compute[d], sends[d], overlap_comm);
  return load;
}

std::vector<std::int64_t> PipelineModel::device_params() const {
  std::vector<std::int64_t> params(num_devices(), 0);
  for (StageId s = 0; s < layout.num_stages(); ++s) params[layout.device[s]] += stages[s].params;
  return params;
}

Bytes PipelineModel::bytes_per_microbatch() const {
  Bytes total;
  for (const Transfer& t : transfers) {
    total.activation += t.forward.activation + t.backward.activation;
    total.skip += t.forward.skip + t.backward.skip;
    total.carried += t.forward.carried + t.backward.carried;
  }
  return total;
}

void round_to_quantum(PipelineModel& model) {
  const auto ns = [](double& t) { t = quantize_time(t); };
  // Every op lasts at least one quantum: an op of no length has no place in a device's
  // order (it would start inside its neighbour), and a stage of layers under half a
  // nanosecond, or a weight share near 1 or 0 with a split backward, would round to one. So
  // forward_s >= 1 ns, backward_s >= 2 ns, and the split's I (backward_s - backward_weight_s)
  // and W (backward_weight_s) >= 1 ns each.
  const double q = kTimeQuantum_s;
  for (StageCost& s : model.stages) {
    s.forward_s = std::max(q, quantize_time(s.forward_s));
    s.backward_s = std::max(2 * q, quantize_time(s.backward_s));
    s.backward_weight_s =
        std::clamp(quantize_time(s.backward_weight_s), q, quantize_time(s.backward_s - q));
  }
  for (Transfer& t : model.transfers) {
    ns(t.forward_s);
    ns(t.backward_s);
  }
}

PipelineLinks pipeline_links(const ClusterProfile& cluster, const std::vector<RankId>& ranks) {
  const std::size_t n = ranks.size();
  const LinkClass self{"self", std::numeric_limits<double>::infinity(), 0.0};
  PipelineLinks links(n, self);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a != b) links.set(a, b, cluster.link(ranks[a], ranks[b]));
    }
  }
  return links;
}

}  // namespace pulse
