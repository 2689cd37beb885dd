// What the driver's sources share (compile.cpp, passes.cpp, tuner.cpp, alternatives.cpp,
// verdicts.cpp, request_limits.cpp, plan_job.cpp). Private to src/compile.
#pragma once

#include <compare>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "pulse/compile/compile.hpp"
#include "pulse/graph/layer_graph.hpp"
#include "pulse/partition/partition.hpp"
#include "pulse/schedule/schedule_memo.hpp"

namespace pulse::detail {

/// One fully specified configuration.
using Config = Degrees;

/// How hard the schedule pass tries: `screen` is the cheap evaluation the tuner ranks
/// candidates by; `full` is the plan's own synthesis (the options' solver limits).
enum class Effort { screen, full };

/// How far the pass list has taken one (configuration, family): `placed` up to the pipeline
/// model (enough for its lower bound), `screened` through the cheap schedule, `synthesized`
/// through the full one. A family with a fixed schedule has one schedule: its full synthesis
/// is its screen.
enum class Reached { placed, screened, synthesized };

/// What the passes' answers depend on, beyond the configuration and the family, among the
/// options the alternatives of level 0 vary (alternatives.hpp): the model planned (its
/// recomputation mode), the memory model (precision, ZeRO stage), whether the exact integer
/// program may run (pp and the microbatch size both given: passes.cpp) and a given cut. The
/// options every alternative of one job shares (the split, the activation budget, the
/// solver's limits, the scales) are not in it; an axis that varies one of them adds it here.
struct Variant {
  std::string recompute;
  SequenceLayout sequence;
  MemoryModel memory;
  bool exact = false;
  std::vector<std::string> cuts;

  auto operator<=>(const Variant&) const = default;
};

/// The variant `options` plan.
Variant variant_of(const PlanOptions& options);

/// A (configuration, family) of a variant at the stage it reached: what the cache keeps
/// answers by.
struct CacheKey {
  Variant variant;
  int pp = 0;
  int dp = 0;
  int microbatch_size = 0;
  std::string family;
  Reached reached = Reached::placed;

  auto operator<=>(const CacheKey&) const = default;
};

/// What one compile job computes once and looks up after, for every alternative of level 0
/// alike: the layer graphs of each recomputation mode at each microbatch size, placements
/// (which depend on the cluster alone: every mode shares them), every (variant,
/// configuration, family) at each stage it reached, and the schedule synthesizer's memo.
/// Pulse compares itself with the baselines by the baselines' own computations, which share
/// most of their work with its own search.
struct CompileCache {
  /// By (recomputation mode, sequence layout, microbatch size).
  using GraphKey = std::tuple<std::string, SequenceLayout, int>;
  std::map<GraphKey, LayerGraph> graphs;
  std::map<GraphKey, LayerGraph> blind_graphs;  ///< The same without skips.
  std::map<std::vector<std::int64_t>, Placement> placements;
  std::map<CacheKey, Result<CompiledPlan>> plans;
  /// Full syntheses that would repeat their screen (full_repeats_screen): the screened
  /// plan's entry in `plans`, which answers for both (not a copy: at pp 512 over 2048
  /// layers a plan's schedule alone is 50 MB).
  std::map<CacheKey, const Result<CompiledPlan>*> repeats;
  /// Partition answers by partitioner and request (passes.cpp, PartitionKey): families that
  /// differ in their schedule alone (v and v-released on a model without skips, chain and
  /// 1f1b-direct) ask for the same partitions.
  std::map<std::vector<std::int64_t>, PartitionAnswer> partitions;
  ScheduleMemo memo;          ///< Every synthesis request of the job carries it.
  int safety_limit_hits = 0;  ///< Syntheses the CPU-time safety limit stopped.

