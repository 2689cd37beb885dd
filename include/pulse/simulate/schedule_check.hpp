// An independent check of a timed schedule, written apart from the engine that produced
// it: every operation exactly once on its own device, one operation at a time per device,
// every dependency respected with its transfer time, and memory within the capacity.
// Every schedule the tests produce goes through it; `validate` uses it on plan files.
#pragma once

#include <string>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

struct ScheduleCheckRequest {
  const PipelineModel* model = nullptr;
  const Timeline* timeline = nullptr;
  int num_microbatches = 0;
  bool split_backward = false;
  std::vector<MemoryBreakdown> static_bytes;  ///< Per device.
  std::int64_t memory_capacity = 0;           ///< Usable bytes per device.
};

/// Every violation found, each naming the device, the operation and the numbers; empty
/// when the schedule is valid. The memory check is the synthesizer's rule (within_memory),
/// computed here from the op times alone: static state plus, at each instant, each stage's
/// activations from its forward's start to its last backward's end and the device's skip
/// bytes for every microbatch in flight.
std::vector<std::string> check_schedule(const ScheduleCheckRequest& request);

}  // namespace pulse
