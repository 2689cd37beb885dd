// The plan: the document a training runtime consumes, as one struct. The planner fills it
// (compile/plan_builder), the codec writes and reads it (plan_codec.hpp: the same key list
// both ways, schema/plan.schema.json in step with it), and the tools (validate, diff,
// replay, export, trace) take it. Sections mirror the JSON's top-level keys, in order.
//
// A key a reader may find absent in a plan written by hand is std::optional here, and the
// writer leaves it out again when it is empty: the struct says what the plan states, no more.
// Every stage, device, op and skip index in a Plan that came through the reader is in range
// (stages 0 .. num_stages-1 in order, devices 0 .. pp-1, microbatches 0 .. num_microbatches-1);
// nothing else is guaranteed (whether the plan is right is validate's job).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pulse/cost/memory.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/frozen.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse {

/// The schema tag of plans this version writes. v2 (this version) separates the options as
/// given (`options`) from what the planner chose (`chosen`); the reader also takes v1, whose
/// `options` is what was planned (docs/plans.md, "Versions").
inline constexpr const char* kPlanSchema = "pulse.plan/v2";
/// The first version, still read.
inline constexpr const char* kPlanSchemaV1 = "pulse.plan/v1";

/// `generator`: the program that wrote the plan.
struct PlanGenerator {
  std::string name;
  std::string version;
};

/// `inputs.model` or `inputs.cluster`: the profile a plan was made from.
struct PlanInput {
  std::string file;  ///< File name without directories.
  std::string name;  ///< The profile's `name`.
  std::string sha256;
  std::string provenance;  ///< The profile's provenance method.
};

struct PlanInputs {
  PlanInput model;
  PlanInput cluster;
};

/// `options.memory`: the training state as given: the precision (--precision; "mixed" when not
/// given, its documented default) with its bytes per parameter, and the ZeRO stage when --zero
/// was given (v2: null when not; v1: the stage planned, 0 when absent).
struct PlanMemoryOptions {
  std::string precision = "mixed";
  double weight_bytes_per_param = 2;
  double gradient_bytes_per_param = 2;
  double optimizer_bytes_per_param = 12;
  std::optional<int> zero_stage;

  PlanMemoryOptions() = default;
  /// `memory` as given; its ZeRO stage only when `zero_given`.
  PlanMemoryOptions(const MemoryModel& memory, bool zero_given);
  /// The memory model these options plan (an absent stage is 0).
  MemoryModel model() const;
};

/// `options`: the options as given; a degree that was searched is absent (null).
struct PlanGivenOptions {
  std::optional<std::string> strategy;  ///< Any name: strategies may be added within v1.
  std::optional<std::string> family;    ///< --family, when one was asked for.
  /// --cuts or --partition-from: the layer that starts each stage after the first.
  std::optional<std::vector<std::string>> cuts;
  std::optional<int> pp;
  std::optional<int> dp;
  std::optional<int> microbatch_size;
  std::optional<int> global_batch;
  std::optional<bool> split_backward;
  /// --compute-scale and --link-scale (profile/scaling.hpp); absent for 1.
  std::optional<double> compute_scale;
  /// "range-low" or "range-high" when compute_scale is an end of the model's time range.
  std::optional<std::string> compute_scale_from;
  std::optional<double> link_scale;
  /// --activation-budget as given: bytes, or a fraction of the device's usable memory.
  std::optional<std::int64_t> activation_budget_bytes;
  std::optional<double> activation_budget_fraction;
  /// --headroom as given (a fraction of the usable memory); absent: not given.
  std::optional<double> headroom;
  /// --recompute: "none", "selective", "full" (profile/recompute.hpp) or, in v2, "auto";
  /// absent: none. (v1 wrote the mode chosen under auto here.)
  std::optional<std::string> recompute;
  PlanMemoryOptions memory;  ///< `options.memory`; defaults where absent.
};

