// Placement search. A pipeline of pp devices either fits a node (pp divides the node's
// device count: g = devices_per_node / pp pipelines per node) or spans pp / devices_per_node
// whole nodes. Either way each node is cut into paths: g paths of pp devices, or one path
// of all its devices forming a segment of a longer pipeline. Every order of the node's
// devices is tried, cut into those paths, and scored by the time its boundaries take:
//   time(boundary) = messages * latency + bytes / bandwidth   on the link it lands on
//   score          = (slowest boundary over all paths, then the sum over all paths)
// lowest wins; the first in permutation order on ties, so the result is deterministic.
// Inter-node boundaries (between segments of a spanning pipeline) take the inter-node link
// wherever they land, so they do not enter the node's score.

#include "pulse/place/placement.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "pulse/cost/cost_model.hpp"

namespace pulse {

namespace {

constexpr int kMaxSearchedNode = 9;  // 9! = 362880 orders: still fast

struct Score {
  double worst = 0;
  double total = 0;
  bool operator<(const Score& o) const {
    if (worst != o.worst) return worst < o.worst;
    return total < o.total;
  }
};

class NodeSearch {
 public:
  // `segment_start`: the pipeline device of a path's first position (0 for node-sized
  // pipelines, k * devices_per_node for the k-th segment of a spanning one).
  NodeSearch(const PlacementRequest& r, int path_length, int paths, int segment_start)
      : request_(r), length_(path_length), paths_(paths), start_(segment_start) {
    // Every boundary's time on every pair of local devices, once: the search below scores
    // n! orders and would otherwise recompute them for each.
    const int n = r.cluster->devices_per_node;
    times_.assign(static_cast<std::size_t>(length_) * n * n, 0.0);
    for (int i = 0; i + 1 < length_; ++i) {
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          if (a != b)
            times_[(i * n + a) * n + b] = boundary_time(start_ + i, r.cluster->link(a, b));
        }
      }
    }
  }

  // Local device order, cut into `paths` consecutive paths of `length`: of every order, the
  // first in permutation order whose score is lowest. Orders are made depth first in that
  // order, a position at a time, each boundary's time added as its second device is placed
  // (score's sums, in score's order); a prefix whose score is already not below the best is
  // left, with every order it begins: a time is never negative, so no order it begins
  // scores lower. At pp 512 on 64 nodes of 8, the 40320 orders scored for each of 512
  // segments were 3.1 G instructions of a plan's 120 G.
  std::vector<int> best() const {
    const int n = request_.cluster->devices_per_node;
    Found found;
    std::vector<int> order(n);
    std::vector<char> used(n, 0);
    extend(0, Score{}, order, used, found);
    return found.order;
  }

  struct Found {
    std::vector<int> order;
    Score score;
    bool have = false;
  };

  // Places position k of `order` (every earlier one placed, scoring `partial`).
  void extend(int k, const Score& partial, std::vector<int>& order, std::vector<char>& used,
              Found& found) const {
    const int n = request_.cluster->devices_per_node;
    if (found.have && !(partial < found.score)) return;
    if (k == n) {
      found.order = order;
      found.score = partial;
      found.have = true;
      return;
    }
    const int i = k % length_;  // k's place on its path
    for (int b = 0; b < n; ++b) {
      if (used[b]) continue;
      Score s = partial;
      if (i > 0 && k / length_ < paths_) {
        const double t = times_[((i - 1) * n + order[k - 1]) * n + b];
        s.worst = std::max(s.worst, t);
        s.total += t;
      }
      order[k] = b;
      used[b] = 1;
      extend(k + 1, s, order, used, found);
      used[b] = 0;
    }
  }

 private:
  double boundary_time(int boundary, const LinkClass& link) const {
    const std::int64_t bytes =
        request_.boundary_bytes.empty() ? 1 : request_.boundary_bytes[boundary];
    const int messages =
        request_.boundary_messages.empty() ? 1 : request_.boundary_messages[boundary];
    return transfer_time(link, messages, bytes);
  }

  const PlacementRequest& request_;
  int length_, paths_, start_;
  std::vector<double> times_;  // [boundary][device a][device b]
};

Placement default_placement(const PlacementRequest& r, std::string why) {
  Placement p;
  p.ranks.assign(r.dp, std::vector<RankId>(r.pp));
  for (int rep = 0; rep < r.dp; ++rep) {
    for (int d = 0; d < r.pp; ++d) p.ranks[rep][d] = rep * r.pp + d;
  }
  p.note = std::move(why);
  return p;
}

// Replica 0 first: the replica whose pipeline has the slowest boundary.
void slowest_first(Placement& p, const PlacementRequest& r) {
  auto worst = [&](const std::vector<RankId>& ranks) {
    double w = 0;
    for (int d = 0; d + 1 < r.pp; ++d) {
      const LinkClass& l = r.cluster->link(ranks[d], ranks[d + 1]);
      const std::int64_t bytes = r.boundary_bytes.empty() ? 1 : r.boundary_bytes[d];
      w = std::max(w, transfer_time(l, 0, bytes));  // the bandwidth term only
    }
    return w;
  };
  std::stable_sort(p.ranks.begin(), p.ranks.end(),
                   [&](const auto& a, const auto& b) { return worst(a) > worst(b); });
}

}  // namespace

Placement place_pipelines(const PlacementRequest& r) {
  const ClusterProfile& c = *r.cluster;
  const int n = c.devices_per_node;
  if (r.pp < 2) return default_placement(r, "one device per pipeline: nothing to order");
  if (n > kMaxSearchedNode) {
    return default_placement(r, fmt::format("nodes of {} devices are not searched; rank order", n));
  }
  Placement p;
  p.ranks.assign(r.dp, std::vector<RankId>(r.pp));
  if (n % r.pp == 0) {
    // g pipelines per node; replicas fill nodes in turn.
    const int g = n / r.pp;
    const std::vector<int> order = NodeSearch(r, r.pp, g, 0).best();
    for (int rep = 0; rep < r.dp; ++rep) {
      const int node = rep / g, slot = rep % g;
      for (int d = 0; d < r.pp; ++d) p.ranks[rep][d] = node * n + order[slot * r.pp + d];
    }
    p.note = fmt::format("{} pipeline{} per node, ordered for the heaviest boundaries", g,
                         g > 1 ? "s" : "");
  } else if (r.pp % n == 0) {
    // A pipeline spans pp / n whole nodes; each segment ordered for its own boundaries.
    const int span = r.pp / n;
    std::vector<std::vector<int>> segment_order;
    for (int k = 0; k < span; ++k) segment_order.push_back(NodeSearch(r, n, 1, k * n).best());
    for (int rep = 0; rep < r.dp; ++rep) {
      for (int d = 0; d < r.pp; ++d) {
        p.ranks[rep][d] = (rep * span + d / n) * n + segment_order[d / n][d % n];
      }
    }
    p.note = fmt::format("each pipeline spans {} nodes, each segment ordered", span);
  } else {
    return default_placement(
        r, fmt::format("pipeline of {} does not tile nodes of {}; rank order", r.pp, n));
  }
  p.topology_aware = true;
  slowest_first(p, r);
  for (int d = 0; d + 1 < r.pp; ++d) {
    p.boundary_links.push_back(c.link(p.ranks[0][d], p.ranks[0][d + 1]).name);
  }
  return p;
}

}  // namespace pulse
