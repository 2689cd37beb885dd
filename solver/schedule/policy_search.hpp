// The search over list-schedule policies (internal to the schedule synthesizer). See
// policy_search.cpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "pulse/schedule/list_schedule.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse::detail {

class ListOutcomes;  // list_outcomes.hpp

/// A list schedule its caller has run already, whole, with its records (list_schedule's
/// makespan, in-flight counts consulted and ties): the synthesizer's heuristic, which is the
/// portfolio's first candidate (backward first at the round-trip minimum within what fits in
/// any order). The caller keeps its schedule.
struct FirstRun {
  ListPolicy policy;
  std::vector<int> limits;
  double makespan_s = 0;
  std::vector<int> checked;
  ListTies ties;
};

struct SearchInput {
  int num_microbatches = 1;
  std::vector<int> memory_cap;  ///< Per device: most microbatches in flight memory can allow.
  std::vector<int> safe_cap;    ///< Per device: in-flight counts that fit in any order.
  std::vector<std::int64_t> free_bytes;  ///< Per device: capacity less the static state.
  bool split_backward = false;
  int max_evaluations = 400;  ///< Deterministic work limit: list schedules tried.
  int max_sweeps = 3;
  std::function<bool()> expired;  ///< Wall-clock safety limit.
  /// Checks the memory rule from each device's residency peak (list_schedule's
  /// `resident_peaks`, what a replay's Timeline says); asked only when a limit exceeds
  /// `safe_cap`.
  std::function<bool(const std::vector<std::int64_t>& resident_peaks)> fits;
  /// Optional: shown every list schedule scored, kept or not.
  std::function<void(const Schedule&)> seen;
  /// A lower bound on the makespan of every schedule the search can score (0: none known).
  /// Once the best is at it, nothing later could be kept, and the search ends.
  double stop_at = 0;
  /// Optional: the outcomes of candidates other searches over this model, M and split
  /// scored (list_outcomes.hpp). One that decides a candidate spares its list schedule; the
  /// answer is the same (policy_search.cpp, Search::offer).
  std::shared_ptr<ListOutcomes> outcomes;
  /// Optional: the caller's run of one candidate. The search takes its outcome instead of
  /// running it again (not with `seen`, which wants the schedule); where that candidate stays
  /// the best, the result says so (SearchResult::first) and holds no copy of its schedule.
  const FirstRun* first = nullptr;
};

struct SearchResult {
  bool found = false;
  Schedule schedule;
  double makespan_s = 0;
  ListPolicy policy;
  std::vector<int> limits;
  int evaluations = 0;
  /// The best is SearchInput::first's run; `schedule` is empty (the caller has it).
  bool first = false;
};

/// The portfolio's first candidate: backward first at the round-trip minimum in flight
/// (default_inflight) within `safe_cap`. The synthesizer runs it as its heuristic and hands
/// the run back as SearchInput::first; the policy and limits are set, the outcome is left to
/// that run.
FirstRun first_candidate(const PipelineModel& model, int num_microbatches,
                         const std::vector<int>& safe_cap);

/// The best list schedule over a portfolio of rules and in-flight limits, improved by
/// coordinate descent on per-device ranks and limits. See policy_search.cpp.
SearchResult search_list_schedules(const PipelineModel& model, const SearchInput& input);

}  // namespace pulse::detail