/// `chosen` (v2): what the planner chose where the options left it a choice, and what it
/// kept to: a runtime executes these (a v1 plan's `options` stand for them).
struct PlanChosen {
  /// The precision (as given: the planner does not change it), its bytes per parameter and the
  /// ZeRO stage planned (the one --zero gave, or the one the planner chose).
  MemoryModel memory;
  /// The recomputation mode planned ("none", "selective", "full"; under --recompute auto the
  /// one kept); its layers are each stage's `recomputed`.
  std::string recompute = "none";
  /// Layers that mode recomputes over all stages.
  int recomputed_layers = 0;
  /// The cap on each device's activations the schedule kept to (solver.activation_budget_bytes),
  /// null when none.
  std::optional<std::int64_t> activation_budget_bytes;
  /// The share of each device's usable memory the plan was made to fit in (--headroom, or its
  /// default); every predicted peak is within it. Absent (plans written by hand): 1.
  std::optional<double> headroom;
};

/// One configuration's degrees: global_batch = dp x microbatch_size x num_microbatches. The
/// planner's configurations (compile/compile.hpp) and the plan's `parallelism` are these.
struct Degrees {
  int pp = 1;
  int dp = 1;
  int microbatch_size = 1;
  int num_microbatches = 1;
  int global_batch = 1;
};

/// `parallelism`: the degrees, and what they come to.
/// `parallelism.sequence`: the sequence-parallel layout inside each pipeline device
/// (cost/sequence_parallel.hpp): Ulysses degree x ring degree ranks share every sample.
struct PlanSequence {
  int ulysses = 1;
  int ring = 1;
  int degree = 1;
};

struct PlanParallelism : Degrees {
  int num_stages = 1;
  std::optional<int> devices_used;
  std::optional<int> devices_total;
  std::optional<std::string> device_type;
  /// Stage times interpolated between (or scaled beyond) the profiled microbatch sizes.
  std::optional<bool> times_interpolated;
  /// Absent: no sequence parallelism (each pipeline device is one rank).
  std::optional<PlanSequence> sequence;
};

// The planner's findings below (FamilyOutcome, BaselineAnswer, Candidate, ScheduleSearch,
// PlanPlacement, AlternativeAnswer and its views) are declared once, here: the compiler fills
// them and the codec writes and reads the same structs. A figure is std::optional where a plan
// states it only for what was feasible; `reason` is absent for the chosen one.

/// `partition.families[]`: how one family did at the plan's configuration.
struct FamilyOutcome {
  std::string family;
  bool feasible = false;
  bool chosen = false;
  bool synthesized = false;  ///< Got the full schedule synthesis (else: screened only).
  std::optional<bool> all_skips_local;
  std::optional<double> iteration_s;
  std::optional<double> samples_per_s;
  std::optional<std::int64_t> p2p_bytes_per_iteration;
  std::optional<std::string> reason;  ///< Why it lost or was not scheduled.
};

/// `partition.versus.baselines[]`: a baseline strategy's own answer for the same options.
struct BaselineAnswer {
  std::string strategy;
  bool feasible = false;
  std::optional<double> samples_per_s;
  std::optional<std::int64_t> p2p_bytes_per_iteration;
  std::optional<std::string> configuration;  ///< "pp 4 x dp 2, microbatch 1".
};

/// `partition.versus`: by how much the chosen family beats the full-locality V (same
/// configuration) and the best baseline (its own answer for the same options).
struct PlanVersus {
  std::optional<double> speedup_over_v;
  std::optional<std::string> best_baseline;
  std::optional<double> speedup_over_best_baseline;
  std::vector<BaselineAnswer> baselines;
};

/// `partition`: how the cut was found.
struct PlanPartition {
  std::string method;
  double objective_s = 0;
  double lower_bound_s = 0;
  bool exact = false;
  bool all_skips_local = false;
  std::optional<bool> skips_nested;
  std::optional<int> states_explored;
  /// The family of the plan (strategy.hpp): "v", "w2", "chain", "1f1b", ...
  std::optional<std::string> family;
  std::optional<int> waves;  ///< 0: a chain; k: 2kP stages in k waves.
  /// stages_digest of the stages as planned: a plan whose stages were edited afterwards (a
  /// layer moved to another stage, a time changed) no longer matches it, and simulate will
  /// not replay the times it states as if they were its stages'.
  std::optional<std::string> stages_sha256;
  std::vector<FamilyOutcome> families;
  std::optional<PlanVersus> versus;
};

