// The simulated timeline as a Chrome trace (the trace event format that chrome://tracing
// and Perfetto open): one process per pipeline device with a compute thread (F/B/I/W ops)
// and a send thread (point-to-point transfers, then the gradient all-reduce), events named
// by stage and microbatch.
#pragma once

#include <string>
#include <vector>

#include "pulse/compile/compile.hpp"

namespace pulse {

/// Trace-event JSON for a compiled plan (times in microseconds, as the format wants).
std::string chrome_trace(const CompiledPlan& plan);

}  // namespace pulse
