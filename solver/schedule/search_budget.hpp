// The searches' work limits (synthesize.cpp): how many list schedules the policy search and
// how many replays the order search may spend on a request, and the request as the
// searches see it once those limits are clamped. Large instances get fewer evaluations, as
// replays cost in proportion to the ops; past a size the full effort's limits and a
// screen's clamp to the same numbers, and the two syntheses do the same work
// (synthesis_repeats, synthesize.hpp).
#pragma once

#include "pulse/schedule/synthesize.hpp"

namespace pulse::detail {

/// Op replays the order search may spend in all (evaluations times ops per replay).
inline constexpr long kOrderOpReplays = 1'000'000;
/// The policy search's op-replays (list schedules x ops), with at least
/// kMinListEvaluations list schedules: large instances get fewer, as in the order search.
inline constexpr long kListOpReplays = 400'000;
inline constexpr int kMinListEvaluations = 120;
/// ...but never more than this many op-replays in all, whatever the floor: the work limit
/// that keeps the largest instances (32 stages x 4096 microbatches: 262,144 ops a replay,
/// where 120 list schedules took 5-17 s) far from the CPU-time safety limit. It binds only
/// above 66,666 ops a replay.
inline constexpr long kMaxListOpReplays = 8'000'000;

/// Ops in one replay of the request's pipeline: stages x (forward, backward and, with a
/// split backward, the weight gradient) x microbatches.
long ops_per_replay(const ScheduleRequest& r);

/// The list schedules the policy search may try at the request's room:
/// min(max_evaluations, max(kMinListEvaluations, kListOpReplays / ops),
///     kMaxListOpReplays / ops).
int list_budget(const ScheduleRequest& r);

/// The replays the order search may make: min(max_order_evaluations, kOrderOpReplays / ops),
/// and it runs only where that is positive.
int order_budget(const ScheduleRequest& r);

/// The request with its work limits as the searches clamp them (the list and order budgets
/// above; the exact integer program's limit 0 where the instance is larger than it), and
/// without search limits at all for a fixed-schedule family, which runs no search. Two
/// requests equal after this ask for the same searches, but for their memory curve (its
/// smaller syntheses take their limits from max_evaluations: compare it as given) and for
/// the ladder (split backward on a two-stage V), whose rungs share the limits as given:
/// both are left as they are.
ScheduleRequest searched_request(const ScheduleRequest& r);

}  // namespace pulse::detail
