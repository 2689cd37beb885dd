// Replay: a plan file back through the simulator. The pipeline model is rebuilt from what
// the plan states (stages with their times, transfers with their bytes, skips, schedule),
// replayed by the same engine `plan` uses, and evaluated into the same figures, so a replay
// of an untouched plan reproduces its `comm` and `predicted` blocks exactly and a replay of
// an edited plan shows what the edit does. With a cluster profile, link times, the
// all-reduce, overlap and capacity come from that cluster instead of the plan.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pulse/compile/compile.hpp"
#include "pulse/plan/plan_reader.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/base/result.hpp"

namespace pulse {

struct ReplayRequest {
  const Plan* plan = nullptr;
  /// Optional: replay on this cluster (same device type as the plan) instead of the
  /// plan's own cost_model, link times and all-reduce times.
  const ClusterProfile* cluster = nullptr;
};

struct Replay {
  /// The replayed plan: model, schedule, timeline, all-reduce and the evaluated figures
  /// (what figures_json and chrome_trace read).
  CompiledPlan figures;
  std::int64_t capacity_bytes = 0;  ///< Usable memory per device; 0 when the plan says none.
  std::string cost_source;          ///< "the plan's cost model" or "cluster NAME (FILE)".
};

/// Rebuilds and replays. Input errors (exit 2) name the plan file and JSON path of what is
/// missing or inconsistent (no times, an unknown skip, a schedule that deadlocks, a cluster
/// of another device type).
Result<Replay> replay_plan(const ReplayRequest& request);

/// One figure that differs between a replay and the plan.
struct FigureDifference {
  std::string path;  ///< JSON path, e.g. "$.predicted.iteration_s".
  std::string plan;  ///< The plan's value as JSON text, or "(absent)".
  std::string replay;
};

/// Compares the replay's `comm` and `predicted` blocks with the plan's (`plan_text` is the
/// plan file's JSON), key by key; numbers equal within a nanosecond or a part in 10^9.
std::vector<FigureDifference> compare_figures(const Replay& replay, std::string_view plan_text);

}  // namespace pulse
