// Replay: a plan back through the simulator. The pipeline model is rebuilt from what the
// plan states (stages with their times, transfers with their bytes, skips, schedule),
// replayed by the same engine `plan` uses and evaluated into the same figures
// (plan/figures.hpp), so a replay of an untouched plan reproduces its `comm` and
// `predicted` sections exactly and a replay of an edited plan shows what the edit does.
// With a cluster profile, link times, the all-reduce, overlap and capacity come from that
// cluster instead of the plan (its links scaled by the plan's cost_model.link_scale, as the
// plan's own figures assume). A replay may scale the costs further: every stage time x
// compute_scale, every link time (transfers, all-reduce) / link_scale (profile/scaling.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "pulse/base/result.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/simulate/evaluate.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

struct ReplayRequest {
  const Plan* plan = nullptr;
  /// Optional: replay on this cluster (same device type as the plan) instead of the
  /// plan's own cost_model, link times and all-reduce times.
  const ClusterProfile* cluster = nullptr;
  /// What-if factors on top of the plan's own: stage times x compute_scale, link times
  /// / link_scale, each rounded to the time quantum. Positive and finite.
  double compute_scale = 1;
  double link_scale = 1;
  /// A plan whose stages no longer match its partition.stages_sha256 (edited after
  /// planning) is refused, as the times it states are not its stages': unless the caller
  /// has checked the stages against the profiles itself (validate).
  bool trust_edited_stages = false;
};

struct Replay {
  PipelineModel model;  ///< As the plan states it (or timed on the cluster).
  Schedule schedule;
  Timeline timeline;
  Evaluation evaluation;
  /// The plan with its `comm` and `predicted` sections and `schedule_info.makespan_s`
  /// replaced by the replay's, and `cost_model`'s scales by the ones replayed with: what
  /// compare_figures (plan_codec.hpp) holds against the plan, what reports print and what
  /// `diff --compute-scale/--link-scale` compares.
  Plan figures;
  std::int64_t capacity_bytes = 0;  ///< Usable memory per device; 0 when the plan says none.
  std::string cost_source;          ///< "the plan's own cost model ..." or "cluster NAME (FILE)".
  /// Replayed on the plan's own cost model, unscaled: what the plan states still holds.
  bool own_costs = false;
};

/// Rebuilds and replays. Input errors (exit 2) name the plan file and JSON path of what is
/// missing or inconsistent (no times, an unknown skip, a schedule that deadlocks, a cluster
/// of another device type, stages edited since they were planned).
Result<Replay> replay_plan(const ReplayRequest& request);

}  // namespace pulse
