// PyTorch's ZB-V order, restated (internal to the registry of published schedules,
// published.cpp): pytorch/pytorch at commit 00722e648b740f91d0e71494baa17891749fd291,
// torch/distributed/pipelining/schedules.py,
// `ScheduleZBVZeroBubble._calculate_single_rank_operations`. A fixed order with no cost
// input, on the two-stage V: rank r runs stage r and stage 2P-1-r. See torch_zbv.cpp.
#pragma once

#include "pulse/simulate/schedule.hpp"

namespace pulse::detail {

/// The order on P devices for M microbatches (ops F, I, W).
Schedule torch_zbv_schedule(int num_devices, int num_microbatches);

}  // namespace pulse::detail
