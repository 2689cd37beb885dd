// V-auto: the building-block search of "Pipeline Parallelism with Controllable Memory"
// (Qi et al., arXiv 2405.15362, section 3 and appendix A), restated from
// sail-sg/zero-bubble-pipeline-parallelism at commit 39f2c186a27580b7051eb51e0f651e1efd0a8170,
// megatron/core/pipeline_parallel/zerobubble/scheduler/v_auto_schedule.py (`schedule`).
// Internal to the schedule synthesizer. See v_auto.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pulse/simulate/schedule.hpp"

namespace pulse::detail {

/// A two-stage V in unit slots: per device a row of "FfBbWw" letters and ' ' (F: forward of
/// stage d, f: of stage 2P-1-d; B, W: input and weight gradient of stage 2P-1-d; b, w: of
/// stage d). The k-th letter of a kind in a row is microbatch k.
using SlotRows = std::vector<std::string>;

/// The scalar costs the authors' search evaluates its candidates with: F, B (the input
/// gradient), W and the link time c.
struct ScalarCosts {
  double f = 1, b = 1, w = 1, c = 0;
};

struct VAutoCandidate {
  SlotRows rows;
  int peak = 0;  ///< Most stage activations any device holds (F +1 at its slot, W -1).
};

struct VAutoSearch {
  /// Every schedule the search produced, in the order it produced them.
  std::vector<VAutoCandidate> candidates;
  /// Where the authors' code raises (an assertion or an index out of range) the whole
  /// search fails there; the candidates before it are kept.
  bool raised = false;
};

/// The search's candidates for P devices, M microbatches and a budget of `max_mem` stage
/// activations per device (the authors' `max_mem`, which they cap at 2P).
VAutoSearch v_auto_candidates(int P, int M, int max_mem);

/// Every block's schedule of peak at most `max_mem` (capped at 2P), without the loop's
/// early ends: all the candidates v_auto_candidates gives at any budget up to `max_mem`
/// (with M <= P and room for 2M, the authors release warm-up W ops only at budgets from
/// 2M: ask at 2M - 1 too for those below).
VAutoSearch v_auto_pool(int P, int M, int max_mem);

/// The authors' evaluation of a candidate (`evaluate_schedule`): every op as early as its
/// device's previous op and its input (plus c) allow; the largest device span from its
/// first forward's end to its last weight gradient's end, plus F. nullopt where the order
/// deadlocks (their recursion raises).
std::optional<double> v_auto_span(const SlotRows& rows, const ScalarCosts& costs);

/// The authors' pick: the first candidate of least span; nullopt where their search raises
/// or finds none.
std::optional<SlotRows> v_auto_pick(int P, int M, const ScalarCosts& costs, int max_mem);

/// The op order of slot rows (weight gradients as they are labelled).
Schedule slot_rows_schedule(const SlotRows& rows);

}  // namespace pulse::detail
