// A replayed timeline as a Chrome trace (the trace event format that chrome://tracing and
// Perfetto open): one process per pipeline device with a compute thread (F/B/I/W ops) and a
// send thread (point-to-point transfers, then the gradient all-reduce), events named by
// stage and microbatch. `plan --trace` and `simulate --trace` both write it.
#pragma once

#include <string>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/evaluate.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

/// Trace-event JSON (times in microseconds, as the format wants) for `timeline`, a replay
/// of `model`, with each device's all-reduce among `dp` replicas.
std::string chrome_trace(const PipelineModel& model, const Timeline& timeline,
                         const std::vector<AllReduce>& allreduce, int dp);

}  // namespace pulse
