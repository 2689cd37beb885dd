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
//      evaluation budget is spent;
//   3. with the last three evaluations, the best policy and both uniform rules at the best
//      limits under Giffler and Thompson's active rule (list_schedule.hpp).
// Every evaluation is one list schedule (one replay on the execution engine), so the
// search is deterministic under its evaluation budget.

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "list_outcomes.hpp"
#include "policy_search.hpp"
#include "pulse/cost/memory.hpp"

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
  Search(const PipelineModel& m, const SearchInput& in) : model_(m), in_(in) {}

  SearchResult run() {
    // With a budget no larger than the reserve, the portfolio gets it all (the active rule
    // needs a best policy to start from).
    reserve_ = in_.max_evaluations > kActiveCandidates ? kActiveCandidates : 0;
    portfolio();
    for (int sweep = 0; sweep < in_.max_sweeps && improved_ && !out_of_budget(); ++sweep) {
      improved_ = false;
      for (DeviceId d = 0; d < model_.num_devices() && !out_of_budget(); ++d) {
        ranks_of(d);
        limits_of(d);
      }
    }
    reserve_ = 0;
    active_rule();
    if (schedule_pending_) best_.schedule = replay(best_.policy, best_.limits, best_.makespan_s);
    return best_;
  }

 private:
  // Evaluations kept for the active rule after the descent.
  static constexpr int kActiveCandidates = 3;

  bool out_of_budget() const {
    return best_.evaluations + reserve_ >= in_.max_evaluations || (in_.expired && in_.expired()) ||
           at_bound();
  }

  // Whether no candidate can be kept any more: one is kept only if shorter than the best by a
  // relative 1e-12 (offer), and none is shorter than in_.stop_at. The margin, half that tie,
  // leaves room for the bound's own rounding (its sums run in another order than a replay's).
  bool at_bound() const {
    return best_.found && !in_.seen && best_.makespan_s * (1 - 1e-12) <= in_.stop_at * (1 - 5e-13);
  }

  // Giffler and Thompson's active rule (ListPolicy::active) on the best policy, and on both
  // uniform rules, at the best in-flight limits: it lets a device wait for an input on its
  // way (a link delay) instead of starting something shorter.
  void active_rule() {
    if (!best_.found) return;  // nothing to start from (no limits to replay it at)
    const int S = model_.layout.num_stages();
    const std::vector<int> limits = best_.limits;
    for (ListPolicy p :
         {best_.policy, ListPolicy::backward_first(S), ListPolicy::forward_first(S)}) {
      if (p.active) continue;
      p.active = true;
      offer(std::move(p), limits);
    }
  }

  // Scores one candidate; keeps it if strictly shorter.
  bool offer(ListPolicy policy, const std::vector<int>& limits) {
    if (out_of_budget()) return false;
    policy.window_limit = windows_for(limits);
    std::vector<int> ranks = ranks_key(policy);
    if (same_as_tried(ranks, policy, limits)) {
      ++best_.evaluations;  // the work limit counts it, so the search goes on as before
      return false;
    }
    // A run that cannot end strictly shorter than the best is never kept: it may stop as
    // soon as that is known (ListStop). It still counts as an evaluation, and its record
    // (the checked counts and ties of the steps it took) lets same_as_tried skip a repeat,
    // which would run the same ops up to there and so be no shorter. Not with `seen`, which
    // wants every schedule whole.
    ListStop stop;
    if (best_.found && !in_.seen) stop.at = best_.makespan_s * (1 - 1e-12);
    double makespan = 0;
    std::vector<int> checked;
    ListTies ties;
    Schedule s;
    // Limits beyond what fits in any order: the memory rule is checked on the run's own
    // residency peaks (a run that completes is almost always kept: it ends before the best).
    bool safe = true;
    for (std::size_t d = 0; d < limits.size(); ++d) safe = safe && limits[d] <= in_.safe_cap[d];
    const bool check = !safe && in_.fits;
    std::vector<std::int64_t> resident;
    // What another search over this model found for this candidate, where it decides
    // whether this one is kept (ListOutcome::decides): then the run is spared. One that
    // stopped at a time no earlier than this run's stop is not kept here either, and its
    // record serves same_as_tried as this run's would (a repeat runs the same ops up to
    // there, so ends no earlier than that time, and this search's stop only falls). A
    // complete one has this run's makespan, to the bit (a list schedule is a function of
    // the model, M, the split, the policy and the limits); if this run would have stopped,
    // it is not kept either way, and the complete record serves same_as_tried too. One kept
    // here is replayed when its schedule is needed: for the memory rule, or at the end.
    const bool recall = in_.outcomes && !in_.seen;
    ListCandidate candidate;
    std::optional<ListOutcome> known;
    // The caller's own run of this candidate: complete, so it decides like a complete
    // outcome recalled, and its schedule is the caller's.
    const bool first = !check && !in_.seen && is_first(ranks, policy, limits);
    if (first) {
      known = ListOutcome{false, in_.first->makespan_s, in_.first->checked, in_.first->ties};
      if (recall) in_.outcomes->keep(ListCandidate{ranks, policy.window_limit, limits}, *known);
    } else if (recall) {
      candidate = ListCandidate{ranks, policy.window_limit, limits};
      known = in_.outcomes->find(candidate);
      if (known && !known->decides(stop.at)) known.reset();
      in_.outcomes->count(known.has_value());
    }
    if (known) {
      stop.stopped = known->stopped;
      makespan = known->at_s;
      checked = std::move(known->checked);
      ties = std::move(known->ties);
    } else {
      s = list_schedule(model_, in_.num_microbatches, limits, in_.split_backward, policy, &makespan,
                        &checked, in_.seen ? nullptr : &ties, &stop, check ? &resident : nullptr);
      if (recall) {
        in_.outcomes->keep(
            candidate, ListOutcome{stop.stopped, stop.stopped ? stop.at : makespan, checked, ties});
      }
    }
    ++best_.evaluations;
    if (!in_.seen) {
      tried_.push_back({std::move(ranks), policy, limits, checked, std::move(ties)});
    }
    if (stop.stopped) return false;
    if (in_.seen) in_.seen(s);
    if (best_.found && makespan >= best_.makespan_s * (1 - 1e-12)) return false;
    if (check) {
      if (known) s = replay(policy, limits, makespan, &resident);
      if (!in_.fits(resident)) return false;
      known.reset();
    }
    best_.found = true;
    best_.schedule = std::move(s);
    best_.makespan_s = makespan;
    best_.policy = policy;
    best_.limits = limits;
    best_.first = first;
    schedule_pending_ = known.has_value() && !first;
    improved_ = true;
    return true;
  }

  // The list schedule of a candidate whose outcome was recalled, run again; its makespan is
  // the one recalled, or the memo's key missed something the list scheduler depends on.
  Schedule replay(const ListPolicy& policy, const std::vector<int>& limits, double makespan_s,
                  std::vector<std::int64_t>* resident_peaks = nullptr) const {
    double makespan = 0;
    std::vector<int> checked;
    ListTies ties;
    ListStop never;
    Schedule s = list_schedule(model_, in_.num_microbatches, limits, in_.split_backward, policy,
                               &makespan, &checked, &ties, &never, resident_peaks);
    if (makespan != makespan_s) {
      throw std::logic_error("policy search: a recalled list schedule replays to another makespan");
    }
    return s;
  }

  // Whether a candidate is the caller's first run: the same ranks and rule, no window
  // limits on either (absent and 0 both mean none), the same in-flight limits.
  bool is_first(const std::vector<int>& ranks, const ListPolicy& policy,
                const std::vector<int>& limits) const {
    if (!in_.first) return false;
    const auto none = [](const std::vector<int>& w) {
      return std::all_of(w.begin(), w.end(), [](int x) { return x <= 0; });
    };
    return limits == in_.first->limits && none(policy.window_limit) &&
           none(in_.first->policy.window_limit) && ranks == ranks_key(in_.first->policy);
  }

  // One scored candidate, as much as decides its schedule: the ranks and rule, the window
  // limits (in the policy), the in-flight limits, per device the most microbatches in
  // flight when its limit was consulted, and the pairs of ops its ranks ordered.
  struct Tried {
    std::vector<int> ranks;
    ListPolicy policy;
    std::vector<int> limits, checked;
    ListTies ties;
  };

  static std::vector<int> ranks_key(const ListPolicy& p) {
    std::vector<int> key(p.forward_rank);
    key.insert(key.end(), p.backward_rank.begin(), p.backward_rank.end());
    key.insert(key.end(), p.weight_rank.begin(), p.weight_rank.end());
    key.push_back(p.active ? 1 : 0);
    return key;
  }

  // Whether a candidate already scored in this search has the same schedule: the same
  // windows; the same ranks and rule, or both under the plain rule with ranks that order
  // alike every pair of ops that run tied (ListTies: then every device chooses as it did);
  // and on every device the same in-flight limit or two limits both above what that run
  // ever held when it consulted the limit (then the list scheduler takes the same decisions
  // step by step). Such a repeat is never kept: its makespan is the one scored then, which
  // was the best (equal now, not strictly shorter), or not below the best of that time
  // (which only shrinks), or it failed the memory replay (which it fails again), or that run
  // stopped (ListStop: the repeat runs the same ops up to where it stopped, so it ends no
  // earlier than the best then, which only shrinks). Skipping it
  // changes nothing but the work; it still counts as an evaluation. Not with `seen`, which
  // wants every schedule.
  bool same_as_tried(const std::vector<int>& ranks, const ListPolicy& policy,
                     const std::vector<int>& limits) const {
    if (in_.seen) return false;
    for (const Tried& t : tried_) {
      if (t.policy.window_limit != policy.window_limit) continue;
      bool same = true;
      for (std::size_t d = 0; d < limits.size() && same; ++d) {
        same = limits[d] == t.limits[d] || (limits[d] > t.checked[d] && t.limits[d] > t.checked[d]);
      }
      if (!same) continue;
      if (t.ranks == ranks) return true;
      if (t.ties.complete && !policy.active && same_rank_order(t.ties, t.policy, policy)) {
        return true;
      }
    }
    return false;
  }

  // Window limits for the later stages of every device whose in-flight limit is beyond what
  // fits in any order: each in-flight microbatch holds `held_` bytes for its whole stay, and
  // the later stages' activations share what is left (at least one window each, so that
  // microbatches can always leave; the replayed memory rule judges the rest).
  std::vector<int> windows_for(const std::vector<int>& limits) const {
    std::vector<int> windows(model_.layout.num_stages(), 0);
    for (DeviceId d = 0; d < model_.num_devices(); ++d) {
      const std::vector<StageId> stages = model_.layout.stages_on(d);
      if (stages.size() < 2 || limits[d] <= in_.safe_cap[d]) continue;
      std::int64_t later = 0;
      for (std::size_t i = 1; i < stages.size(); ++i)
        later += model_.stages[stages[i]].activation_bytes;
      if (later == 0) continue;
      const std::int64_t left = in_.free_bytes[d] - limits[d] * held_[d];
      const int open = static_cast<int>(std::clamp<std::int64_t>(left / later, 1, limits[d]));
      for (std::size_t i = 1; i < stages.size(); ++i) windows[stages[i]] = open;
    }
    return windows;
  }

  // `multiple` times the round-trip minimum of device d, within `cap`.
  int limit_at(DeviceId d, long multiple, const std::vector<int>& cap) const {
    return static_cast<int>(std::min<long>({in_.num_microbatches, multiple * base_[d], cap[d]}));
  }

  // The limits that fit whatever the order come first, then those up to what memory can
  // allow at best (those candidates must pass the replayed memory rule).
  void portfolio() {
    const int S = model_.layout.num_stages();
    std::vector<std::vector<int>> tried;
    for (const std::vector<int>* cap : {&in_.safe_cap, &one_more_, &in_.memory_cap}) {
      for (long multiple : {1L, 2L, 3L, 4L, 1L << 20}) {
        std::vector<int> limits(base_.size());
        for (DeviceId d = 0; d < model_.num_devices(); ++d) limits[d] = limit_at(d, multiple, *cap);
        if (std::find(tried.begin(), tried.end(), limits) != tried.end()) continue;
        tried.push_back(limits);
        offer(ListPolicy::backward_first(S), limits);
        offer(ListPolicy::forward_first(S), limits);
      }
    }
  }

  // Every ordering of device d's rank slots, from the best policy so far.
  void ranks_of(DeviceId d) {
    const std::vector<Slot> slots = slots_of(model_, d, in_.split_backward);
    std::vector<int> perm(slots.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      ListPolicy p = best_.policy;
      for (std::size_t i = 0; i < slots.size(); ++i) set_rank(p, slots[i], perm[i]);
      offer(p, best_.limits);
    } while (std::next_permutation(perm.begin(), perm.end()) && !out_of_budget());
  }

  // A few in-flight limits for device d: the round-trip minimum and its multiples, within
  // each cap, and the first few counts beyond what fits in any order.
  void limits_of(DeviceId d) {
    std::vector<int> values;
    for (const std::vector<int>* cap : {&in_.safe_cap, &one_more_, &in_.memory_cap}) {
      for (long multiple : {1L, 2L, 3L, 1L << 20}) values.push_back(limit_at(d, multiple, *cap));
    }
    for (int k = in_.safe_cap[d] + 1; k <= in_.safe_cap[d] + 3; ++k) {
      values.push_back(std::min(k, in_.memory_cap[d]));
    }
    std::vector<int> tried{best_.limits[d]};
    for (int value : values) {
      if (std::find(tried.begin(), tried.end(), value) != tried.end()) continue;
      tried.push_back(value);
      std::vector<int> limits = best_.limits;
      limits[d] = value;
      offer(best_.policy, limits);
    }
  }

  // One more microbatch in flight than fits in any order, where memory can allow it.
  static std::vector<int> plus_one(const SearchInput& in) {
    std::vector<int> cap = in.safe_cap;
    for (std::size_t d = 0; d < cap.size(); ++d) cap[d] = std::min(cap[d] + 1, in.memory_cap[d]);
    return cap;
  }

  const PipelineModel& model_;
  const SearchInput& in_;
  const std::vector<int> base_ = default_inflight(model_.layout, in_.num_microbatches);
  const std::vector<std::int64_t> held_ = bytes_per_microbatch_staying(model_);
  const std::vector<int> one_more_ = plus_one(in_);
  std::vector<Tried> tried_;  // every candidate scored, for same_as_tried
  SearchResult best_;
  bool improved_ = true;
  bool schedule_pending_ = false;  // best_ was recalled: its schedule is replayed at the end
  int reserve_ = 0;
};

}  // namespace

FirstRun first_candidate(const PipelineModel& model, int num_microbatches,
                         const std::vector<int>& safe_cap) {
  // What the portfolio's first offer is: limit_at(d, 1, safe_cap), default_inflight being
  // within M already.
  FirstRun run;
  run.policy = ListPolicy::backward_first(model.layout.num_stages());
  run.limits = default_inflight(model.layout, num_microbatches);
  for (std::size_t d = 0; d < run.limits.size(); ++d) {
    run.limits[d] = std::min(run.limits[d], safe_cap[d]);
  }
  return run;
}

SearchResult search_list_schedules(const PipelineModel& model, const SearchInput& input) {
  return Search(model, input).run();
}

}  // namespace pulse::detail