struct PlanStage {
  StageId id = 0;
  DeviceId device = 0;
  std::optional<std::string> side;  ///< "encoder", "decoder" or "chain".
  std::vector<std::string> layers;  ///< Layer names in execution order.
  std::optional<double> forward_s;
  std::optional<double> backward_s;
  std::optional<double> backward_weight_s;  ///< The W share of backward_s.
  std::optional<std::int64_t> params;
  std::optional<std::int64_t> activation_bytes_per_microbatch;
  /// With recomputation: how many of its layers re-run their forward in backward, and the
  /// most one of them rebuilds (StageCost::recompute_workspace_bytes); absent: none.
  std::optional<int> recomputed_layers;
  /// With recomputation: those layers by name, in model order (what a runtime checkpoints).
  std::optional<std::vector<std::string>> recomputed;
  std::optional<std::int64_t> recompute_workspace_bytes_per_microbatch;
  /// Under ZeRO-3: the parameters of its largest layer (what is gathered at once).
  std::optional<std::int64_t> largest_layer_params;

  /// Both forward_s and backward_s are stated.
  bool has_times() const { return forward_s && backward_s; }
};

struct PlanDevice {
  DeviceId device = 0;
  std::vector<StageId> stages;
  std::optional<double> load_s;
  std::optional<std::int64_t> params;
  /// Microbatches in flight that fit whatever the order (cost/memory.hpp).
  std::optional<int> inflight_limit;
  std::vector<std::string> cached_skips;
};

struct PlanSkip {
  std::optional<std::string> name;  ///< Default: "producer->consumer" (label()).
  std::string producer;
  std::string consumer;
  std::int64_t bytes_per_sample = 0;
  StageId producer_stage = 0;
  StageId consumer_stage = 0;
  std::optional<DeviceId> producer_device;  ///< As claimed.
  std::optional<DeviceId> consumer_device;  ///< As claimed.
  bool local = false;
  std::optional<std::string> route;  ///< "local", "direct" or "forwarded".

  /// The skip's name, or "producer->consumer" when the plan gives none.
  std::string label() const { return name.value_or(producer + "->" + consumer); }
};

struct PlanCarried {
  std::string name;
  std::optional<std::string> producer;  ///< Absent (null): comes with the input batch.
  std::int64_t bytes_per_sample = 0;
  bool needs_gradient = false;
};

struct PlanTransfer {
  StageId from_stage = 0;
  StageId to_stage = 0;
  std::optional<DeviceId> from_device;  ///< As claimed.
  std::optional<DeviceId> to_device;    ///< As claimed.
  std::optional<std::string> kind;      ///< "main" or "skip".
  Bytes forward;                        ///< Per microbatch.
  Bytes backward;                       ///< Per microbatch.
  std::optional<int> forward_messages;
  std::optional<int> backward_messages;
  std::optional<double> forward_s;
  std::optional<double> backward_s;
  std::optional<std::string> forward_link;  ///< Link class name.
  std::optional<std::string> backward_link;
  std::vector<std::string> skips;  ///< Names of the skips whose bytes ride on it.
  /// Main transfers of a model with carried tensors: the ones it moves forward, by name (its
  /// backward moves those of them that need a gradient). Absent otherwise.
  std::optional<std::vector<std::string>> carried;

  bool has_times() const { return forward_s && backward_s; }
};

/// One operation of a device's schedule with its predicted times.
struct PlanOp {
  Op op;
  double start_s = 0;
  double end_s = 0;
};

/// `schedule_info`.
struct PlanScheduleInfo {
  std::optional<std::string> policy;
  /// As stated; Plan::split_backward() falls back on the ops when absent.
  std::optional<bool> split_backward;
  std::optional<double> makespan_s;
};

/// `solver.limits`.
struct PlanSolverLimits {
  int max_nodes = 0;
  double max_seconds = 0;
};

/// `solver.memory_curve[]`: with `activation_budget_bytes` per device, the synthesizer's
/// makespan (what memory buys).
struct MemoryCurvePoint {
  std::int64_t activation_budget_bytes = 0;
  double makespan_s = 0;
};

