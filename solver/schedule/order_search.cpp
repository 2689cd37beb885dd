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
// First improvement, sweep after sweep, under a deterministic evaluation budget.

#include <algorithm>

#include "order_search.hpp"

#include "pulse/simulate/simulate.hpp"

namespace pulse::detail {

namespace {

constexpr int kWindow = 4;

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
    best_.schedule = std::move(start);
    const auto t = replay(best_.schedule);
    if (!t) return best_;
    score_ = *t;
    best_.makespan_s = score_.makespan;
    bool improved = true;
    while (improved && !out_of_budget()) {
      improved = false;
      for (std::size_t d = 0; d < best_.schedule.device_ops.size() && !out_of_budget(); ++d) {
        improved = sweep_device(d) || improved;
      }
    }
    return best_;
  }

 private:
  bool out_of_budget() const {
    return best_.evaluations >= in_.max_evaluations || (in_.expired && in_.expired());
  }

  std::optional<Score> replay(const Schedule& s) {
    ++best_.evaluations;
    auto t = simulate(model_, s, in_.num_microbatches, in_.static_bytes);
    if (!t || !in_.fits(*t)) return std::nullopt;
    Score score{t->makespan_s, 0};
    for (std::size_t d = 0; d < t->devices.size(); ++d) {
      for (const TimedOp& op : t->devices[d].ops) score.sum_end += op.end_s;
    }
    return score;
  }

  // Tries every move on device d; keeps each one that improves. True if any did.
  bool sweep_device(std::size_t d) {
    bool improved = false;
    const int n = static_cast<int>(best_.schedule.device_ops[d].size());
    for (int k = 0; k < n && !out_of_budget(); ++k) {
      for (int shift = -kWindow; shift <= kWindow && !out_of_budget(); ++shift) {
        const int to = k + shift;
        if (shift == 0 || to < 0 || to >= n) continue;
        if (!movable(best_.schedule.device_ops[d], k, to)) continue;
        Schedule candidate = best_.schedule;
        std::vector<Op>& ops = candidate.device_ops[d];
        const Op op = ops[k];
        ops.erase(ops.begin() + k);
        ops.insert(ops.begin() + to, op);
        const auto score = replay(candidate);
        if (!score || !score->better_than(score_)) continue;
        best_.schedule = std::move(candidate);
        best_.makespan_s = score->makespan;
        best_.improved = best_.improved || score->makespan < score_.makespan * (1 - 1e-12);
        score_ = *score;
        improved = true;
        break;  // the op moved; the next k looks at the new order
      }
    }
    return improved;
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
  OrderSearchResult best_;
  Score score_;
};

}  // namespace

OrderSearchResult search_orders(const PipelineModel& model, const OrderSearchInput& input,
                                Schedule start) {
  return OrderSearch(model, input).run(std::move(start));
}

}  // namespace pulse::detail
