// The plan: the JSON document a training runtime consumes. Deterministic: keys in a fixed
// order, times rounded to the nanosecond and ratios to 1e-9 so the same inputs give the
// same bytes, no wall-clock time anywhere in it.
#pragma once

#include <string>

#include "pulse/compile/compile.hpp"
#include "pulse/plan/plan_reader.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// The plan as JSON text (two-space indented, trailing newline).
std::string plan_json(const CompiledPlan& plan, const ModelProfile& model,
                      const ClusterProfile& cluster);

/// The figures a plan states, `{"comm": ..., "predicted": ...}`, formatted exactly as in
/// plan_json: what `simulate` reports for a replay, from the same code, so a replay and the
/// plan it replays can be compared key by key. `capacity_bytes`: usable memory per device.
std::string figures_json(const CompiledPlan& plan, std::int64_t capacity_bytes);

}  // namespace pulse
