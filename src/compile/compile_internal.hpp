// What the driver (compile.cpp) and the tuner (tuner.cpp) share. Private to src/compile.
#pragma once

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "pulse/compile/compile.hpp"
#include "pulse/graph/layer_graph.hpp"

namespace pulse::detail {

/// One fully specified configuration.
using Config = Degrees;

/// How hard the schedule pass tries: `screen` is the cheap evaluation the tuner ranks
/// candidates by; `full` is the plan's own synthesis (the options' solver limits).
enum class Effort { screen, full };

/// What one compile_plan call computes once and looks up after: the layer graphs at each
/// microbatch size, placements, and every (configuration, family, effort) already compiled.
/// Pulse compares itself with the baselines by the baselines' own computations, which share
/// most of their work with its own search.
struct CompileCache {
  std::map<int, LayerGraph> graphs;        ///< By microbatch size.
  std::map<int, LayerGraph> blind_graphs;  ///< The same without skip edges.
  std::map<std::vector<std::int64_t>, Placement> placements;
  std::map<std::tuple<int, int, int, std::string, int>, Result<CompiledPlan>> plans;
  Result<CompiledPlan> pruned = Error{};  ///< compile_family's answer for a pruned family.
  int safety_limit_hits = 0;  ///< Syntheses the wall-clock safety limit stopped.
};

/// The inputs every pass of one compile_plan call reads.
struct CompileInputs {
  const ModelProfile* model = nullptr;
  const ClusterProfile* cluster = nullptr;
  const PlanOptions* options = nullptr;
  int device_type = 0;  ///< Index into the model's device_types for the cluster's devices.
  CompileCache* cache = nullptr;
};

/// Checks a configuration against the cluster, the model and the batch; a usage error says
/// what does not add up.
Result<Config> resolve_config(const CompileInputs& in, int pp, int dp, int microbatch_size);

/// The passes of one configuration and one family up to the pipeline model (partition,
/// placement, re-placement): enough for its lower bound on time. Each pass is timed on
/// `clock`; the answer lives in `in.cache`, so the reference stays valid for the compile.
const Result<CompiledPlan>& placed_family(const CompileInputs& in, const Config& config,
                                          const Family& family, PassClock& clock);

/// The whole pass list for one configuration and one family, the schedule at `effort` (a
/// family with a fixed schedule has the same answer at both). Cached like placed_family.
const Result<CompiledPlan>& compile_family(const CompileInputs& in, const Config& config,
                                           const Family& family, Effort effort,
                                           PassClock& clock);

/// No schedule of the placed plan `plan` has a shorter iteration: every device starts no
/// sooner than the first microbatch reaches it, then runs all its work (and, when sends
/// block, its sends); its all-reduce follows, and without a split backward so do the
/// backwards of the stages before its first.
double iteration_lower_bound(const CompileInputs& in, const CompiledPlan& plan);

/// The search (tuner.cpp): every configuration the options leave open (one when pp and the
/// microbatch size are fixed) times every family of the strategy, screened; the best few of
/// each family synthesized in full; the fastest plan, with every candidate and why it lost.
Result<CompiledPlan> tune(const CompileInputs& in, PassClock& clock);

/// The families the options ask to search: the strategy's, or the one --family names.
std::vector<const Family*> searched_families(const PlanOptions& options);

/// Bytes the plan moves between pipeline devices per iteration, all replicas together.
std::int64_t p2p_bytes(const CompiledPlan& p);

/// How family `f` did: its plan's figures, or (null) not feasible, the reason left to fill.
FamilyOutcome outcome_of(const Family& f, const CompiledPlan* plan, bool synthesized);

/// True when `a` is faster than `b` (samples per second; ties: fewer bytes moved).
bool faster_plan(const CompiledPlan& a, const CompiledPlan& b);

/// For pulse: each baseline strategy's own answer (tuned or fixed as the options say),
/// computed as `--strategy NAME` computes it, sharing `in.cache`; the fastest of them and
/// `own` wins. Records the baselines' figures in the winner's `versus`.
Result<CompiledPlan> against_baselines(const CompileInputs& in, Result<CompiledPlan> own,
                                       PassClock& clock);

}  // namespace pulse::detail
