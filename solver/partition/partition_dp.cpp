#include "partition_dp.hpp"

#include <algorithm>

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
  for (const LinkClass& link : links.classes_between_devices()) {
    worst.bandwidth_bytes_per_s = std::min(worst.bandwidth_bytes_per_s, link.bandwidth_bytes_per_s);
    worst.latency_s = std::max(worst.latency_s, link.latency_s);
  }
  return worst;
}

bool links_uniform(const PipelineLinks& links) {
  const std::vector<LinkClass> classes = links.classes_between_devices();
  return std::all_of(classes.begin(), classes.end(), [&](const LinkClass& link) {
    return link.bandwidth_bytes_per_s == classes.front().bandwidth_bytes_per_s &&
           link.latency_s == classes.front().latency_s;
  });
}

bool SkipGrid::built_from(int layers, const std::vector<SkipPair>& pairs) const {
  return num_layers == layers && std::equal(skips.begin(), skips.end(), pairs.begin(), pairs.end(),
                                            [](const SkipPair& a, const SkipPair& b) {
                                              return a.producer == b.producer &&
                                                     a.consumer == b.consumer && a.bytes == b.bytes;
                                            });
}

std::shared_ptr<const SkipGrid> SkipGrid::of(int num_layers, const std::vector<SkipPair>& skips) {
  constexpr std::size_t kKept = 2;
  thread_local std::vector<std::shared_ptr<const SkipGrid>> recent;  // most recent first
  for (std::size_t k = 0; k < recent.size(); ++k) {
    if (recent[k]->built_from(num_layers, skips)) {
      std::rotate(recent.begin(), recent.begin() + static_cast<std::ptrdiff_t>(k),
                  recent.begin() + static_cast<std::ptrdiff_t>(k) + 1);
      return recent.front();
    }
  }
  auto grid = std::make_shared<SkipGrid>();
  grid->num_layers = num_layers;
  grid->skips = skips;
  grid->build();
  if (recent.size() == kKept) recent.pop_back();
  recent.insert(recent.begin(), grid);
  return grid;
}

void SkipGrid::build() {
  std::vector<char> produces(num_layers, 0), consumes(num_layers, 0);
  for (const SkipPair& s : skips) {
    produces[s.producer] = 1;
    consumes[s.consumer] = 1;
  }
  producer_rank.assign(num_layers + 1, 0);
  consumer_rank.assign(num_layers + 1, 0);
  for (int a = 1; a <= num_layers; ++a) {
    producer_rank[a] = producer_rank[a - 1] + produces[a - 1];
    consumer_rank[a] = consumer_rank[a - 1] + consumes[a - 1];
  }
  const std::size_t rows = static_cast<std::size_t>(producer_rank[num_layers]) + 1;
  cols = static_cast<std::size_t>(consumer_rank[num_layers]) + 1;
  cells.assign(rows * cols, Skips{});
  for (const SkipPair& s : skips) {
    const std::size_t cell = (producer_rank[s.producer] + 1) * cols + consumer_rank[s.consumer] + 1;
    cells[cell].bytes += s.bytes;
    cells[cell].count += 1;
  }
  auto add = [](Skips& to, const Skips& x, int sign) {
    to.bytes += sign * x.bytes;
    to.count += sign * x.count;
  };
  for (std::size_t a = 0; a < rows; ++a) {
    for (std::size_t b = 0; b < cols; ++b) {
      Skips& cell = cells[a * cols + b];
      if (a > 0) add(cell, cells[(a - 1) * cols + b], 1);
      if (b > 0) add(cell, cells[a * cols + b - 1], 1);
      if (a > 0 && b > 0) add(cell, cells[(a - 1) * cols + b - 1], -1);
    }
  }
}

}  // namespace pulse::detail
