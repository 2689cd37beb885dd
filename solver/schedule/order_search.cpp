// Local search over explicit per-device op orders, from the best list schedule.
//
// A list schedule is greedy: when a device falls free it starts a ready op, so it can never
// wait on purpose for a better one. On memory-bound pipelines that is what costs the most:
// with two microbatches in flight on the outer device, the order in which it interleaves
// them decides the steady state, and no rank order of op types expresses the right one.
// Every semi-active schedule (ops start as soon as their device and inputs allow, in a given
// order per device) is a set of per-device orders, so searching orders can reach the
// optimum where ranks cannot.
//
// Moves: take one op and reinsert it up to kWindow places earlier or later on its device,
// never past an op of its own stage and kind (microbatches of a stage stay in order, as the
// runtime and the lower bound assume). Each candidate is replayed by the execution engine;
// it is rejected if the replay deadlocks or holds more microbatches in flight on a device
// than memory allows, and kept if it is better: a shorter makespan or, at the same makespan,
// a smaller sum of op end times (which moves work earlier and lets later moves pay off).
// First improvement, sweep after sweep. When a full sweep finds nothing (a local optimum)
// and budget is left, the best order gets a kick (a few random moves, whatever they cost;
// a fixed seed) and the descent starts again from there: iterated local search, under a
// deterministic evaluation budget, keeping the best order seen.

#include <algorithm>
#include <random>

#include "order_search.hpp"

#include "pulse/simulate/simulate.hpp"

namespace pulse::detail {

namespace {

constexpr int kWindow = 4;
// The kicks of the iterated local search: moves per kick, their reach, the fixed seed.
constexpr int kKickMoves = 3;
constexpr int kKickReach = 8;
constexpr unsigned kKickSeed = 1;

struct Score {
  double makespan = 0;
  double sum_end = 0;

  bool better_than(const Score& o) const {
    if (makespan < o.makespan * (1 - 1e-12)) return true;
    if (makespan > o.makespan * (1 - 1e-12)) return false;
    return sum_end < o.sum_end * (1 - 1e-12);
  }
};

class OrderSearch {
 public:
  OrderSearch(const PipelineModel& m, const OrderSearchInput& in) : model_(m), in_(in) {}

  OrderSearchResult run(Schedule start) {
    best_.schedule = start;
    current_ = std::move(start);
    const auto t = replay(current_);
    if (!t) return best_;
    score_ = best_score_ = *t;
    best_.makespan_s = score_.makespan;
    std::mt19937 rng(kKickSeed);
    while (!out_of_budget()) {
      descend();
      if (out_of_budget()) break;
      current_ = best_.schedule;
      score_ = best_score_;
      if (!kick(rng)) break;
    }
    best_.improved = best_score_.makespan < t->makespan * (1 - 1e-12);
    return best_;
  }

 private:
  bool out_of_budget() const {
    return best_.evaluations >= in_.max_evaluations || (in_.expired && in_.expired());
  }

  std::optional<Score> replay(const Schedule& s) {
    ++best_.evaluations;
    auto t = simulate(model_, s, in_.num_microbatches, in_.static_bytes, Peaks::rule_only);
    if (!t || !in_.fits(*t)) return std::nullopt;
    Score score{t->makespan_s, 0};
    for (std::size_t d = 0; d < t->devices.size(); ++d) {
      for (const TimedOp& op : t->devices[d].ops) score.sum_end += op.end_s;
    }
    return score;
  }

  // Sweeps over every device until none improves the current order.
  void descend() {
    bool improved = true;
    while (improved && !out_of_budget()) {
      improved = false;
      for (std::size_t d = 0; d < current_.device_ops.size() && !out_of_budget(); ++d) {
        improved = sweep_device(d) || improved;
      }
    }
  }

  // The order with ops[k] of device d moved to `to`, if that is allowed.
  std::optional<Schedule> moved(std::size_t d, int k, int to) const {
    const std::vector<Op>& ops = current_.device_ops[d];
    if (to == k || to < 0 || to >= static_cast<int>(ops.size()) || !movable(ops, k, to)) {
      return std::nullopt;
    }
    Schedule candidate = current_;
    std::vector<Op>& mine = candidate.device_ops[d];
    const Op op = mine[k];
    mine.erase(mine.begin() + k);
    mine.insert(mine.begin() + to, op);
    return candidate;
  }

  // Tries every move on device d; keeps each one that improves. True if any did.
  bool sweep_device(std::size_t d) {
    bool improved = false;
    const int n = static_cast<int>(current_.device_ops[d].size());
    for (int k = 0; k < n && !out_of_budget(); ++k) {
      for (int shift = -kWindow; shift <= kWindow && !out_of_budget(); ++shift) {
        auto candidate = moved(d, k, k + shift);
        if (!candidate) continue;
        const auto score = replay(*candidate);
        if (!score || !score->better_than(score_)) continue;
        current_ = std::move(*candidate);
        score_ = *score;
        if (score_.better_than(best_score_)) {
          best_.schedule = current_;
          best_.makespan_s = score_.makespan;
          best_score_ = score_;
        }
        improved = true;
        break;  // the op moved; the next k looks at the new order
      }
    }
    return improved;
  }

  // A few random moves of reach kKickReach that replay and fit, whatever their score: the
  // way out of a local optimum (iterated local search). False if none could be made.
  bool kick(std::mt19937& rng) {
    int made = 0;
    for (int tries = 0; made < kKickMoves && tries < 20 * kKickMoves && !out_of_budget(); ++tries) {
      const std::size_t d = rng() % current_.device_ops.size();
      const int n = static_cast<int>(current_.device_ops[d].size());
      if (n < 2) continue;
      const int k = static_cast<int>(rng() % n);
      const int shift = static_cast<int>(rng() % (2 * kKickReach)) - kKickReach;
      auto candidate = moved(d, k, k + (shift >= 0 ? shift + 1 : shift));
      if (!candidate) continue;
      const auto score = replay(*candidate);
      if (!score) continue;
      current_ = std::move(*candidate);
      score_ = *score;
      ++made;
    }
    return made > 0;
  }

  // Moving ops[k] to position `to` must not pass an op of the same stage and kind.
  static bool movable(const std::vector<Op>& ops, int k, int to) {
    const int lo = std::min(k, to), hi = std::max(k, to);
    for (int x = lo; x <= hi; ++x) {
      if (x != k && ops[x].stage == ops[k].stage && ops[x].kind == ops[k].kind) return false;
    }
    return true;
  }

  const PipelineModel& model_;
  const OrderSearchInput& in_;
  OrderSearchResult best_;  // the best order found, by makespan then sum of end times
  Score best_score_;
  Schedule current_;  // where the descent is
  Score score_;
};

}  // namespace

OrderSearchResult search_orders(const PipelineModel& model, const OrderSearchInput& input,
                                Schedule start) {
  return OrderSearch(model, input).run(std::move(start));
}

}  // namespace pulse::detail
