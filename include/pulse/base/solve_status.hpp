// What a solve found: the one status convention of every optimiser (partition, schedule,
// integer program). Whether a call *worked* is a separate thing, a Result's Error (bad
// input, internal failure); a solve that worked may still have found nothing.
#pragma once

#include <string_view>

namespace pulse {

enum class SolveStatus {
  /// Proven optimal for the cost model (an exact DP, an integer program closed, or a
  /// schedule that meets its lower bound).
  optimal,
  /// Found by a search that does not prove optimality (a bounded DP, a policy or order
  /// search, an integer program stopped by its node limit with a solution).
  feasible,
  /// Nothing improved on the heuristic the search started from.
  heuristic,
  /// Prescribed, not searched: a baseline strategy's own schedule (1F1B, GPipe).
  fixed,
  /// The CPU-time safety limit stopped the search; the answer is the best found by then.
  time_limit,
  /// Proven that nothing fits (the answer says what does not, by how much).
  infeasible,
  /// A limit ended the search before any answer was found.
  no_solution,
};

/// The name a plan writes: "optimal", "feasible", "heuristic", "fixed", "time_limit",
/// "infeasible", "no_solution".
const char* solve_status_name(SolveStatus status);

/// True when the status carries an answer.
bool has_answer(SolveStatus status);

}  // namespace pulse
