// What the driver (compile.cpp) and the tuner (tuner.cpp) share. Private to src/compile.
#pragma once

#include <vector>

#include "pulse/compile/compile.hpp"

namespace pulse::detail {

/// One fully specified configuration.
using Config = Degrees;

/// How hard the schedule pass tries: `screen` is the cheap evaluation the tuner ranks
/// candidates by; `full` is the plan's own synthesis (the options' solver limits).
enum class Effort { screen, full };

/// The inputs every pass of one compile_plan call reads.
struct CompileInputs {
  const ModelProfile* model = nullptr;
  const ClusterProfile* cluster = nullptr;
  const PlanOptions* options = nullptr;
  int device_type = 0;  ///< Index into the model's device_types for the cluster's devices.
};

/// Checks a configuration against the cluster, the model and the batch; a usage error says
/// what does not add up.
Result<Config> resolve_config(const CompileInputs& in, int pp, int dp, int microbatch_size);

/// Runs the pass list for one configuration, each pass timed on `clock`.
Result<CompiledPlan> compile_configuration(const CompileInputs& in, const Config& config,
                                           Effort effort, PassClock& clock);

/// The tuner (tuner.cpp): searches whatever of pp, dp and the microbatch size the options
/// leave open and returns the fastest plan, with every candidate and why it lost.
Result<CompiledPlan> tune(const CompileInputs& in, PassClock& clock);

/// The candidate entry of a configuration compiled alone (everything fixed).
Candidate chosen_candidate(const CompiledPlan& plan);

}  // namespace pulse::detail
