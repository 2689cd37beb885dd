// From a compiled plan to the Plan a runtime consumes (write it with write_plan): the
// chosen configuration's stages, devices, skips, transfers, schedule, solver, figures, rank
// map and every candidate the tuner tried. Deterministic: nothing in it depends on the
// clock, and numbers are rounded by the writer.
#pragma once

#include "pulse/compile/compile.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

Plan build_plan(const CompiledPlan& plan, const ModelProfile& model, const ClusterProfile& cluster);

}  // namespace pulse
