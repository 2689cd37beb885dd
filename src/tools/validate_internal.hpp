// The plan validator's shared state, split over validate.cpp (inputs, degrees, layers,
// placement, rank map), validate_schedule.cpp (skips, transfers, schedule, timing, memory)
// and validate_figures.cpp (predicted figures, summaries, claims about the cluster).
// Private to the library.
#pragma once

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "pulse/base/text.hpp"
#include "pulse/cost/cost_model.hpp"
#include "pulse/graph/layer_graph.hpp"
#include "pulse/plan/strategy.hpp"
#include "pulse/simulate/schedule_check.hpp"
#include "pulse/tools/validate.hpp"

namespace pulse::detail {

// Plans round times to the nanosecond; times recomputed here are not rounded.
constexpr double kQuantum = kTimeQuantum_s;
constexpr double kTimeTolerance = 2 * kQuantum;
constexpr double kNoise = 1e-12;

inline std::string op_name(const Op& op) {
  return fmt::format("{}(stage {}, mb {})", op_letter(op.kind), op.stage, op.mb);
}

inline std::string short_hash(const std::string& h) {
  return h.substr(0, 12);
}

/// The family a plan says it follows (partition.family), or, for a plan that does not say,
/// its strategy's when that strategy has one family; null when unknown.
inline const Family* known_family(const Plan& plan) {
  if (plan.partition.family) return find_family(*plan.partition.family);
  const auto s = parse_strategy(plan.strategy());
  if (s && families(*s).size() == 1) return &families(*s).front();
  return nullptr;
}

inline bool close(double a, double b) {
  return std::fabs(a - b) <= kTimeTolerance + 1e-9 * std::fabs(b);
}

class Validator {
 public:
  /// `unscaled`: the cluster as its file states it (the replay scales its links by the
  /// plan's link_scale itself); r.cluster may be a scaled copy. `given`: the model as its
  /// file states it (which layers recomputation selects is decided on it); r.model may be
  /// a derived, scaled or recomputing copy.
  Validator(const ValidateRequest& r, const ClusterProfile& unscaled, const ModelProfile& given)
      : request_(r),
        plan_(*r.plan),
        model_(*r.model),
        cluster_(*r.cluster),
        unscaled_(unscaled),
        given_(given) {}
  ValidateResult run();

 private:
  // Past the limit of a check, one placeholder stands for the rest ("... and N more"). A
  // message is one line whatever the names in it hold (printable, pulse/base/text.hpp).
  void fail(const char* check, const std::string& message) {
    const std::size_t n = ++count_[check];
    if (n == request_.max_per_check + 1) overflow_[check] = out_.violations.size();
    if (n <= request_.max_per_check + 1) out_.violations.push_back({check, printable(message)});
  }
  void skip(std::string what) { out_.skipped.push_back(std::move(what)); }

  void check_inputs();
  void check_degrees();
  void check_stated_keys();
  void check_stages_digest();
  bool check_layers();
  bool check_placement();
  void build_model();
  void check_stage_figures();
  void check_recomputed(const PlanStage& x);
  void check_skips();
  void check_cached_skips();
  void check_transfers();
  Timeline timeline() const;
  void check_schedule_order();
  void check_schedule_and_memory();
  void check_timing(const Timeline& t);
  void check_predicted_memory();
  void check_predicted_figures();
  void check_solver(const PlanSolver& solver, const Timeline& replayed);
  void check_summary();
  void check_chosen_family();
  void check_chosen_candidate();
  void check_chosen_options();
  void check_inflight_limits();
  void check_transfer_links(const std::string& name, const Transfer& t, const PlanTransfer& c);
  void check_transfer_carried(const std::string& name, const Transfer& t, const PlanTransfer& c);
  void check_cost_model();
  void check_rank_map();
  void finish();

  const ValidateRequest& request_;
  const Plan& plan_;
  const ModelProfile& model_;
  const ClusterProfile& cluster_;
  const ClusterProfile& unscaled_;
  const ModelProfile& given_;
  ValidateResult out_;
  std::map<std::string, std::size_t> count_;
  std::map<std::string, std::size_t> overflow_;  // check -> index of its placeholder
  int device_type_ = -1;
  bool predicted_right_ = false;  ///< The predicted figures were replayed and agree.
  std::vector<LayerId> first_layer_;
  std::optional<LayerGraph> graph_;
  PipelineModel pm_;
};

}  // namespace pulse::detail
