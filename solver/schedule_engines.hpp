// The integer-programming engines of the schedule synthesizer (internal to solver/).
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "milp.hpp"
#include "op_graph.hpp"
#include "pulse/schedule.hpp"
#include "pulse/simulate.hpp"

namespace pulse::detail {

struct EngineInput {
  const PipelineModel* model = nullptr;
  int num_microbatches = 1;
  std::vector<int> inflight_limit;  ///< Per device, from memory.
  bool split_backward = false;
};

struct EngineOutput {
  bool found = false;
  Schedule schedule;
  milp::Result milp;
};

/// Operations the exact model would have.
int exact_model_size(const OpGraph& g, int num_microbatches);

/// The exact disjunctive model, warm-started from `best_known` (whose makespan is also the
/// horizon). See schedule_exact.cpp.
EngineOutput solve_exact(const OpGraph& g, const EngineInput& in, const Timeline& best_known,
                         const milp::Limits& limits);

struct SearchInput {
  int num_microbatches = 1;
  std::vector<int> memory_cap;  ///< Per device: most microbatches in flight memory can allow.
  std::vector<int> safe_cap;    ///< Per device: in-flight counts that fit in any order.
  std::vector<std::int64_t> free_bytes;  ///< Per device: capacity less the static state.
  bool split_backward = false;
  int max_evaluations = 400;  ///< Deterministic work limit: list schedules tried.
  int max_sweeps = 3;
  std::function<bool()> expired;  ///< Wall-clock safety limit.
  /// Checks the memory rule by replay; asked only when a limit exceeds `safe_cap`.
  std::function<bool(const Schedule&)> fits;
};

struct SearchResult {
  bool found = false;
  Schedule schedule;
  double makespan_s = 0;
  ListPolicy policy;
  std::vector<int> limits;
  int evaluations = 0;
};

/// The best list schedule over a portfolio of rules and in-flight limits, improved by
/// coordinate descent on per-device ranks and limits. See schedule_search.cpp.
SearchResult search_list_schedules(const PipelineModel& model, const SearchInput& input);

struct OrderSearchInput {
  int num_microbatches = 1;
  std::vector<MemoryBreakdown> static_bytes;
  std::int64_t memory_capacity = 0;  ///< Candidates must stay within it (within_memory).
  int max_evaluations = 0;           ///< Deterministic work limit: replays.
  std::function<bool()> expired;     ///< Wall-clock safety limit.
};

struct OrderSearchResult {
  Schedule schedule;
  double makespan_s = 0;
  bool improved = false;  ///< The makespan dropped below the start's.
  int evaluations = 0;
};

/// Local search over per-device op orders from `start` (reinsertions within a window),
/// each candidate replayed. See schedule_order_search.cpp.
OrderSearchResult search_orders(const PipelineModel& model, const OrderSearchInput& input,
                                Schedule start);

}  // namespace pulse::detail
