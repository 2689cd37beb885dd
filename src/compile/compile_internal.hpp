// The interface between the pass list (src/compile.cpp) and the tuner (solver/tuner.cpp).
#pragma once

#include <vector>

#include "pulse/compile/compile.hpp"

namespace pulse::detail {

/// One fully specified configuration.
struct Config {
  int pp = 1, dp = 1, microbatch = 1, num_microbatches = 1, global_batch = 1;
};

/// How hard the schedule pass tries: `screen` is the cheap evaluation the tuner ranks
/// candidates by; `full` is the plan's own synthesis (the options' solver limits).
enum class Effort { screen, full };

/// Checks a configuration against the cluster, the model and the batch; a usage error says
/// what does not add up.
Result<Config> resolve_config(const ModelProfile& model, const ClusterProfile& cluster,
                              const PlanOptions& options, int pp, int dp, int microbatch);

/// Runs the pass list for one configuration (placement included).
Result<CompiledPlan> compile_configuration(const ModelProfile& model, const ClusterProfile& cluster,
                                           const PlanOptions& options, const Config& config,
                                           int device_type, Effort effort,
                                           std::vector<PassTime>& times);

}  // namespace pulse::detail
