// The synthesizer's searches on a two-stage V with a split backward, where the published V
// schedules seed it (internal). Every candidate is made without regard to the activation
// budget, and the budget only picks among them, so more memory never makes the answer
// slower. See ladder_search.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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
  /// The policy search at the wide room (its `seen` is set here).
  SearchInput list;
  int order_evaluations = 0;  ///< Replays the chain may make in all (0: no chain).
  /// V-auto's building-block search among the candidates (v_seeds.hpp), the costliest of
  /// them; the memory curve's syntheses go without.
  bool building_blocks = true;
  std::function<bool()> stop;     ///< The wall-clock limit, or the answer at its bound.
  std::function<bool()> expired;  ///< The wall-clock limit.
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
