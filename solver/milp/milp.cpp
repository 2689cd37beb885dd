// The model builder of the MILP interface; cbc_backend.cpp solves what it builds.
#include "pulse/milp/milp.hpp"

#include <algorithm>

namespace pulse::milp {

int Model::add_var(std::string name, double lower, double upper, double cost, bool integer) {
  vars_.push_back(Var{std::move(name), lower, upper, cost, integer});
  return static_cast<int>(vars_.size()) - 1;
}

void Model::add_row(std::string name, std::vector<Term> terms, double lower, double upper) {
  rows_.push_back(Row{std::move(name), std::move(terms), lower, upper});
}

int Model::num_integers() const {
  return static_cast<int>(
      std::count_if(vars_.begin(), vars_.end(), [](const Var& v) { return v.integer; }));
}

}  // namespace pulse::milp