/// How a schedule was found: what the synthesizer answers (ScheduleAnswer,
/// schedule/synthesize.hpp) and the plan's `solver` section states.
struct ScheduleSearch {
  /// "list", "list-search", "zb-v", "v-half", "v-min", "v-auto", "dualpipev",
  /// "order-search" or "exact-ilp".
  std::string method;
  std::string stopped_by;  ///< What ended the last integer program: "optimal", "node limit", ...
  double makespan_s = 0;
  double lower_bound_s = 0;
  double gap = 0;  ///< makespan / lower bound - 1.
  double heuristic_makespan_s = 0;
  int list_evaluations = 0;   ///< List schedules the policy search tried.
  int order_evaluations = 0;  ///< Replays the order search made.
  int milp_solves = 0;
  int milp_nodes = 0;
  /// The largest residency of any device under the memory rule (cost/memory.hpp), beyond
  /// its static state: the peak activation memory, the second objective.
  std::int64_t peak_activation_bytes = 0;
  /// At budgets below peak_activation_bytes (3/4, 1/2 and 1/3 of it), the makespans reached
  /// (synthesized schedules only; a budget where not one microbatch fits is left out).
  std::vector<MemoryCurvePoint> memory_curve;
};

/// `solver`: how the schedule was found. `status` is one of the SolveStatus names
/// (base/solve_status.hpp), `stopped_by` what ended the last search step.
struct PlanSolver : ScheduleSearch {
  std::string status;
  PlanSolverLimits limits;
  /// The cap on each device's activations the schedule kept to (from --activation-budget),
  /// if any.
  std::optional<std::int64_t> activation_budget_bytes;
};

/// `cost_model.derived_times[]`: the model profile had no times for this device type; they
/// were derived from another's (profile/derive.hpp), by the rule stated.
struct PlanDerivedTimes {
  std::string device_type;
  std::string from_device_type;
  std::string rule;
  /// The device spec the times were derived with (where it was read, and its source);
  /// absent in plans from before device specs were data.
  std::optional<std::string> device_spec;
  /// The spec of from_device_type, likewise; absent also when the two are one device.
  std::optional<std::string> from_device_spec;
};

/// `cost_model`: the cluster settings the predicted figures assume.
struct PlanCostModel {
  bool overlap_comm = false;
  std::string allreduce;  ///< "ring" or "hierarchical".
  std::optional<double> time_quantum_s;
  /// The profile's compute times were multiplied by this, and every link made this many
  /// times as fast (profile/scaling.hpp); absent: 1. Replay and validate apply them.
  std::optional<double> compute_scale;
  std::optional<double> link_scale;
  /// Absent when the model profile had times for the cluster's device type.
  std::optional<std::vector<PlanDerivedTimes>> derived_times;

  double compute_factor() const { return compute_scale.value_or(1.0); }
  double link_factor() const { return link_scale.value_or(1.0); }
};

/// `comm`: point-to-point and all-reduce traffic.
struct PlanComm {
  std::int64_t p2p_bytes_per_iteration = 0;
  std::int64_t skip_bytes_per_iteration = 0;
  std::optional<std::int64_t> activation_bytes_per_iteration;
  std::optional<std::int64_t> carried_bytes_per_iteration;
  std::optional<Bytes> p2p_bytes_per_microbatch_per_pipeline;
  /// Link class name -> bytes of one iteration (both directions, every replica).
  std::optional<std::map<std::string, std::int64_t>> p2p_bytes_per_link_class;
  std::optional<std::int64_t> allreduce_bytes_per_iteration;
};

/// `predicted.devices[]`: one pipeline device's predicted figures.
struct PlanDevicePrediction {
  DeviceId device = 0;
  std::optional<double> compute_s;
  std::optional<double> send_s;
  std::optional<double> idle_s;
  std::optional<double> allreduce_s;
  std::optional<int> max_inflight;
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<std::int64_t> capacity_bytes;
  std::optional<MemoryBreakdown> memory;  ///< At the peak.
};

