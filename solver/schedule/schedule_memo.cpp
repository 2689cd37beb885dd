// The memo a job owns (include/pulse/schedule/schedule_memo.hpp): its tables
// (answer_memo.hpp) and how often each was asked.

#include "pulse/schedule/schedule_memo.hpp"

#include "answer_memo.hpp"

namespace pulse {

ScheduleMemo::ScheduleMemo() : tables_(std::make_unique<detail::MemoTables>()) {}

ScheduleMemo::~ScheduleMemo() = default;

ScheduleMemo::AllCounts ScheduleMemo::counts() const {
  const detail::MemoTables& t = *tables_;
  return {t.answers.counts(), t.bounds.counts(),       t.ladders.counts(),
          t.seeds.counts(),   t.v_auto_pools.counts(), t.list_outcomes.counts()};
}

}  // namespace pulse
