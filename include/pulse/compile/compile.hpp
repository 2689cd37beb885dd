// The plan pipeline, written once as a list of passes:
//   layer graph -> partition -> placement -> schedule -> evaluate (iteration, memory, bytes)
// compile_plan runs it for one configuration when pp, dp and the microbatch size are all
// given; otherwise the tuner (solver/tuner.cpp) searches them: every candidate is screened
// with a cheap schedule, the best few get the full schedule synthesis, the fastest wins and
// every other candidate is kept with the reason it lost. Loading and writing are the
// caller's (the CLI's) business.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pulse/cost/cost_model.hpp"
#include "pulse/simulate/evaluate.hpp"
#include "pulse/partition/partition.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/place/placement.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/base/result.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/schedule/synthesize.hpp"
#include "pulse/simulate/simulate.hpp"
#include "pulse/base/defaults.hpp"

namespace pulse {

/// How a job is cut, placed and scheduled. Every strategy is evaluated by the same engine.
enum class Strategy {
  pulse,               ///< V placement, skip-aware partition, synthesized schedule.
  v_naive,             ///< V placement, cuts balanced ignoring skips, synthesized schedule.
  one_f_one_b,         ///< P stages in a row, skips relayed through each boundary, 1F1B.
  one_f_one_b_direct,  ///< P stages in a row, skips sent straight to the consumer, 1F1B.
  gpipe,               ///< P stages in a row, skips relayed, GPipe (all forwards first).
};

/// What a strategy is made of.
struct StrategyTraits {
  const char* name;     ///< As on the command line and in plans.
  bool v_placement;     ///< 2P stages in a V; else P stages in a row.
  SkipRouting routing;  ///< How non-local skips travel.
  bool skip_aware;      ///< The partitioner sees skips (false: balanced ignoring them).
  ScheduleFamily schedule;
};

const StrategyTraits& traits(Strategy s);
const char* strategy_name(Strategy s);
/// The strategy called `name`; "sequential" is accepted for 1f1b (the foundation's name).
std::optional<Strategy> parse_strategy(std::string_view name);
/// Every strategy name, for help texts and messages.
std::string strategy_names();

struct PlanOptions {
  Strategy strategy = Strategy::pulse;
  std::optional<int> pp;  ///< Pipeline degree; searched when absent.
  std::optional<int> dp;  ///< Data-parallel degree; searched (devices / pp) when absent.
  std::optional<int> microbatch_size;  ///< Samples per microbatch; searched when absent.
  std::optional<int> global_batch;     ///< Default: kDefaultSamplesPerDevice per device.
  MemoryModel memory;
  /// Backward as input-gradient (I) and weight-gradient (W) ops, zero-bubble style.
  bool split_backward = false;
  /// Schedule synthesis limits: branch-and-bound nodes per integer program (deterministic)
  /// and a wall-clock safety limit per schedule, seconds (0: list schedules only).
  int solver_max_nodes = kDefaultSolverNodes;
  double solver_max_seconds = kDefaultSolverSeconds;
  /// Tuner: how many of the best screened candidates get the full schedule synthesis
  /// (0: all of them, an exhaustive sweep).
  int tuner_top_k = 3;
  /// Tuner progress: called after each candidate with (done, total). Optional.
  std::function<void(int, int)> progress;
};

/// How long each pass took, for --stats (never written into a plan).
struct PassTime {
  std::string pass;
  double seconds = 0;
};

/// One configuration the planner evaluated.
struct Candidate {
  int pp = 0;
  int dp = 0;
  int microbatch_size = 0;
  int num_microbatches = 0;
  bool feasible = false;
  bool synthesized = false;  ///< Got the full schedule synthesis (else: screened only).
  bool chosen = false;
  double iteration_s = 0;
  double samples_per_s = 0;
  std::int64_t peak_memory_bytes = 0;  ///< Largest device peak.
  std::string reason;  ///< Why it lost: out of memory (where, by how much), not divisible, ...
};

struct CompiledPlan {
  PlanOptions options;
  Strategy strategy = Strategy::pulse;
  int pp = 1;
  int dp = 1;
  int microbatch_size = 1;
  int num_microbatches = 1;
  int global_batch = 1;
  int device_type = 0;  ///< Index into the model's device_types.
  /// ranks[r][d]: the cluster rank of pipeline device d in data-parallel replica r.
  std::vector<std::vector<RankId>> ranks;
  PartitionResult partition;
  PipelineModel model;
  std::vector<int> inflight_limit;  ///< Per device, what memory allows.
  Schedule schedule;
  Timeline timeline;
  ScheduleAnswer solver;  ///< How the schedule was found (its schedule/timeline moved out).
  std::vector<MemoryBreakdown> static_bytes;
  std::vector<AllReduce> allreduce;
  double iteration_s = 0;
  double samples_per_s = 0;
  double bubble_ratio = 0;
  std::vector<Candidate> candidates;  ///< Configurations tried, best first.
  Placement placement;                ///< How ranks were chosen.
  std::vector<PassTime> pass_times;
};

/// Compiles a plan. Usage errors for inconsistent options, infeasible when nothing fits
/// (with what did not fit, by how much, on which device).
Result<CompiledPlan> compile_plan(const ModelProfile& model, const ClusterProfile& cluster,
                                  const PlanOptions& options);

}  // namespace pulse
