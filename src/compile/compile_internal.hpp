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

/// Runs the pass list for one configuration and one family, each pass timed on `clock`. A
/// family whose lower bound on time (its busiest device's work) is at least `prune_at` is
/// not scheduled: an infeasible error "pruned by its lower bound".
/// The answer lives in `in.cache`, so the reference stays valid for the whole compile.
const Result<CompiledPlan>& compile_family(
    const CompileInputs& in, const Config& config, const Family& family, Effort effort,
    PassClock& clock, double prune_at = std::numeric_limits<double>::infinity());

/// Every family of the strategy at one configuration and effort, fastest first kept: the
/// plan of the best, with every family's outcome in `families`. Families that cannot beat
/// the best so far by a lower bound on their time are not scheduled (the baselines' own
/// families always are, so that their answers are known).
Result<CompiledPlan> compile_configuration(const CompileInputs& in, const Config& config,
                                           Effort effort, PassClock& clock);

/// The plan for one fixed configuration: the families screened, the best synthesized in
/// full; for pulse, each baseline's own plan beside it, the fastest winning.
Result<CompiledPlan> compile_fixed(const CompileInputs& in, const Config& config,
                                   PassClock& clock);

/// The final synthesis of a screened configuration: its best family in full; a baseline's
/// answer is that synthesis, pulse keeps whichever of the two is faster.
Result<CompiledPlan> finish(const CompileInputs& in, const Config& config,
                            const CompiledPlan& screened, PassClock& clock);

/// The tuner (tuner.cpp): searches whatever of pp, dp and the microbatch size the options
/// leave open and returns the fastest plan, with every candidate and why it lost.
Result<CompiledPlan> tune(const CompileInputs& in, PassClock& clock);

/// The candidate entry of a configuration compiled alone (everything fixed).
Candidate chosen_candidate(const CompiledPlan& plan);

/// The families the options ask to search: the strategy's, or the one --family names.
std::vector<const Family*> searched_families(const PlanOptions& options);

/// True when `a` is faster than `b` (samples per second; ties: fewer bytes moved).
bool faster_plan(const CompiledPlan& a, const CompiledPlan& b);

/// For pulse: each baseline strategy's own answer (tuned or fixed as the options say),
/// computed as `--strategy NAME` computes it, sharing `in.cache`; the fastest of them and
/// `own` wins. Records the baselines' figures in the winner's `versus`.
Result<CompiledPlan> against_baselines(const CompileInputs& in, Result<CompiledPlan> own,
                                       PassClock& clock);

}  // namespace pulse::detail
