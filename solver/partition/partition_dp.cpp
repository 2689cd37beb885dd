#include "partition_dp.hpp"

namespace pulse::detail {

LayerPrefix::LayerPrefix(const LayerGraph& graph) : num_layers(graph.num_layers()) {
  const int n = num_layers;
  compute.assign(n + 1, 0.0);
  params.assign(n + 1, 0);
  activation.assign(n + 1, 0);
  output.assign(n, 0);
  for (int l = 0; l < n; ++l) {
    const LayerNode& node = graph.layer(l);
    compute[l + 1] = compute[l] + node.forward_s + node.backward_s;
    params[l + 1] = params[l] + node.params;
    activation[l + 1] = activation[l] + node.activation_bytes;
    output[l] = node.output_bytes;
  }
  skip_bytes_by_producer.assign(n + 1, 0);
  skip_bytes_by_consumer.assign(n + 1, 0);
  skip_count_by_producer.assign(n + 1, 0);
  skip_count_by_consumer.assign(n + 1, 0);
  for (const SkipPair& s : graph.skip_pairs()) {
    skip_bytes_by_producer[s.producer + 1] += s.bytes;
    skip_bytes_by_consumer[s.consumer + 1] += s.bytes;
    skip_count_by_producer[s.producer + 1] += 1;
    skip_count_by_consumer[s.consumer + 1] += 1;
  }
  carried_bytes_upto.assign(n + 1, 0);
  carried_grad_bytes_upto.assign(n + 1, 0);
  carried_count_upto.assign(n + 1, 0);
  carried_grad_count_upto.assign(n + 1, 0);
  for (const CarriedTensor& c : graph.carried()) {
    carried_bytes_upto[c.producer + 1] += c.bytes;
    carried_count_upto[c.producer + 1] += 1;
    if (c.needs_gradient) {
      carried_grad_bytes_upto[c.producer + 1] += c.bytes;
      carried_grad_count_upto[c.producer + 1] += 1;
    }
  }
  for (int x = 1; x <= n; ++x) {
    skip_bytes_by_producer[x] += skip_bytes_by_producer[x - 1];
    skip_bytes_by_consumer[x] += skip_bytes_by_consumer[x - 1];
    skip_count_by_producer[x] += skip_count_by_producer[x - 1];
    skip_count_by_consumer[x] += skip_count_by_consumer[x - 1];
    carried_bytes_upto[x] += carried_bytes_upto[x - 1];
    carried_grad_bytes_upto[x] += carried_grad_bytes_upto[x - 1];
    carried_count_upto[x] += carried_count_upto[x - 1];
    carried_grad_count_upto[x] += carried_grad_count_upto[x - 1];
  }
}

double LayerPrefix::load_lower_bound(int pp) const {
  double heaviest = 0;
  for (int l = 0; l < num_layers; ++l) heaviest = std::max(heaviest, compute_in(l, l));
  return std::max(compute[num_layers] / pp, heaviest);
}

LinkClass slowest_link(const PipelineLinks& links) {
  LinkClass worst{"slowest", std::numeric_limits<double>::infinity(), 0.0};
  for (std::size_t a = 0; a < links.size(); ++a) {
    for (std::size_t b = 0; b < links.size(); ++b) {
      if (a == b) continue;
      worst.bandwidth_bytes_per_s =
          std::min(worst.bandwidth_bytes_per_s, links[a][b].bandwidth_bytes_per_s);
      worst.latency_s = std::max(worst.latency_s, links[a][b].latency_s);
    }
  }
  return worst;
}

bool links_uniform(const PipelineLinks& links) {
  const LinkClass* first = nullptr;
  for (std::size_t a = 0; a < links.size(); ++a) {
    for (std::size_t b = 0; b < links.size(); ++b) {
      if (a == b) continue;
      if (!first) {
        first = &links[a][b];
      } else if (links[a][b].bandwidth_bytes_per_s != first->bandwidth_bytes_per_s ||
                 links[a][b].latency_s != first->latency_s) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace pulse::detail
