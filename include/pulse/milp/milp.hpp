// A small mixed-integer programming interface: the schedule synthesizer builds models in
// these terms and cbc_backend.cpp, the only file that includes COIN-OR headers, solves them.
// Every variable and row has a name, so an infeasible model can be explained and a solution
// read back by name.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "pulse/base/defaults.hpp"
#include "pulse/base/solve_status.hpp"

namespace pulse::milp {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Term {
  int var;
  double coef;
};

class Model {
 public:
  /// Adds a variable; returns its index. `integer` for general integers (binaries are
  /// integers in [0, 1]).
  int add_var(std::string name, double lower, double upper, double cost, bool integer);
  /// Adds the row lower <= sum(terms) <= upper.
  void add_row(std::string name, std::vector<Term> terms, double lower, double upper);

  int num_vars() const { return static_cast<int>(vars_.size()); }
  int num_rows() const { return static_cast<int>(rows_.size()); }
  int num_integers() const;

  struct Var {
    std::string name;
    double lower, upper, cost;
    bool integer;
  };
  struct Row {
    std::string name;
    std::vector<Term> terms;
    double lower, upper;
  };
  const std::vector<Var>& vars() const { return vars_; }
  const std::vector<Row>& rows() const { return rows_; }

  /// A known feasible assignment (a warm start); empty when none.
  std::vector<double> start;

 private:
  std::vector<Var> vars_;
  std::vector<Row> rows_;
};

/// Work and time limits. The node limit is deterministic; the CPU-time limit is a safety
/// net whose expiry the result reports, because it makes the outcome machine-dependent.
struct Limits {
  int max_nodes = kDefaultSolverNodes;
  double max_seconds = kDefaultSolverSeconds;
  double relative_gap = 1e-6;
  int seed = 1;
};

struct Result {
  /// optimal (within relative_gap), feasible (a limit ended the search with a solution),
  /// infeasible or no_solution (a limit ended it before any solution).
  SolveStatus status = SolveStatus::no_solution;
  std::string stopped_by;  ///< "optimal", "node limit", "time limit", "infeasible", "gap".
  std::vector<double> x;
  double objective = kInfinity;
  double bound = -kInfinity;  ///< Best proven lower bound (minimisation).
  int nodes = 0;
};

/// Minimises the model's cost under the limits, single-threaded with a fixed seed.
Result solve(const Model& model, const Limits& limits);

}  // namespace pulse::milp
