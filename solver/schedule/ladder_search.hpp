// The synthesizer's searches on a two-stage V with a split backward, where the published V
// schedules seed it (internal). Every candidate is made without regard to the activation
// budget, and the budget only picks among them, so more memory never makes the answer
// slower. See ladder_search.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "answer_memo.hpp"
#include "policy_search.hpp"
#include "pulse/cost/memory.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse::detail {

struct LadderInput {
  const PipelineModel* model = nullptr;
  int num_microbatches = 1;
  std::vector<MemoryBreakdown> static_bytes;
  /// Per device: what the capacity leaves for activations, whatever the budget.
  std::vector<std::int64_t> wide_room;
  /// Per device: what the budget leaves (a member fits when every device's peak does).
  std::vector<std::int64_t> room;
  /// The policy search at the wide room (its `seen` is set here); none when `wide_list` is
  /// false (a screen or a memory trim: the seeds are candidates enough there).
  SearchInput list;
  bool wide_list = true;
  /// The rungs (none without `list_at`): the policy search's input at a room of `budget`
  /// bytes per device (within the wide room); each rung's share of the policy search's and
  /// the order search's op-replays (list schedules or replays times ops), within the
  /// request's own limits per search.
  std::function<SearchInput(std::int64_t budget)> list_at;
  long rung_list_op_replays = 0, rung_order_op_replays = 0;
  int max_list_evaluations = 0, max_order_evaluations = 0;
  /// The job's memo (schedule_memo.hpp), where the staircase is kept by `key` (what it
  /// depends on: the request without its budget) to be found again when the plan asks with
  /// another budget, and the published schedules' pool by its own (v_seeds.hpp). Null: not
  /// kept.
  ScheduleMemo* memo = nullptr;
  LadderKey key;
  std::function<bool()> stop;     ///< The CPU-time limit, or the answer at its bound.
  std::function<bool()> expired;  ///< The CPU-time limit.
  /// Hands a candidate to the synthesizer (which replays it and keeps it if it fits the
  /// budget and beats the best).
  std::function<void(Schedule, const std::string& method)> offer;
};

struct LadderResult {
  int list_evaluations = 0;
  int order_evaluations = 0;
};

LadderResult ladder_search(const LadderInput& input);

}  // namespace pulse::detail
