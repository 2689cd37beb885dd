// What one job has already synthesized, kept for that job alone. A synthesis is a pure
// function of its request (deterministic work limits, a fixed seed), and one plan asks for
// the same work more than once: families that cut the model alike give equal pipeline
// models (v, v-released and v-naive on a model whose cuts have one choice; chain and
// chain-relayed without skips), a configuration's screen and full synthesis share a lower
// bound, and the ladder's staircase, the published schedules' pool and V-auto's candidates
// are asked for again at other budgets. The policy searches of one model (the screen, the
// full synthesis, the probe, the curve's points, the ladder's rungs) meet candidates another
// already scored: what each list schedule came to is kept too (list_outcomes.hpp). The
// compile job owns one (CompileCache) and hands it down in every ScheduleRequest; a request
// without one computes everything and gets the same answer, later. Nothing is kept between
// jobs: two jobs with two memos cannot see each other's answers.
//
// Each table is keyed by a typed key compared field by field (solver/schedule/answer_memo.hpp:
// the request and the pipeline model by their defaulted operator==, so a field added to
// either is compared without anyone remembering to), and keeps its last few entries (the
// equal requests of one plan come close together), the lower bounds more.
#pragma once

#include <memory>

namespace pulse {

namespace detail {
struct MemoTables;
}

class ScheduleMemo {
 public:
  /// Lookups of one table: `computed` found nothing (the caller then computed the value),
  /// `recalled` found it.
  struct Counts {
    int computed = 0;
    int recalled = 0;
    bool operator==(const Counts&) const = default;
  };
  /// Per table: answers (whole syntheses), lower bounds, ladder staircases, published
  /// schedules' pools (v_seeds), V-auto candidate sets; and the policy search's candidates
  /// (list_outcomes: recalled, one decided without a list schedule; computed, one replayed).
  struct AllCounts {
    Counts answers;
    Counts bounds;
    Counts ladders;
    Counts seeds;
    Counts v_auto_pools;
    Counts list_outcomes;
    bool operator==(const AllCounts&) const = default;
  };

  ScheduleMemo();
  ~ScheduleMemo();
  ScheduleMemo(const ScheduleMemo&) = delete;
  ScheduleMemo& operator=(const ScheduleMemo&) = delete;

  AllCounts counts() const;
  /// The tables (solver/schedule/answer_memo.hpp), for the synthesizer.
  detail::MemoTables& tables() { return *tables_; }

 private:
  std::unique_ptr<detail::MemoTables> tables_;
};

}  // namespace pulse
