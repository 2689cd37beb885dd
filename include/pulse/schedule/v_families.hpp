// The published V schedule families, generated for any pipeline with two stages per device
// in a V (stage d and stage 2P-1-d on device d): ZB-V, V-Half and V-Min.
//
// Sources (read, not copied): P. Qi, X. Wan, N. Amar, M. Lin, "Pipeline Parallelism with
// Controllable Memory", NeurIPS 2024, arXiv 2405.15362 (building blocks, lifespans and the
// V-Min, V-Half and V-ZB schedules); the sail-sg/zero-bubble-pipeline-parallelism repository
// at commit 39f2c186a27580b7051eb51e0f651e1efd0a8170, files
// megatron/core/pipeline_parallel/zerobubble/scheduler/zbv.py (the ZB-V greedy) and
// .../scheduler/zbv_greedy.py (V-Half and V-Min from their repeating patterns).
//
// The families are stated for uniform F, B, W and one link delay; here every op takes its
// own stage's time and every transfer its own link's, because the engine replays them. All
// three need a split backward (I and W). The synthesizer uses them as seeds; the benchmark
// (bench/bench_v_families.cpp) prints them beside the synthesized schedules.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse {

enum class VFamily {
  zb_v,    ///< Zero bubble at about 2P stage activations per device (ZB-V's greedy).
  v_half,  ///< About half of that memory, a small bubble (V-Half's repeating pattern).
  v_min,   ///< About a third, a larger bubble (V-Min's repeating pattern).
};

/// "zb-v", "v-half", "v-min".
const char* v_family_name(VFamily family);

/// Whether `layout` is the V with two stages per device: stage d and 2P-1-d on device d.
bool is_two_stage_v(const StageLayout& layout);

struct VFamilyRequest {
  const PipelineModel* model = nullptr;
  int num_microbatches = 1;
  VFamily family = VFamily::zb_v;
  /// ZB-V only: per device, the bytes activations (and skip caches) may hold under the
  /// memory rule (cost/memory.hpp). Empty: ZB-V's own limit, 2P times the larger of the
  /// device's per-microbatch holds.
  std::vector<std::int64_t> activation_room;
};

/// ZB-V's own room per device: 2P times the larger of its per-microbatch holds (its first
/// stage's activations and skip bytes, or its second stage's activations).
std::vector<std::int64_t> zbv_room(const PipelineModel& model);

/// The family's schedule (ops F, I, W), or nullopt where it does not apply: the layout is
/// not a two-stage V, or ZB-V's memory room admits too little to run.
std::optional<Schedule> v_family_schedule(const VFamilyRequest& request);

}  // namespace pulse
