// The driver: profiles in, a compiled plan out. compile_plan checks the options (the table
// of plan_options.hpp), then lets the tuner search whatever of pp, dp and the microbatch
// size they leave open; every configuration goes through the same pass list (compile.cpp):
//
//   graph -> place -> partition -> pipeline model -> re-place -> memory limits
//         -> schedule -> evaluate
//
// and the plan kept through the memory curve. The whole job, loading the profiles and
// writing the plan included, is run_plan_job (plan_job.hpp); it times load and write on the
// same PassClock, so --stats prints one line per pass. build_plan (plan_builder.hpp) turns
// the result into the Plan that is written.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pulse/base/defaults.hpp"
#include "pulse/base/result.hpp"
#include "pulse/compile/pass_clock.hpp"
#include "pulse/cost/memory.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/cost/sequence_parallel.hpp"
#include "pulse/partition/partition.hpp"
#include "pulse/place/placement.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/plan/strategy.hpp"
#include "pulse/profile/derive.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/profile/scaling.hpp"
#include "pulse/schedule/schedule_memo.hpp"
#include "pulse/schedule/synthesize.hpp"
#include "pulse/simulate/evaluate.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

/// What to plan. The command line sets these through plan_options.hpp's table, which holds
/// each option's bounds and check (check_plan_options, run once by compile_plan); the
/// defaults here are the table's.
struct PlanOptions {
  Strategy strategy = Strategy::pulse;
  /// Pulse only: plan this one family (strategy.hpp) instead of searching them all; the
  /// baselines' answers are still computed, for the plan's comparison, but do not replace it.
  std::optional<std::string> family;
  /// A given cut: the layer that starts each stage after the first, in model order (S - 1
  /// names for S stages). The partition is then this one, re-costed on the cluster, and the
  /// pipeline degree is what the families' stage counts make of S; the placement, degrees
  /// and schedule are still searched. Empty: the partition is searched.
  std::vector<std::string> cuts;
  std::optional<int> pp;  ///< Pipeline degree; searched when absent.
  std::optional<int> dp;  ///< Data-parallel degree; searched (devices / pp) when absent.
  std::optional<int> microbatch_size;  ///< Samples per microbatch; searched when absent.
  /// Default: kDefaultSamplesPerDevice per device of the cluster (used or not).
  std::optional<int> global_batch;
  MemoryModel memory;  ///< Precision and ZeRO stage (--precision, --zero).
  /// The ZeRO stage was given (--zero): the plan keeps to it or is refused. Not given: the
  /// planner may adopt sharded data parallelism at another stage (pipeline_or_not).
  bool zero_given = false;
  /// Activation recomputation (profile/recompute.hpp): "none", "selective" or "full", or
  /// "auto": each of them planned and the fastest kept (the plan states the mode chosen).
  std::string recompute = "none";
  /// Where the model profile's frozen encoders run (simulate/frozen.hpp): "auto" (the
  /// fastest of before_step and bubbles that fits), "cached", "before_step" or "bubbles".
  std::string frozen = "auto";
  /// The sequence-parallel layout each pipeline device runs (cost/sequence_parallel.hpp):
  /// a level of level 0 sets it (with memory.sequence_degree); none for the plain model.
  SequenceLayout sequence;
  /// --sequence given: plan that layout only (none included); else pulse searches the layouts.
  bool sequence_fixed = false;
  /// Backward as input-gradient (I) and weight-gradient (W) ops, zero-bubble style.
  bool split_backward = false;
  /// Cap on the bytes each device's activations (and skip caches) may hold, below what the
  /// device leaves: in bytes, or as a fraction (0, 1] of the device's usable memory. At
  /// most one is set; neither: no cap beyond the device.
  std::optional<std::int64_t> activation_budget_bytes;
  std::optional<double> activation_budget_fraction;
  /// Cap on every device's peak memory, as a fraction (0, 1] of its usable memory
  /// (--headroom): every pass plans within headroom x usable. Absent: kDefaultHeadroom.
  std::optional<double> headroom;
  double headroom_fraction() const { return headroom.value_or(kDefaultHeadroom); }
  /// Schedule synthesis limits: branch-and-bound nodes per integer program (deterministic)
  /// and a CPU-time safety limit per schedule, seconds (0: list schedules only).
  int solver_max_nodes = kDefaultSolverNodes;
  double solver_max_seconds = kDefaultSolverSeconds;
  /// Tuner: how many of the best screened candidates get the full schedule synthesis
  /// (0: all of them, an exhaustive sweep).
  int tuner_top_k = 3;
  /// What-if costs (profile/scaling.hpp): compile_plan plans on the profiles scaled by
  /// these (a range word read from the model first) and the plan records them.
  CostScales scales;
  /// Tuner progress: called after each candidate with (done, total). Optional.
  std::function<void(int, int)> progress;
};

