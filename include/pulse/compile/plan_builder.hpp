// From a compiled plan to the Plan a runtime consumes (write it with write_plan): the
// chosen configuration's stages, devices, skips, transfers, schedule, solver, figures, rank
// map and every candidate the tuner tried. Deterministic: nothing in it depends on the
// clock, and numbers are rounded by the writer.
#pragma once

#include "pulse/compile/compile.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/profile/scaling.hpp"

namespace pulse {

/// `model` and `cluster` are the profiles `plan` was compiled from, as loaded: the plan
/// records its options' scales in `options` and `cost_model`, and the files' own names and
/// hashes in `inputs`.
Plan build_plan(const CompiledPlan& plan, const ModelProfile& model, const ClusterProfile& cluster);

}  // namespace pulse
