// ZB-V, the zero-bubble V schedule, by its greedy construction (internal to the schedule
// synthesizer). See zbv_greedy.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse::detail {

/// ZB-V's op order (F, I, W) on a two-stage V, each device's activations (and skip caches)
/// kept within room[d] bytes under the memory rule; the shortest of the greedy's variants.
/// nullopt when the construction gets stuck (the room is too small for its warm-up).
std::optional<Schedule> zbv_schedule(const PipelineModel& model, int num_microbatches,
                                     const std::vector<std::int64_t>& room);

}  // namespace pulse::detail