/// `predicted`.
struct PlanPredicted {
  double iteration_s = 0;
  double samples_per_s = 0;
  double bubble_ratio = 0;
  std::optional<double> pipeline_makespan_s;
  std::optional<double> allreduce_exposed_s;
  std::vector<std::int64_t> peak_memory_bytes;  ///< Per pipeline device.
  std::optional<std::vector<PlanDevicePrediction>> devices;
};

struct PlanRank {
  RankId rank = 0;
  int node = 0;
  int local_device = 0;
  int dp_index = 0;
  DeviceId pipeline_device = 0;
};

/// `rank_map.placement`: how the ranks were chosen (place/placement.hpp's Placement adds the
/// ranks themselves).
struct PlanPlacement {
  bool topology_aware = false;  ///< False when the default rank order was kept (see why).
  std::string note;             ///< What was done, or why not.
  /// Per boundary between pipeline devices (of replica 0), its link class.
  std::vector<std::string> boundary_links;
};

struct PlanRankMap {
  std::optional<int> world_size;
  std::vector<PlanRank> ranks;
  std::vector<std::vector<RankId>> pipeline_groups;       ///< [dp_index][pipeline device].
  std::vector<std::vector<RankId>> data_parallel_groups;  ///< [pipeline device][dp_index].
  std::vector<RankId> unused_ranks;
  std::optional<PlanPlacement> placement;
  /// With parallelism.sequence: [dp_index * pp + pipeline device]: the ranks that share that
  /// device's samples, Ulysses groups contiguous, ring peers `ulysses` apart. Absent without.
  std::optional<std::vector<std::vector<RankId>>> sequence_groups;
};

/// `search[]`: one configuration the tuner tried.
struct Candidate {
  int pp = 0;
  int dp = 0;
  int microbatch_size = 0;
  int num_microbatches = 0;
  bool feasible = false;
  bool chosen = false;
  bool synthesized = false;  ///< Got the full schedule synthesis (else: screened only).
  std::optional<double> iteration_s;
  std::optional<double> samples_per_s;
  /// A model with frozen encoders, not cached: the step with them placed as --frozen asks
  /// (docs/frozen.md); the search ranks candidates by it.
  std::optional<double> step_s;
  std::optional<std::int64_t> peak_memory_bytes;  ///< Largest device peak.
  std::optional<std::string> reason;              ///< Why it lost.
  std::optional<std::string> family;              ///< The family its plan used.
  /// A configuration of sharded data parallelism (pipeline_or_not) in the search of a plan
  /// that adopted one: its ZeRO stage. Absent: the options' stage.
  std::optional<int> zero_stage;
};

/// `pipeline_or_not.sharded[]`: sharded data parallelism alone (pp 1 over every device) at
/// one ZeRO stage, as the same passes plan it.
struct ShardedAnswer {
  int zero_stage = 0;
  int dp = 1;
  bool feasible = false;
  std::optional<int> microbatch_size;
  std::optional<double> iteration_s;
  std::optional<double> samples_per_s;
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<std::string> reason;  ///< Why not, when infeasible.
  /// A model with frozen encoders (`frozen`), not cached: pp 1 has no bubbles, so every device
  /// encodes its samples before the step; that time and the step with it (its alternative's
  /// `step_s`). `frozen_reason` is no longer written: a row whose encoders fit nowhere is
  /// infeasible, its `reason` says why.
  std::optional<double> frozen_s;
  std::optional<double> step_s;
  std::optional<std::string> frozen_reason;
};
/// `pipeline_or_not`: the plan against sharded data parallelism without a pipeline.
struct PipelineOrNot {
  std::string verdict;  ///< "pipeline" or "sharded data parallel".
  std::string note;     ///< In numbers: which won, by how much, against what.
  std::vector<ShardedAnswer> sharded;
  /// When sequence layouts were planned: the plan's layout in words ("data parallel over 2
  /// (ZeRO-3) x Ulysses 4") and, in numbers, against the best plan without one.
  std::optional<std::string> layout;
  std::optional<std::string> layout_note;
};

