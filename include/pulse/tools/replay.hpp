// Replay: a plan back through the simulator. The pipeline model is rebuilt from what the
// plan states (stages with their times, transfers with their bytes, skips, schedule),
// replayed by the same engine `plan` uses and evaluated into the same figures
// (plan/figures.hpp), so a replay of an untouched plan reproduces its `comm` and
// `predicted` sections exactly and a replay of an edited plan shows what the edit does.
// With a cluster profile, link times, the all-reduce, overlap and capacity come from that
// cluster instead of the plan.
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
};

struct Replay {
  PipelineModel model;  ///< As the plan states it (or timed on the cluster).
  Schedule schedule;
  Timeline timeline;
  Evaluation evaluation;
  /// The plan with its `comm` and `predicted` sections replaced by the replay's: what
  /// compare_figures (plan_codec.hpp) holds against the plan, and what reports print.
  Plan figures;
  std::int64_t capacity_bytes = 0;  ///< Usable memory per device; 0 when the plan says none.
  std::string cost_source;          ///< "the plan's own cost model ..." or "cluster NAME (FILE)".
};

/// Rebuilds and replays. Input errors (exit 2) name the plan file and JSON path of what is
/// missing or inconsistent (no times, an unknown skip, a schedule that deadlocks, a cluster
/// of another device type).
Result<Replay> replay_plan(const ReplayRequest& request);

}  // namespace pulse
