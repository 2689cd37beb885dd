// The figures a plan states, computed once: `comm` (bytes moved) and `predicted` (time,
// throughput, bubble, memory) from a pipeline model, its replayed timeline and its
// evaluation. The planner fills a new plan with them and `simulate` fills a replay with them,
// so the two compare section by section (compare_figures in plan_codec.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/simulate/evaluate.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

/// `comm`: one iteration's point-to-point bytes (the model run for `num_microbatches`
/// microbatches on each of `dp` replicas), by kind and by link class, and the all-reduce.
PlanComm comm_figures(const PipelineModel& model, const std::vector<AllReduce>& allreduce,
                      int num_microbatches, int dp);

/// `predicted`: iteration, throughput, bubble and, per device, time and memory at the peak.
/// `capacity_bytes`: usable memory per device.
PlanPredicted predicted_figures(const Timeline& timeline, const Evaluation& evaluation,
                                std::int64_t capacity_bytes);

/// `warnings`: what a plan's own figures say its user should look at again, one line each,
/// in this order: a bubble above kBubbleWarning of the pipeline's device time; every device
/// planned above kMemoryWarning of its usable memory; a pipeline (pp > 1) whose every device
/// holds one microbatch at a time. Empty when none holds.
std::vector<std::string> plan_warnings(const Plan& plan);
inline constexpr double kBubbleWarning = 0.5;
inline constexpr double kMemoryWarning = 0.95;

}  // namespace pulse