/// `recompute_search.modes[]`: the plan under one recomputation mode (--recompute auto).
struct RecomputeAnswer {
  std::string mode;  ///< "none", "selective" or "full".
  int layers = 0;    ///< Layers the mode recomputes in this model.
  bool feasible = false;
  std::optional<int> pp;
  std::optional<int> microbatch_size;
  std::optional<double> iteration_s;
  std::optional<double> samples_per_s;
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<std::string> reason;  ///< Why not planned, or why it does not fit.
};
/// `recompute_search` (--recompute auto): every mode planned, the fastest kept.
struct RecomputeSearch {
  std::string chosen;  ///< The mode the plan uses (also options.recompute).
  std::string note;    ///< In numbers: the chosen mode against the runner-up.
  std::vector<RecomputeAnswer> modes;
};

/// `alternatives[]`: one alternative of level 0 as planned (compile/alternatives.hpp), the
/// record the plan's verdicts are views of (`partition.versus.baselines`,
/// `pipeline_or_not.sharded`, `recompute_search.modes`). Its axis: "own" (the strategy's
/// own search), "strategy" (a baseline strategy's own answer for the same options),
/// "sharding" (pp 1 over every device at a ZeRO stage), "recompute" (a recomputation mode
/// under --recompute auto: its figures are those of the plan its level kept). Every axis
/// value it planned is stated, so what the plan chose reads off the row marked `chosen`.
struct AlternativeAnswer {
  std::string axis;
  std::string label;     ///< "pulse", "v-naive", "ZeRO-2", "selective", ...
  std::string strategy;  ///< The strategy it planned.
  std::string recompute;
  int zero_stage = 0;
  std::string precision;
  bool adoptable = false;  ///< Whether its plan could have been the plan, had it been fastest.
  bool feasible = false;
  bool chosen = false;
  std::optional<int> pp;
  std::optional<int> dp;
  std::optional<int> microbatch_size;
  std::optional<std::string> family;  ///< The family its plan used.
  std::optional<double> iteration_s;
  std::optional<double> samples_per_s;
  /// A model with frozen encoders, not cached: the step with them placed as --frozen asks;
  /// rows are compared by it.
  std::optional<double> step_s;
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<std::int64_t> p2p_bytes_per_iteration;
  std::optional<std::string> configuration;  ///< "pp 4 x dp 2, microbatch 1".
  /// "recompute" rows: the layers the mode recomputes in this model.
  std::optional<int> recomputed_layers;
  /// The sequence-parallel layout it planned ("none", "Ulysses 4", "ring 2", "Ulysses 8 x
  /// ring 2"), when the job planned sequence layouts.
  std::optional<std::string> sequence;
  std::optional<std::string> reason;  ///< Why it has no figures, or was not planned.
};

/// `certificate.partition`: the partition against what no partition of its family on as many
/// devices can beat (per microbatch, compute only): the heaviest layer, the average device
/// load, and under the V the first and last layer together (device 0 runs both).
struct PartitionCertificate {
  double largest_layer_s = 0;        ///< The heaviest layer's forward + backward.
  double average_device_load_s = 0;  ///< Every layer's forward + backward over pp devices.
  double bound_s = 0;                ///< partition.lower_bound_s: the largest of the above.
  double gap = 0;                    ///< partition.objective_s / bound_s.
};

/// `certificate.published[]`: a published schedule (schedule/published.hpp) on the plan's
/// own stages and devices, replayed by the same simulator, and its gap to the bound.
struct PublishedGap {
  std::string schedule;   ///< The registry's name: "1f1b", "zbv-torch", "dualpipev", ...
  bool feasible = false;  ///< Generated, and within every device's memory.
  std::optional<double> iteration_s;
  std::optional<double> gap;          ///< iteration_s / certificate.bound_s.
  std::optional<std::string> reason;  ///< Why it has no figures.
};

/// `certificate`: lower bounds on the iteration time that hold for every schedule of the
/// plan's stages on its devices (plan/certificate.hpp says how each is derived), the one that
/// binds, and the plan's gap to it.
struct PlanCertificate {
  double bound_s = 0;   ///< The largest term.
  std::string binding;  ///< Its name: "device_work", "critical_path", "fill_drain", ...
  double gap = 0;       ///< predicted.iteration_s / bound_s (1: the plan is optimal).
  double device_work_s = 0;
  double critical_path_s = 0;
  double fill_drain_s = 0;
  double allreduce_s = 0;
  std::optional<double> memory_s;  ///< The synthesizer's bound under each device's memory.
  std::optional<PartitionCertificate> partition;
  std::vector<PublishedGap> published;
};

