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

/// The exact model's work limits, in its rows (constraints). CBC's node limit alone does not
/// bound its work: the root's cut loop and every node's LP and cuts cost more as the rows
/// grow. Measured (CPU, one solve): 133-331 rows, 0.3-1.2 s to a proven optimum; 844 rows
/// (SD2 on atlas800-910a-4n at pp 2, 4 microbatches), 3 s for the root alone and about
/// 0.14 s a node after it, so its 5000 nodes would take minutes. So a model of more than
/// kExactMaxRows rows is not solved, and a solve gets at most kExactRowNodes / rows nodes.
inline constexpr int kExactMaxRows = 400;
inline constexpr int kExactRowNodes = 25'000;

struct EngineOutput {
  bool solved = false;  ///< The model was small enough to hand to the solver.
  int rows = 0;         ///< The model's rows.
  bool found = false;
  Schedule schedule;
  milp::Result milp;
};

/// Operations the exact model would have.
int exact_model_size(const OpGraph& g, int num_microbatches);

/// The exact disjunctive model, warm-started from `best_known` (whose makespan is also the
/// horizon), solved within `limits` and the row limits above. See exact_ilp.cpp.
EngineOutput solve_exact(const OpGraph& g, const EngineInput& in, const Timeline& best_known,
                         const milp::Limits& limits);

}  // namespace pulse::detail
