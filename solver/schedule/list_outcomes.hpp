// What the policy search's list schedules came to, kept for the job (internal to the
// schedule synthesizer; see list_outcomes.cpp).
//
// A list schedule is a pure function of the pipeline model, M, the split of the backward,
// the policy (ranks, rule, windows) and the in-flight limits. One synthesis runs the policy
// search several times over one model: its own room, the probe at 3/4 of the peak, the
// memory curve's points, the ladder's rungs, and the configuration's screen before it. Each
// search starts from the same portfolio and often meets candidates another already scored.
// What the search needs of a candidate it does not keep is its makespan (or that it could
// not end before a time: ListStop), the in-flight counts it consulted and the pairs it
// ordered (for same_as_tried). Those are kept here, so such a candidate is decided without
// a replay; one the search keeps is replayed once, at the end, if it is still the best.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/schedule/list_schedule.hpp"
#include "pulse/schedule/schedule_memo.hpp"

namespace pulse::detail {

/// One candidate of the policy search, as much as decides its list schedule over a given
/// model: the ranks and rule (the search's ranks_key), the window limits and the in-flight
/// limits.
struct ListCandidate {
  std::vector<int> ranks;
  std::vector<int> windows;
  std::vector<int> limits;
  bool operator==(const ListCandidate&) const = default;
};

/// What one list schedule of a candidate came to. Complete: `at_s` is its makespan. Stopped
/// (ListStop): it could not end before `at_s`. `checked` and `ties` are list_schedule's for
/// the steps it took.
struct ListOutcome {
  bool stopped = false;
  double at_s = 0;
  std::vector<int> checked;
  ListTies ties;

  /// Whether this outcome says all a run stopped at `stop_at` would (a candidate is kept
  /// only if its makespan is under `stop_at`): it is complete, or it stopped at a time no
  /// earlier than `stop_at`, so the run would not be kept either.
  bool decides(double stop_at) const { return !stopped || at_s >= stop_at; }
  std::size_t bytes() const;
};

/// The outcomes of the candidates scored over one model, M and split. Not copyable; shared
/// by the searches of a job through the memo (list_outcomes()).
class ListOutcomes {
 public:
  std::optional<ListOutcome> find(const ListCandidate& candidate) const;
  /// Keeps `outcome` unless what is kept already decides more (a complete run, or a run
  /// stopped no earlier).
  void keep(const ListCandidate& candidate, ListOutcome outcome);
  std::size_t bytes() const;
  ScheduleMemo::Counts counts() const;
  /// A lookup that decided a candidate without a replay (counted as recalled), or one that
  /// did not (computed).
  void count(bool recalled);

 private:
  struct Hash {
    std::size_t operator()(const ListCandidate& c) const;
  };
  mutable std::mutex lock_;
  std::unordered_map<ListCandidate, ListOutcome, Hash> kept_;
  std::size_t bytes_ = 0;
  ScheduleMemo::Counts counts_;
};

/// The memo's outcome sets, one per (model, M, split), the most recently asked for kept
/// within kListOutcomeBytes in all.
class ListOutcomeTable {
 public:
  std::shared_ptr<ListOutcomes> of(const PipelineModel& model, int num_microbatches,
                                   bool split_backward);
  ScheduleMemo::Counts counts() const;

 private:
  struct Entry {
    PipelineModel model;
    int num_microbatches = 0;
    bool split_backward = false;
    std::shared_ptr<ListOutcomes> outcomes;
  };
  mutable std::mutex lock_;
  std::list<Entry> entries_;  // most recently asked for first
  ScheduleMemo::Counts evicted_;
};

/// Outcomes kept in all: past this, the sets asked for longest ago are dropped. By this
/// count SD2 at 4096 microbatches keeps 0.7 MB in 8 sets, pp 64 over 4096 layers 1.6 MB in
/// 3, and Hunyuan-DiT 512 tuned over 32 V100s 2.0 MB in 46.
inline constexpr std::size_t kListOutcomeBytes = std::size_t{64} << 20;

/// The set `memo` keeps for this model, M and split; null without a memo.
std::shared_ptr<ListOutcomes> list_outcomes(ScheduleMemo* memo, const PipelineModel& model,
                                            int num_microbatches, bool split_backward);

}  // namespace pulse::detail
