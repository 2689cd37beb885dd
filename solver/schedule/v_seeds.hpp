// The published V schedules as seeds of the synthesizer (internal): on a two-stage V with
// a split backward, every schedule the authors' own rules produce at any budget (ZB-V's
// fill loop at every budget from P to 3P stage activations, every candidate of V-auto's
// building-block search, V-Half, V-Min) and DeepSeek's DualPipeV, timed on the pipeline's
// real stage and link times: the staircase of those that fit the room (staircase.hpp).
// Nothing in it depends on an activation budget, so a synthesis that takes the members
// fitting its budget never gets slower with more memory. See v_seeds.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/schedule/schedule_memo.hpp"
#include "staircase.hpp"
#include "v_auto.hpp"

namespace pulse::detail {

struct VSeedRequest {
  const PipelineModel* model = nullptr;
  int num_microbatches = 1;
  /// Per device: the bytes activations (and skip caches) may hold.
  std::vector<std::int64_t> room;
  /// The job's memo (schedule_memo.hpp), where the pool is kept by what it depends on (the
  /// model, M, the room) to be found again when a plan asks once more (its screen, its full
  /// synthesis, its memory trims), and V-auto's candidates by P, M and the budget. Null: not
  /// kept.
  ScheduleMemo* memo = nullptr;
};

/// The pool's staircase (empty off a two-stage V); methods "zb-v", "v-auto", "v-half",
/// "v-min" or "dualpipev".
std::vector<StairMember> v_seeds(const VSeedRequest& request);

/// The scalar F, B, W and link time, in milliseconds to the nanosecond, the authors'
/// runtime gives their generators for this pipeline (zerobubble/runtime.py, avg_then_mid:
/// per device the average of its stages, then the upper median over devices, here without
/// its floor of 1; the link time likewise over the main-path transfers).
ScalarCosts authors_costs(const PipelineModel& model);

/// Each stage's own F, B (input gradient) and W along the V, in the units of authors_costs:
/// what ZB-V's fill loop is given besides the scalar figures (zbv_fill.hpp, stage_costs).
std::vector<std::array<double, 3>> stage_costs_of(const PipelineModel& model);

}  // namespace pulse::detail
