#include "pulse/cost/sequence_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

namespace pulse {

namespace {

constexpr double kElementBytes = 2;  // fp16 / bf16 activations, as the profiles count them

// Link classes of the peers rank `self` of group 0 has among `peers`: class -> count.
std::map<int, int> peer_classes(const ClusterProfile& c, RankId self,
                                const std::vector<RankId>& peers) {
  std::map<int, int> out;
  for (RankId p : peers) {
    if (p == self) continue;
    const int cls = c.node_of(p) == c.node_of(self) ? c.intra_node[c.local_of(self)][c.local_of(p)]
                                                    : c.inter_node;
    ++out[cls];
  }
  return out;
}

// One all-to-all of one tensor over the Ulysses group of rank 0 (ranks 0 .. u - 1): each
// peer gets `chunk` bytes; the classes run at once, the slowest paces it.
double all_to_all_seconds(const ClusterProfile& c, int u, double chunk) {
  std::vector<RankId> group;
  for (int i = 0; i < u; ++i) group.push_back(i);
  double latency = 0, slowest = 0;
  for (const auto& [cls, count] : peer_classes(c, 0, group)) {
    const LinkClass& l = c.link_classes[cls];
    latency = std::max(latency, l.latency_s);
    slowest = std::max(slowest, count * chunk / l.bandwidth_bytes_per_s);
  }
  return (u - 1) * latency + slowest;
}

}  // namespace

std::string SequenceLayout::label() const {
  if (none()) return "none";
  if (ring == 1) return fmt::format("Ulysses {}", ulysses);
  if (ulysses == 1) return fmt::format("ring {}", ring);
  return fmt::format("Ulysses {} x ring {}", ulysses, ring);
}

SequenceTraffic sequence_traffic(const SequenceShape& shape, double forward_s, double backward_s,
                                 double forward_flops, const SequenceLayout& layout, int b,
                                 const ClusterProfile& cluster) {
  SequenceTraffic t;
  if (shape.heads == 0 || layout.none()) return t;
  const int u = layout.ulysses, r = layout.ring, s = layout.degree();
  const double width = static_cast<double>(shape.heads) * shape.head_dim;
  const double tokens = static_cast<double>(shape.tokens);
  if (u > 1) {
    const double chunk = b * (tokens / s) * width * kElementBytes / u;
    t.all_to_all_chunk_bytes = static_cast<std::int64_t>(std::ceil(chunk));
    t.all_to_all_s = all_to_all_seconds(cluster, u, chunk);
    t.forward_comm_s += 4 * t.all_to_all_s;
    t.backward_comm_s += 4 * t.all_to_all_s;
  }
  if (r > 1) {
    const double block = 2 * b * (tokens / r) * (width / u) * kElementBytes;
    t.ring_block_bytes = static_cast<std::int64_t>(std::ceil(block));
    // The ring steps in lockstep: its slowest hop (rank i to rank i + u in group 0) paces it.
    double latency = 0, bandwidth = std::numeric_limits<double>::infinity();
    for (int i = 0; i < s; ++i) {
      const LinkClass& l = cluster.link(i, (i + u) % s);
      latency = std::max(latency, l.latency_s);
      bandwidth = std::min(bandwidth, l.bandwidth_bytes_per_s);
    }
    t.ring_send_s = latency + block / bandwidth;
    const double share = forward_flops > 0 ? shape.attention_flops_per_sample / forward_flops : 0;
    const double step_fwd = share * forward_s / (s * r), step_bwd = share * backward_s / (s * r);
    const double send_bwd = latency + 2 * block / bandwidth;
    t.forward_comm_s += (r - 1) * std::max(0.0, t.ring_send_s - step_fwd);
    t.backward_comm_s += (r - 1) * std::max(0.0, send_bwd - step_bwd);
  }
  return t;
}

Status check_sequence_layout(const ModelProfile& model, const ClusterProfile& cluster,
                             const SequenceLayout& layout) {
  const int s = layout.degree(), n = cluster.num_devices(), per_node = cluster.devices_per_node;
  if (layout.ulysses < 1 || layout.ring < 1) {
    return usage_error(
        fmt::format("sequence layout {}: degrees must be at least 1", layout.label()));
  }
  if (n % s != 0 || (per_node % s != 0 && s % per_node != 0)) {
    return usage_error(fmt::format(
        "sequence layout {}: degree {} must divide the {} devices of {} and lie within a node "
        "of {} or cover whole nodes",
        layout.label(), s, n, cluster.name, per_node));
  }
  bool any = false;
  for (const Layer& l : model.layers) {
    if (!l.sequence) continue;
    any = true;
    if (l.sequence->heads % layout.ulysses != 0) {
      return usage_error(
          fmt::format("sequence layout {}: Ulysses degree {} must divide the {} "
                      "heads of layer \"{}\"",
                      layout.label(), layout.ulysses, l.sequence->heads, l.name));
    }
  }
  if (!any) {
    return usage_error(
        fmt::format("sequence layout {}: no layer of {} states a sequence (layers[].sequence)",
                    layout.label(), model.name));
  }
  return Ok{};
}

ModelProfile sequence_parallel_model(const ModelProfile& model, const SequenceLayout& layout,
                                     const ClusterProfile& cluster) {
  ModelProfile out = model;
  const int s = layout.degree();
  for (Layer& l : out.layers) {
    if (!l.sequence) continue;
    for (std::size_t d = 0; d < l.forward_s.size(); ++d) {
      for (std::size_t k = 0; k < l.forward_s[d].size(); ++k) {
        const double f = l.forward_s[d][k], g = l.backward_s[d][k];
        const SequenceTraffic t = sequence_traffic(*l.sequence, f, g, l.forward_flops_per_sample,
                                                   layout, model.microbatch_sizes[k], cluster);
        l.forward_s[d][k] = f / s + t.forward_comm_s;
        l.backward_s[d][k] = g / s + t.backward_comm_s;
      }
    }
    l.activation_bytes_per_sample = (l.activation_bytes_per_sample + s - 1) / s;
    l.output_bytes_per_sample = (l.output_bytes_per_sample + s - 1) / s;
    l.forward_flops_per_sample /= s;
  }
  return out;
}

ClusterProfile sequence_group_cluster(const ClusterProfile& cluster, const SequenceLayout& layout) {
  ClusterProfile out = cluster;
  const int s = layout.degree();
  if (s == 1) return out;
  if (cluster.devices_per_node % s == 0) {
    out.devices_per_node = cluster.devices_per_node / s;
    out.intra_node.assign(out.devices_per_node, std::vector<int>(out.devices_per_node, -1));
    for (int a = 0; a < out.devices_per_node; ++a) {
      for (int b = 0; b < out.devices_per_node; ++b) {
        if (a != b) out.intra_node[a][b] = cluster.intra_node[a * s][b * s];
      }
    }
    out.sequence_link = cluster.intra_node[0][1];
  } else {  // whole nodes per group
    out.nodes = cluster.num_devices() / s;
    out.devices_per_node = 1;
    out.intra_node = {{-1}};
    if (out.nodes == 1) out.inter_node = -1;
    out.sequence_link = cluster.inter_node;
  }
  out.sequence_degree = s;
  return out;
}

std::vector<SequenceLayout> sequence_layouts(const ModelProfile& model,
                                             const ClusterProfile& cluster) {
  std::vector<SequenceLayout> out;
  const int n = cluster.num_devices(), per_node = cluster.devices_per_node;
  auto keep = [&](SequenceLayout l) {
    if (l.degree() >= 2 && check_sequence_layout(model, cluster, l)) out.push_back(l);
  };
  int widest = 1;  // the largest Ulysses degree within a node
  for (int u = 2; u <= per_node; ++u) {
    const std::size_t before = out.size();
    keep({u, 1});
    if (out.size() > before) widest = u;
  }
  for (int r = 2; r <= n; r *= 2) keep({1, r});
  if (widest > 1) {
    for (int r = 2; widest * r <= n; r *= 2) keep({widest, r});
  }
  std::stable_sort(out.begin(), out.end(), [](const SequenceLayout& a, const SequenceLayout& b) {
    return a.degree() < b.degree();
  });
  return out;
}

}  // namespace pulse
