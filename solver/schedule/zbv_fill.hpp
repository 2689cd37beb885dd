// ZB-V's fill loop as its authors wrote it: sail-sg/zero-bubble-pipeline-parallelism at
// commit 39f2c186a27580b7051eb51e0f651e1efd0a8170,
// megatron/core/pipeline_parallel/zerobubble/scheduler/zbv.py (PipelineGraph.try_v_schedule
// and create_schedule), restated for scalar costs and a budget in stage activations, and
// with the one change that lets it see uneven stages: each op's cost looked up for its own
// stage instead of one figure for all (`stage_costs`). Internal to the schedule
// synthesizer; zbv_greedy.cpp is our generalisation to per-link times. See zbv_fill.cpp.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "pulse/simulate/schedule.hpp"
#include "v_auto.hpp"

namespace pulse::detail {

struct ZbvFillRequest {
  int num_devices = 1;
  int num_microbatches = 1;
  ScalarCosts costs;  ///< F, B (input gradient), W and the link time, as the authors take them.
  /// Stage activations a device may hold (the authors' max_mem with f_mem 1, b_mem 0 and
  /// w_mem -1: a forward holds one until its W).
  int max_mem = 0;
  /// Per stage along the V (2P entries): F, B, W, replacing costs.f/b/w for that stage's
  /// ops; empty: the scalar costs for every stage, as the authors time them.
  std::vector<std::array<double, 3>> stage_costs;
};

struct ZbvFill {
  Schedule schedule;
  double makespan = 0;        ///< The latest op end in the authors' own timing.
  double largest_bubble = 0;  ///< What their choice minimises.
};

/// The four variants (W ops filling waits before forwards, before backwards, both or
/// neither), each refined by the authors' approved-bubble passes: every schedule the
/// authors' create_schedule compares. A variant where their code raises is left out.
std::vector<ZbvFill> zbv_fill_variants(const ZbvFillRequest& request);

/// The authors' pick: the first variant of least largest bubble; nullopt where none runs.
std::optional<ZbvFill> zbv_fill_pick(const ZbvFillRequest& request);

}  // namespace pulse::detail