  /// Releases the ops of cached `plan`'s timeline (CompiledPlan::timeline_ops_released):
  /// a tune screens a dozen plans and keeps one, and at pp 512 over 2048 layers a timeline
  /// is 170 MB. restore_timeline gives them back.
  void release_timeline_ops(const CompiledPlan* plan);
};

/// Releases the ops of `plan`'s timeline but each device's last (CompiledPlan::
/// timeline_ops_released), its figures kept; restore_timeline gives them back.
void release_timeline_ops(CompiledPlan& plan);

/// A plan's timeline replayed from its schedule, where its ops were released: the same
/// timeline to the bit (every plan's timeline is this replay). An internal error if it does
/// not end where the plan's figures say.
Status restore_timeline(CompiledPlan& plan);

/// The inputs every pass of one compile_plan call reads.
struct CompileInputs {
  const ModelProfile* model = nullptr;
  const ClusterProfile* cluster = nullptr;
  const PlanOptions* options = nullptr;
  int device_type = 0;  ///< Index into the model's device_types for the cluster's devices.
  CompileCache* cache = nullptr;
};

struct JobInputs;
/// "frozen": the model profile's frozen encoders placed on the plan kept (frozen_pass.cpp,
/// simulate/frozen.hpp); infeasible when no placement the options allow fits.
Status frozen_pass(const JobInputs& job, CompiledPlan& plan, PassClock& clock);
/// Whether frozen encoders run in the step: the model lists some and the options do not
/// take their outputs as cached offline. Only then is a step weighed beside the iteration
/// (frozen_step_pass, frozen_step_bound, frozen_headroom).
bool frozen_in_step(const ModelProfile& model, const PlanOptions& options);
/// The step of `plan` (CompiledPlan::step_s) with the frozen encoders placed as
/// `in.options->frozen` asks on its timeline, memory left out (the frozen pass holds the plan
/// kept to the memory rule); nothing without frozen components or when cached.
void frozen_step_pass(const CompileInputs& in, CompiledPlan& plan);
/// No schedule of the placed plan `placed` has a shorter step than this, by the frozen work
/// frozen_step_pass weighs (0 without any): its devices run the pipeline's compute and every
/// sample's frozen forwards (frozen_work_lower_bound) within pp steps, whether in the
/// iteration's gaps or before it. `allreduce_s`: each device's all-reduce (allreduce_times).
double frozen_step_bound(const CompileInputs& in, const CompiledPlan& placed,
                         const std::vector<double>& allreduce_s);
/// What the search and the alternatives compare plans by: the step's seconds (the iteration
/// when no frozen work is weighed) and the global batch over them.
double step_time_s(const CompiledPlan& plan);
double step_samples_per_s(const CompiledPlan& plan);
/// The headroom the denoiser is planned in: the options' when the model has no frozen
/// components or they are cached, else that less the share of the usable memory their
/// weights and the largest one-sample working set take (infeasible when nothing is left).
Result<std::optional<double>> frozen_headroom(const ModelProfile& model,
                                              const ClusterProfile& cluster,
                                              const PlanOptions& options);

/// compile_plan after check_plan_options (run_plan_job checks before it loads): the levels
/// of compile.cpp.
Result<CompiledPlan> compile_checked(const ModelProfile& model, const ClusterProfile& cluster,
                                     const PlanOptions& options, PassClock& clock);

/// The pass list of one configuration and one family up to the pipeline model (partition,
/// placement, re-placement): enough for its lower bound on time. The answer lives in
/// `in.cache`, so the reference stays valid for the compile.
const Result<CompiledPlan>& placed_family(const CompileInputs& in, const Config& config,
                                          const Family& family, PassClock& clock);

/// The whole pass list for one configuration and one family, the schedule at `effort`.
/// Cached like placed_family.
const Result<CompiledPlan>& compile_family(const CompileInputs& in, const Config& config,
                                           const Family& family, Effort effort, PassClock& clock);

/// The profiles the passes plan on: the loaded ones, or copies scaled by `options.scales`.
struct PlannedInputs {
  const ModelProfile* model = nullptr;
  const ClusterProfile* cluster = nullptr;
  std::optional<ModelProfile> scaled_model;
  std::optional<ClusterProfile> scaled_cluster;
  /// How the cluster's device type's times were derived, when the model had none.
  std::optional<DerivedTimes> derived_times;
};

/// Derives the cluster's device type's times into a copy of the model when the model lists
/// no times for it (profile/derive.hpp; an input error when it cannot), then reads a range
/// word of --compute-scale from the model (an input error names the option, the
/// file and the line), holds the factor to its limit, and scales copies of the profiles when
/// the scales are not the identity (request_limits.cpp).
Status scale_inputs(const ModelProfile& model, const ClusterProfile& cluster, PlanOptions& options,
                    PlannedInputs& out);

/// The request against the profiles, before any pass runs (request_limits.cpp): the device
/// type, the degrees against the cluster, the slowest layer against the time quantum, and
/// the worst case of every sum against 64-bit integers. The device type's index, or the
/// error.
Result<int> check_request(const ModelProfile& model, const ClusterProfile& cluster,
                          const PlanOptions& options);

/// The ops a schedule of `stages` stages and `num_microbatches` has: F and B each, or F, I
/// and W with a split backward. A plan states at most kMaxOps (pulse/base/limits.hpp).
std::int64_t schedule_ops(const PlanOptions& options, int stages, int num_microbatches);

/// Checks a configuration against the cluster, the model and the batch; a usage error says
/// what does not add up (request_limits.cpp).
Result<Config> resolve_config(const CompileInputs& in, int pp, int dp, int microbatch_size);

/// No schedule of the placed plan `plan` has a shorter step: none has a shorter iteration
/// (every device starts no sooner than the first microbatch reaches it, then runs all its
/// work and, when sends block, its sends; its all-reduce follows, and without a split
/// backward so do the backwards of the stages before its first), and with frozen work
/// weighed, none is shorter than frozen_step_bound (tuner.cpp).
double step_lower_bound(const CompileInputs& in, const CompiledPlan& plan);

/// The search (tuner.cpp): every configuration the options leave open (one when pp and the
/// microbatch size are fixed) times every family of the strategy, screened; the best few of
/// each family synthesized in full; the fastest plan, with every candidate and why it lost.
/// Its timeline's ops may be released (CompiledPlan::timeline_ops_released): its figures are
/// whole, and restore_timeline gives the ops back.
Result<CompiledPlan> tune(const CompileInputs& in, PassClock& clock);

/// No plan tune(in) returns has a shorter step: the least, over every (configuration,
/// family) it would place (placed here, in `in.cache`, where tune finds them), of the larger
/// of step_lower_bound and the synthesizer's bound under memory (schedule_bound); infinity
/// when none places. An internal error as it is.
Result<double> tune_lower_bound(const CompileInputs& in, PassClock& clock);

/// The families the options ask to search: the strategy's, or the one --family names.
std::vector<const Family*> searched_families(const PlanOptions& options);

/// A candidate's samples/s over its step, frozen work included (its iteration's without any;
/// every candidate of one search trains the same global batch).
double step_rate(const Candidate& c);
/// Bytes the plan moves between pipeline devices per iteration, all replicas together.
std::int64_t p2p_bytes(const CompiledPlan& p);

/// How family `f` did: its plan's figures, or (null) not feasible, the reason left to fill.
FamilyOutcome outcome_of(const Family& f, const CompiledPlan* plan, bool synthesized);

/// The largest peak memory of any device of the plan, in bytes.
std::int64_t largest_peak_bytes(const CompiledPlan& p);

/// True when `a` is faster than `b` (samples per second over the step, frozen work included:
/// step_samples_per_s; ties: the smaller largest peak, then fewer bytes moved).
bool faster_plan(const CompiledPlan& a, const CompiledPlan& b);

}  // namespace pulse::detail
