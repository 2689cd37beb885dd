// Search over list-schedule policies, scored by the schedules themselves.
//
// A list schedule is fixed by two things per device: how many microbatches it may hold in
// flight, and which of its op types it prefers when several are ready at once. The best
// choice depends on the stage costs (a lightly loaded device should favour the ops that
// feed the busiest one), so the synthesizer searches:
//   1. a portfolio: both uniform rules (backward-first, forward-first) at in-flight limits
//      of 1x, 2x, 3x, 4x the round-trip minimum and unlimited, each capped by memory;
//   2. coordinate descent from the best: for each device in turn, every ordering of its op
//      types' ranks (weight-gradient ops stay last), then a few in-flight limits; a change
//      is kept only if the makespan drops. Sweeps repeat until nothing improves or the
//      evaluation budget is spent.
// Every evaluation is one list schedule (one replay on the execution engine), so the
// search is deterministic under its evaluation budget.

#include <algorithm>
#include <numeric>

#include "schedule_engines.hpp"

namespace pulse::detail {

namespace {

// The rank slots of one device: (stage, kind) pairs, weight gradients last.
struct Slot {
  StageId stage;
  OpKind kind;
};

std::vector<Slot> slots_of(const PipelineModel& m, DeviceId d, bool split) {
  std::vector<Slot> out;
  for (StageId s : m.layout.stages_on(d)) {
    out.push_back({s, OpKind::forward});
    out.push_back({s, split ? OpKind::backward_input : OpKind::backward});
  }
  return out;
}

void set_rank(ListPolicy& p, const Slot& slot, int rank) {
  (slot.kind == OpKind::forward ? p.forward_rank : p.backward_rank)[slot.stage] = rank;
}

class Search {
 public:
  Search(const PipelineModel& m, const SearchInput& in) : m_(m), in_(in) {}

  SearchResult run() {
    portfolio();
    for (int sweep = 0; sweep < in_.max_sweeps && improved_ && !out_of_budget(); ++sweep) {
      improved_ = false;
      for (DeviceId d = 0; d < m_.num_devices() && !out_of_budget(); ++d) {
        ranks_of(d);
        limits_of(d);
      }
    }
    return best_;
  }

 private:
  bool out_of_budget() const {
    return best_.evaluations >= in_.max_evaluations || (in_.expired && in_.expired());
  }

  // Scores one candidate; keeps it if strictly shorter.
  bool offer(const ListPolicy& policy, const std::vector<int>& limits) {
    if (out_of_budget()) return false;
    double makespan = 0;
    Schedule s =
        list_schedule(m_, in_.num_microbatches, limits, in_.split_backward, policy, &makespan);
    ++best_.evaluations;
    if (best_.found && makespan >= best_.makespan_s * (1 - 1e-12)) return false;
    best_.found = true;
    best_.schedule = std::move(s);
    best_.makespan_s = makespan;
    best_.policy = policy;
    best_.limits = limits;
    improved_ = true;
    return true;
  }

  std::vector<int> limits_at(long multiple) const {
    const std::vector<int> base = default_inflight(m_.layout, in_.num_microbatches);
    std::vector<int> limits(base.size());
    for (std::size_t d = 0; d < base.size(); ++d) {
      limits[d] = static_cast<int>(
          std::min<long>({in_.num_microbatches, multiple * base[d], in_.memory_cap[d]}));
    }
    return limits;
  }

  void portfolio() {
    const int S = m_.layout.num_stages();
    std::vector<std::vector<int>> tried;
    for (long multiple : {1L, 2L, 3L, 4L, 1L << 20}) {
      const std::vector<int> limits = limits_at(multiple);
      if (std::find(tried.begin(), tried.end(), limits) != tried.end()) continue;
      tried.push_back(limits);
      offer(ListPolicy::backward_first(S), limits);
      offer(ListPolicy::forward_first(S), limits);
    }
  }

  // Every ordering of device d's rank slots, from the best policy so far.
  void ranks_of(DeviceId d) {
    const std::vector<Slot> slots = slots_of(m_, d, in_.split_backward);
    std::vector<int> perm(slots.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      ListPolicy p = best_.policy;
      for (std::size_t i = 0; i < slots.size(); ++i) set_rank(p, slots[i], perm[i]);
      offer(p, best_.limits);
    } while (std::next_permutation(perm.begin(), perm.end()) && !out_of_budget());
  }

  // A few in-flight limits for device d: the round-trip minimum and its multiples.
  void limits_of(DeviceId d) {
    const std::vector<int> base = default_inflight(m_.layout, in_.num_microbatches);
    for (long multiple : {1L, 2L, 3L, 1L << 20}) {
      std::vector<int> limits = best_.limits;
      limits[d] = static_cast<int>(
          std::min<long>({in_.num_microbatches, multiple * base[d], in_.memory_cap[d]}));
      if (limits != best_.limits) offer(best_.policy, limits);
    }
  }

  const PipelineModel& m_;
  const SearchInput& in_;
  SearchResult best_;
  bool improved_ = true;
};

}  // namespace

SearchResult search_list_schedules(const PipelineModel& model, const SearchInput& input) {
  return Search(model, input).run();
}

}  // namespace pulse::detail