/// `frozen.placements[]`: one placement as weighed.
struct PlanFrozenPlacement {
  std::string placement;  ///< "cached", "before_step" or "bubbles".
  bool feasible = false;
  std::optional<double> before_step_s;
  std::optional<double> step_s;
  std::optional<std::string> reason;  ///< Why refused, or why not planned.
};

/// `frozen` (docs/frozen.md): where the model profile's frozen encoders run in the step and
/// what they cost. Absent when the model has none.
struct PlanFrozen {
  std::string placement;  ///< The one chosen: "cached", "before_step" or "bubbles".
  std::string option;     ///< --frozen as given: "auto" or a placement.
  std::vector<std::string> components;
  int samples = 0;           ///< Per pipeline and iteration, each encoded once.
  double before_step_s = 0;  ///< Added to the step: the longest device's frozen phase.
  double bubble_s = 0;       ///< Frozen seconds hidden in idle gaps (all devices).
  double step_s = 0;         ///< predicted.iteration_s + before_step_s.
  double samples_per_s = 0;  ///< global batch / step_s.
  std::int64_t cached_bytes_per_sample = 0;    ///< What a cache stores per sample.
  std::vector<std::int64_t> weight_bytes;      ///< Per pipeline device, resident.
  std::vector<std::int64_t> activation_bytes;  ///< Per pipeline device, the largest piece.
  std::string note;
  std::vector<PlanFrozenPlacement> placements;
  std::vector<FrozenOp> ops;  ///< `frozen.ops[]` (simulate/frozen.hpp).
};

/// One bucket's plan (the plan's `buckets.rows[]`, docs/buckets.md): the partition and
/// placement are the plan's; the microbatching, schedule and figures are the bucket's own.
struct BucketRow {
  std::string name;
  int frames = 0;  ///< 0: an image (or a bucket given in tokens).
  int height = 0;  ///< 0: given in tokens.
  int width = 0;
  std::int64_t tokens = 0;
  double share = 0;  ///< Of samples or of steps (`buckets.share_of`), summing to 1.
  int microbatch_size = 1;
  int num_microbatches = 0;
  std::string family;  ///< The schedule family, as `partition.family` names it.
  double iteration_s = 0;
  double samples_per_s = 0;
  double bubble_ratio = 0;
  std::int64_t peak_memory_bytes = 0;  ///< The fullest device, under the memory rule.
  /// The plan made for the largest bucket applied to this one: its partition, placement and
  /// microbatch size, the schedule synthesized on this bucket's costs.
  double largest_plan_iteration_s = 0;
};

/// A partition the bucket search weighed (`buckets.candidates[]`).
struct BucketCandidate {
  std::string from;  ///< "largest" or "average": the bucket the partition was made for.
  bool feasible = false;
  bool chosen = false;
  double weighted_samples_per_s = 0;
  std::string reason;  ///< Why not feasible; "" when it is.
};

/// `plan --buckets` (docs/buckets.md): one partition for every bucket, each bucket its own
/// microbatching and schedule. The plan's stages, schedule and figures are the largest
/// bucket's (`body`), so a runtime that reads no buckets runs the shape that needs the most
/// memory.
struct PlanBuckets {
  std::string file;
  std::string sha256;
  std::string name;
  std::string source;
  std::string share_of;             ///< "samples" or "steps" (one global batch: the same weights).
  std::int64_t profile_tokens = 0;  ///< The tokens of the shape the model profile was made at.
  int body = 0;                     ///< The row the rest of the plan describes.
  std::string partition_from;       ///< The chosen candidate's `from`.
  /// One iteration per bucket, weighted by share: sum share x iteration_s, and the global
  /// batch over it (samples per second over the mix).
  double weighted_iteration_s = 0;
  double weighted_samples_per_s = 0;
  /// The same for the largest bucket's plan applied to every bucket (rows' largest_plan_*).
  double largest_plan_samples_per_s = 0;
  std::int64_t capacity_bytes = 0;  ///< Usable memory per device as planned (headroom applied).
  std::vector<BucketCandidate> candidates;
  std::vector<BucketRow> rows;
};