/// Everything the passes found for the chosen configuration.
struct CompiledPlan : Degrees {
  PlanOptions options;  ///< What was planned: the options of the alternative kept.
  /// The options as the job gave them (scales resolved): the plan's `options`, where
  /// `options` above is its `chosen`.
  PlanOptions given;
  Strategy strategy = Strategy::pulse;
  int device_type = 0;                  ///< Index into the model's device_types.
  bool skips_nested = false;            ///< No two skips of the model cross (the graph pass).
  const Family* family = nullptr;       ///< How it was cut, placed and scheduled.
  std::vector<FamilyOutcome> families;  ///< Every family tried at this configuration.
  /// Pulse only: each baseline's own answer (a view of `alternatives`).
  std::vector<BaselineAnswer> baselines;
  /// ranks[r][d]: the cluster rank of pipeline device d in data-parallel replica r.
  std::vector<std::vector<RankId>> ranks;
  Placement placement;  ///< How ranks were chosen.
  PartitionResult partition;
  PipelineModel model;
  std::vector<MemoryBreakdown> static_bytes;  ///< Per device.
  std::vector<int> inflight_limit;            ///< Per device, what fits whatever the order.
  Schedule schedule;
  Timeline timeline;
  /// The ops of `timeline` were released (a cached plan the tuner has not chosen: each
  /// device's figures, its last op and the makespan stay, so its iteration too); a replay
  /// of `schedule` gives them back.
  bool timeline_ops_released = false;
  ScheduleAnswer solver;  ///< How the schedule was found (its schedule/timeline moved out).
  Evaluation evaluation;  ///< Iteration, throughput, bubble, all-reduce (the evaluate pass).
  std::vector<Candidate> candidates;  ///< Configurations tried, best first (the plan's search).
  /// Pulse on two devices or more: the plan against sharded data parallelism alone (a view
  /// of `alternatives`).
  std::optional<PipelineOrNot> pipeline_or_not;
  /// --recompute auto: every mode's answer (a view of `alternatives`).
  std::optional<RecomputeSearch> recompute_search;
  /// Level 0's table (src/compile/alternatives.hpp): every alternative the plan was weighed
  /// against, as planned, the chosen one marked; the three members above are its views.
  std::vector<AlternativeAnswer> alternatives;
  /// The plan's certificate (plan/certificate.hpp), on the plan kept only.
  std::optional<PlanCertificate> certificate;
  /// The model's frozen encoders placed on the plan kept (the frozen pass), when it has any.
  std::optional<PlanFrozen> frozen;
  /// The step of this configuration with the model's frozen encoders placed as --frozen asks,
  /// on its own timeline (the frozen pass's rule, memory left out until the plan kept is
  /// placed): the iteration plus what runs before the step. Absent without frozen components
  /// or with --frozen cached: the step is the iteration. The search and the alternatives
  /// compare plans by it (step_samples_per_s, docs/frozen.md).
  std::optional<double> step_s;
  std::vector<PassTime> pass_times;
  /// Schedule syntheses of this compile (any configuration or family, not only the plan
  /// kept) that the CPU-time safety limit stopped before their work limits did: when
  /// non-zero, the plan may differ from run to run, and the command says so.
  int safety_limit_hits = 0;
  /// How often the job's schedule memo computed and recalled (not in the plan: what the
  /// memo saved, and that a job's memo is its own).
  ScheduleMemo::AllCounts memo_counts;
  /// Set when the model profile had no times for the cluster's device type and they were
  /// derived from another device's (profile/derive.hpp).
  std::optional<DerivedTimes> derived_times;
};

/// Compiles a plan. Usage errors for options out of bounds or inconsistent with the profiles,
/// infeasible when nothing fits (with what did not fit, by how much, on which device).
/// `clock`, when given, times the passes.
Result<CompiledPlan> compile_plan(const ModelProfile& model, const ClusterProfile& cluster,
                                  const PlanOptions& options, PassClock* clock = nullptr);

/// The plan's timeline with the sends its schedule makes (DeviceTimeline::sends), which the
/// passes' replays do not keep: for a trace (simulate/trace.hpp). One more replay of the
/// schedule; an internal error if it does not end where the plan's timeline does.
Result<Timeline> timeline_with_sends(const CompiledPlan& plan);

}  // namespace pulse
