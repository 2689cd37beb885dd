// An independent check of a plan's `frozen` section (docs/frozen.md) against a timeline of
// its pipeline: validate holds it to the plan's own stated timeline and the profiles,
// simulate to the replayed timeline. It restates simulate/frozen.hpp's rules on purpose:
//
//   (a) every op names a frozen component of the plan and a pipeline device, runs at least
//       one sample, and ends after it starts
//   (b) a bubble op lies inside its stated gap, and no op of the pipeline schedule (nor a
//       blocking send after it) on its device overlaps it; the gap lies within the
//       iteration
//   (c) no two frozen ops of one device overlap (bubble ops on the iteration's clock,
//       before-step ops on the frozen phase's)
//   (d) each component encodes every one of the `samples` samples exactly once
//   (e) before_step_s is the latest end of a before-step op, step_s is
//       predicted.iteration_s + before_step_s, bubble_s the sum of the bubble ops' seconds
//   (f) with a model profile: each op's seconds are its samples' forward (interpolated) plus,
//       off device 0, the transfer of their outputs to device 0 over the cluster's link
#pragma once

#include <string>
#include <vector>

#include "pulse/plan/plan.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

struct FrozenCheckRequest {
  const Plan* plan = nullptr;
  const Timeline* timeline = nullptr;
  /// Optional, for (f): the model (its times for `device_type`) and the cluster.
  const ModelProfile* model = nullptr;
  int device_type = -1;
  const ClusterProfile* cluster = nullptr;
};

/// Every violation, one line each; empty when the section holds (or the plan has none).
std::vector<std::string> check_frozen_plan(const FrozenCheckRequest& request);

}  // namespace pulse
