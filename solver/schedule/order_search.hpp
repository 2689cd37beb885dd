// Local search over explicit per-device op orders (internal to the schedule synthesizer).
// See order_search.cpp.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "pulse/cost/memory.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse::detail {

struct OrderSearchInput {
  int num_microbatches = 1;
  std::vector<MemoryBreakdown> static_bytes;
  /// Whether a replayed candidate keeps within memory (the synthesizer's room per device).
  std::function<bool(const Timeline&)> fits;
  int max_evaluations = 0;        ///< Deterministic work limit: replays.
  std::function<bool()> expired;  ///< Wall-clock safety limit.
};

struct OrderSearchResult {
  Schedule schedule;
  double makespan_s = 0;
  bool improved = false;  ///< The makespan dropped below the start's.
  int evaluations = 0;
};

/// Local search over per-device op orders from `start` (reinsertions within a window),
/// each candidate replayed. See order_search.cpp.
OrderSearchResult search_orders(const PipelineModel& model, const OrderSearchInput& input,
                                Schedule start);

}  // namespace pulse::detail