struct Plan {
  std::string file;  ///< Where it was read from, for messages (not a JSON key).
  std::string schema = kPlanSchema;
  PlanGenerator generator;
  PlanInputs inputs;
  PlanGivenOptions options;
  std::optional<PlanChosen> chosen;  ///< v2; absent in v1 plans and plans written by hand.
  PlanParallelism parallelism;
  PlanPartition partition;
  std::vector<PlanStage> stages;
  std::vector<PlanDevice> devices;
  std::vector<PlanSkip> skips;
  std::vector<PlanCarried> carried;
  std::vector<PlanTransfer> transfers;
  std::vector<std::vector<PlanOp>> schedule;  ///< [pipeline device]: ops in execution order.
  PlanScheduleInfo schedule_info;
  std::optional<PlanSolver> solver;
  std::optional<PlanCostModel> cost_model;
  PlanComm comm;
  PlanPredicted predicted;
  PlanRankMap rank_map;
  std::vector<Candidate> search;
  std::optional<PipelineOrNot> pipeline_or_not;
  std::optional<RecomputeSearch> recompute_search;
  std::optional<std::vector<AlternativeAnswer>> alternatives;
  std::optional<PlanCertificate> certificate;
  std::optional<PlanFrozen> frozen;
  std::optional<PlanBuckets> buckets;  ///< `plan --buckets` only.
  /// What the plan should make its user look again at (bubble above 50%, a device above 95%
  /// of its usable memory, one microbatch in flight per device); empty: nothing.
  std::vector<std::string> warnings;

  int pp() const { return parallelism.pp; }
  int num_stages() const { return static_cast<int>(stages.size()); }
  /// The strategy named in the options, or "".
  std::string strategy() const { return options.strategy.value_or(""); }
  /// The memory model planned: `chosen.memory`, else (v1) `options.memory`.
  MemoryModel memory() const;
  /// The recomputation mode planned: `chosen.recompute`, else (v1) `options.recompute`.
  std::string recompute() const;
  /// The share of the usable memory the plan fits in: `chosen.headroom`, else 1.
  double headroom() const { return chosen && chosen->headroom ? *chosen->headroom : 1.0; }
  /// What the plan is: "pipeline" (pp > 1), "sharded data parallel" (pp 1 at ZeRO-2 or 3) or
  /// "data parallel" (pipeline_or_not.verdict's words).
  std::string verdict() const;
  /// How it trains: "ZeRO-2", then ", recompute selective" and ", precision bf16" where they
  /// are not the defaults (none, mixed).
  std::string mode() const;
  /// The layout and the mode, as every view names a plan: "data parallel x 8, ZeRO-3, no
  /// pipeline" at pp 1 (no stages: one device runs the whole model), else "pp 4 x dp 2, 8
  /// stages (v), ZeRO-0" (the family where pulse chose one); with sequence parallelism its
  /// layout after dp ("data parallel x 4 x ring 2, ZeRO-3, no pipeline").
  std::string layout() const;
  /// Backward split into I and W: as schedule_info states, else whether any op is I or W.
  bool split_backward() const;
  /// The V (2P stages, stage d and 2P-1-d on device d) as opposed to a chain or waves.
  bool is_v() const;
  /// "V", "chain", "W2", ..., from the stage -> device map (wave_layout's placements).
  std::string shape() const;
  /// Stage of every layer name, in the plan's order: (layer, stage) pairs.
  std::vector<std::pair<std::string, StageId>> layer_stages() const;
  /// Total number of schedule operations.
  std::size_t num_ops() const;
};

/// SHA-256 of what the stages state: each stage's device, layer names and forward, backward
/// and weight-gradient times (to the nanosecond). `partition.stages_sha256` holds it as
/// planned.
std::string stages_digest(const std::vector<PlanStage>& stages);

}  // namespace pulse
