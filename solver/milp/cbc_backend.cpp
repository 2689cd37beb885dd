// The one file that includes COIN-OR headers: it turns a milp::Model into a CBC problem,
// solves it with CBC's standard driver (preprocessing, cuts, heuristics) under
// deterministic settings, and reads the answer back.

#include <coin/CbcEventHandler.hpp>
#include <coin/CbcModel.hpp>
#include <coin/CbcSolver.hpp>
#include <coin/CoinPackedMatrix.hpp>
#include <coin/CoinPackedVector.hpp>
#include <coin/OsiClpSolverInterface.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "pulse/base/process.hpp"
#include "pulse/milp/milp.hpp"

namespace pulse::milp {

namespace {

double coin(double v) {
  if (v == kInfinity) return COIN_DBL_MAX;
  if (v == -kInfinity) return -COIN_DBL_MAX;
  return v;
}

void load(const Model& m, OsiClpSolverInterface& solver) {
  const int n = m.num_vars();
  CoinPackedMatrix matrix(false, 0, 0);
  matrix.setDimensions(0, n);
  std::vector<double> row_lower, row_upper;
  for (const Model::Row& r : m.rows()) {
    CoinPackedVector v;
    for (const Term& t : r.terms) v.insert(t.var, t.coef);
    matrix.appendRow(v);
    row_lower.push_back(coin(r.lower));
    row_upper.push_back(coin(r.upper));
  }
  std::vector<double> lower, upper, cost;
  for (const Model::Var& v : m.vars()) {
    lower.push_back(coin(v.lower));
    upper.push_back(coin(v.upper));
    cost.push_back(v.cost);
  }
  solver.loadProblem(matrix, lower.data(), upper.data(), cost.data(), row_lower.data(),
                     row_upper.data());
  for (int i = 0; i < n; ++i) {
    if (m.vars()[i].integer) solver.setInteger(i);
    solver.setColName(i, m.vars()[i].name);
  }
  for (int r = 0; r < m.num_rows(); ++r) solver.setRowName(r, m.rows()[r].name);
  solver.messageHandler()->setLogLevel(0);
}

// Enforces the limits from inside the search. CBC's own maxNodes is not a hard cap (a
// 1000-node limit was measured running 48,000 nodes), so the handler counts processed nodes
// itself (deterministic) and also checks elapsed time (the safety net). CBC clones
// handlers into the models it derives (preprocessing), so the count lives in shared state.
struct SearchState {
  int nodes = 0;
  bool node_limit = false;
  bool time_limit = false;
};

class LimitHandler : public CbcEventHandler {
 public:
  LimitHandler(std::shared_ptr<SearchState> state, const Limits& limits)
      : state_(std::move(state)), limits_(limits), start_(thread_cpu_seconds()) {}

  CbcAction event(CbcEvent which) override {
    if (which != node && which != treeStatus) return noAction;
    if (which == node && ++state_->nodes >= limits_.max_nodes) {
      state_->node_limit = true;
      return stop;
    }
    if (thread_cpu_seconds() - start_ >= limits_.max_seconds) {
      state_->time_limit = true;
      return stop;
    }
    return noAction;
  }
  CbcEventHandler* clone() const override { return new LimitHandler(*this); }

 private:
  std::shared_ptr<SearchState> state_;
  Limits limits_;
  double start_;
};

}  // namespace

Result solve(const Model& m, const Limits& limits) {
  OsiClpSolverInterface solver;
  load(m, solver);
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  if (!m.start.empty()) {
    std::vector<std::pair<std::string, double>> start;
    for (int i = 0; i < m.num_vars(); ++i) start.emplace_back(m.vars()[i].name, m.start[i]);
    model.setMIPStart(start);
  }
  auto state = std::make_shared<SearchState>();
  const LimitHandler handler(state, limits);
  model.passInEventHandler(&handler);
  CbcMain0(model);
  // One thread, fixed seeds, a CPU-time limit as a safety net, the node limit as the
  // deterministic bound on work. No CGL preprocessing: when a limit stops the search
  // before preprocessing has produced a solution, CglPreProcess::postProcess dereferences
  // a null solver (CBC 2.10.8, Debian 12; reproduced when the
  // time limit fires early). Our disjunctive models are small; the cuts still run.
  const std::vector<std::string> args = {"pulse-plan",
                                         "-log",
                                         "0",
                                         "-threads",
                                         "0",
                                         "-randomSeed",
                                         std::to_string(limits.seed),
                                         "-randomCbcSeed",
                                         std::to_string(limits.seed),
                                         "-timeMode",
                                         "cpu",
                                         "-seconds",
                                         fmt::format("{}", std::max(limits.max_seconds, 0.0)),
                                         "-maxNodes",
                                         std::to_string(limits.max_nodes),
                                         "-preprocess",
                                         "off",
                                         "-ratioGap",
                                         fmt::format("{}", limits.relative_gap),
                                         "-solve",
                                         "-quit"};
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  CbcMain1(static_cast<int>(argv.size()), argv.data(), model);

  Result r;
  r.nodes = state->nodes;
  r.bound = model.getBestPossibleObjValue();
  const double* best = model.bestSolution();
  if (best) {
    r.x.assign(best, best + m.num_vars());
    r.objective = model.getObjValue();
  }
  if (model.isProvenInfeasible()) {
    r.status = SolveStatus::infeasible;
    r.stopped_by = "infeasible";
  } else if (best && model.isProvenOptimal()) {
    r.status = SolveStatus::optimal;
    r.stopped_by = "optimal";
  } else {
    r.status = best ? SolveStatus::feasible : SolveStatus::no_solution;
    r.stopped_by = state->time_limit || model.isSecondsLimitReached() ? "time limit"
                   : state->node_limit || model.isNodeLimitReached()  ? "node limit"
                                                                      : "gap";
  }
  return r;
}

}  // namespace pulse::milp
