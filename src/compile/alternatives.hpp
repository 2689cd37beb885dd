// Level 0 as one table (compile.cpp). Every alternative a plan is weighed against is a row:
// its axis, its label, the options it plans, the options a plan adopted from it states, and
// whether pulse may adopt it. Each row is planned by level 1 (tune) with the job's one cache
// and compared once, by one order (faster_plan); the record of every row's figures is the
// plan's `alternatives[]`, and `partition.versus.baselines`, `pipeline_or_not` and
// `recompute_search` are views of it (verdicts.cpp).
//
// Rows come in levels, one per model planned. --recompute auto plans three models (one per
// mode: the layers' times and bytes differ), so it has three levels, each itself a row of
// axis recompute; anything else has one level. Within a level the fastest row that may be
// adopted wins (a sharded plan adopted puts the search of the plan it replaces beside its
// own) and gets its memory curve; across levels, the fastest level's plan wins (of two as
// fast, the one listed first). Searched levels are planned in the order of their lower
// bounds on time (tune_lower_bound over their rows: placement and the synthesizer's bound
// under memory, no schedule), least first, and a level whose bound is above the plan kept
// so far could not win and is not planned. Every level shares the job's placements and
// schedule memo; its graphs and plans are its own (the cache keys them by the mode).
//
// The next axis is one row: an Axis value and its rows in level_rows (or, when it plans
// another model, a level in levels_of), each with the options it plans and states and its
// Adoption; the comparison, the record and the plan's key follow.
#pragma once

#include <string>
#include <vector>

#include "compile_internal.hpp"

namespace pulse::detail {

enum class Axis {
  own,        ///< The strategy's own search.
  strategy,   ///< A baseline strategy's own answer for the same options.
  sharding,   ///< Sharded data parallelism alone: pp 1 over every device, at a ZeRO stage.
  recompute,  ///< A recomputation mode (a level of its own).
  /// A sequence-parallel layout (a level of its own: the model and cluster of one device of
  /// each sequence group, cost/sequence_parallel.hpp), at a recomputation mode.
  sequence,
};

/// The record's name of an axis: "own", "strategy", "sharding", "recompute", "sequence".
const char* axis_name(Axis axis);

/// Whether pulse may keep a row's plan as its own, were it the fastest.
enum class Adoption {
  yes,
  no,
  /// Only when the level's own search (its first row) has no plan: the baselines, when the
  /// options ask for a family (with a given cut they are never adopted: their cut is not it).
  fallback,
};

struct Alternative {
  Axis axis = Axis::own;
  std::string label;
  PlanOptions options;  ///< What it plans.
  PlanOptions stated;   ///< What a plan adopted from it states as its options.
  Adoption adoption = Adoption::yes;
};

/// The levels `options` ask for: under --recompute auto, one row of axis recompute per mode
/// (none, selective, full); else one level, of axis own, planning the options as given.
/// For pulse, when the model states sequences and the options leave pp and the family open,
/// each sequence layout worth planning on `cluster` (sequence_layouts) at each of those modes
/// is a level of axis sequence; the plain own level is then axis sequence too, "none".
std::vector<Alternative> levels_of(const PlanOptions& options, const ModelProfile& model,
                                   const ClusterProfile& cluster);

/// The rows of one level, from its options (scales resolved): the strategy's own search
/// first; for pulse, each baseline strategy's own answer (as `--strategy NAME` computes it,
/// its own cut), then, on two devices or more, sharded data parallelism alone at ZeRO-2 and
/// ZeRO-3 (adopted only when the options leave pp open and ask for no family). A level of a
/// sequence layout has its own search and the sharded rows only.
std::vector<Alternative> level_rows(const PlanOptions& options, int devices);

/// The profiles and the options of one job.
struct JobInputs {
  const ModelProfile* model = nullptr;
  const ClusterProfile* cluster = nullptr;
  const PlanOptions* options = nullptr;
};

/// Level 0: every row of every level planned with `cache`, compared once; the winner with
/// its record (`alternatives`, the chosen rows marked) and the views of it. A level's
/// request error as it is; with one level, its own search's error when no row has a plan;
/// with levels searched, an error other than infeasible as it is, else the first level's
/// error when none has a plan.
Result<CompiledPlan> compare_alternatives(const JobInputs& job, CompileCache& cache,
                                          PassClock& clock);

/// The search of a sharded plan that replaces `before` (verdicts.cpp): its own
/// configurations (at ZeRO stage `zero`), then those of `before`, best first.
std::vector<Candidate> merged_search(const CompiledPlan& sharded, const CompiledPlan* before,
                                     int zero);

/// Fills the views of `plan.alternatives` (verdicts.cpp): `baselines` (the chosen level's
/// strategy rows), `pipeline_or_not` (its sharding rows and the verdict, against the best
/// answer of the other kind) and `recompute_search` (the recompute rows and the verdict).
void state_verdicts(CompiledPlan& plan);

}  // namespace pulse::detail
