// V-Half and V-Min from their repeating patterns (internal to the schedule synthesizer). See
// slot_pattern.cpp.
#pragma once

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/schedule/v_families.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse::detail {

/// The op order of V-Half or V-Min (`family`) on a two-stage V with `num_microbatches`:
/// the family's building block repeated every 6 unit slots, W ops in the free slots, the
/// warm-up and cool-down compacted without raising the peak, then read off as per-device
/// orders (the engine gives the real times).
Schedule slot_pattern_schedule(const PipelineModel& model, int num_microbatches, VFamily family);

}  // namespace pulse::detail
