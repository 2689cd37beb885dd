// DeepSeek's DualPipeV order, restated (internal to the schedule synthesizer): the
// per-rank step sequence of deepseek-ai/DualPipe at commit
// 3da1bbea53606543d7f5f232338fc58096db30e3, dualpipe/dualpipev.py (DualPipeV.step), on a
// two-stage V: rank r runs phase 0 (stage r, the way down) and phase 1 (stage 2P-1-r).
// Its overlapped forward-backward pairs run one after the other here (the engine runs one
// op at a time per device). See dualpipev.cpp.
#pragma once

#include <optional>

#include "pulse/simulate/schedule.hpp"

namespace pulse::detail {

/// Whether DualPipeV has an order for P devices and M microbatches: M >= 2P (and P >= 1).
bool dualpipev_applies(int num_devices, int num_microbatches);

/// The order on P devices for M microbatches (ops F, I, W); nullopt where
/// dualpipev_applies is false (below M = 2P, which DualPipeV refuses).
std::optional<Schedule> dualpipev_schedule(int num_devices, int num_microbatches);

}  // namespace pulse::detail
