#include "pulse/base/solve_status.hpp"

namespace pulse {

const char* solve_status_name(SolveStatus status) {
  switch (status) {
    case SolveStatus::optimal:
      return "optimal";
    case SolveStatus::feasible:
      return "feasible";
    case SolveStatus::heuristic:
      return "heuristic";
    case SolveStatus::fixed:
      return "fixed";
    case SolveStatus::time_limit:
      return "time_limit";
    case SolveStatus::infeasible:
      return "infeasible";
    case SolveStatus::no_solution:
      return "no_solution";
  }
  return "";
}

bool has_answer(SolveStatus status) {
  return status != SolveStatus::infeasible && status != SolveStatus::no_solution;
}

}  // namespace pulse
