// The exact disjunctive ILP over every operation of a small instance (internal to the
// schedule synthesizer). See exact_ilp.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "op_graph.hpp"
#include "pulse/milp/milp.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse::detail {

struct EngineInput {
  const PipelineModel* model = nullptr;
  int num_microbatches = 1;
  std::vector<int> inflight_limit;  ///< Per device: the most memory can allow in flight.
  bool split_backward = false;
  /// Per device: the bytes activations may hold (rows (f)); empty: counts only.
  std::vector<std::int64_t> room;
};

struct EngineOutput {
  bool found = false;
  Schedule schedule;
  milp::Result milp;
};

/// Operations the exact model would have.
int exact_model_size(const OpGraph& g, int num_microbatches);

/// The exact disjunctive model, warm-started from `best_known` (whose makespan is also the
/// horizon). See exact_ilp.cpp.
EngineOutput solve_exact(const OpGraph& g, const EngineInput& in, const Timeline& best_known,
                         const milp::Limits& limits);

}  // namespace pulse::detail
