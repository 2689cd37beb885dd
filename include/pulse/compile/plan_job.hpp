// The whole job of `pulse-plan plan` as one library call, as HiGHS's Highs::run owns a solve:
// the inputs and the options in; the plan, its JSON and the diagnostics out. The command line
// (src/cli/plan_command.cpp) parses its arguments into a PlanJob (plan_options.hpp's table),
// calls run_plan_job and prints; a library user or the Python package calls the same.
//
// The job's passes, each timed on the job's clock (--stats prints them in this order):
//
//   check   the options against their table (plan_options.hpp) and the outputs against the
//           inputs (base/io.hpp), before anything is read
//   load    both profiles; a problem in either is reported, both when both have one
//   compile the pass list (compile.hpp): graph ... evaluate, memory curve
//   write   the Plan built (plan_builder.hpp), encoded, and written with the trace, both or
//           neither, atomically
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pulse/base/result.hpp"
#include "pulse/compile/compile.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// The inputs, the outputs and the options of one plan.
struct PlanJob {
  std::string model_path;    ///< --model: a pulse.model/v1 profile.
  std::string cluster_path;  ///< --cluster: a pulse.cluster/v2 (or v1) profile.
  /// -o: where the plan goes, "-" for stdout; absent: stdout (named "the output without -o").
  std::optional<std::string> output_path;
  /// --trace: where the simulated timeline goes, as a Chrome trace.
  std::optional<std::string> trace_path;
  /// --partition-from: a plan whose stages' layer lists give options.cuts.
  std::optional<std::string> partition_from_path;
  /// --buckets: a pulse.buckets/v1 file (profile/buckets.hpp); the plan serves every bucket.
  std::optional<std::string> buckets_path;
  /// False: make the plan's text (PlanRun::text) and write nothing.
  bool write = true;
  /// --fail-on-warning: a plan with warnings (its `warnings` list) is an error, not written.
  bool fail_on_warning = false;
  PlanOptions options;
};

/// What run_plan_job found. `errors` says whether the call worked; the rest, what it made.
struct PlanRun {
  /// Empty when the plan was made (and written). Otherwise every problem found before the
  /// job stopped: both profiles' when neither loads. The first decides the exit code.
  std::vector<Error> errors;
  CompiledPlan compiled;  ///< Every pass's answer, the tuner's candidates included.
  Plan plan;              ///< The document, as written.
  std::string text;       ///< Its JSON, where the job does not write it (else streamed).
  /// "MODEL on CLUSTER (STRATEGY): pp P x dp D, ... iteration T (R samples/s), bubble B%".
  std::string summary;
  std::vector<std::string> warnings;  ///< For stderr: the plan may differ from run to run.
  std::vector<PassTime> pass_times;   ///< check, load, the compiler's passes, write.

  bool ok() const { return errors.empty(); }
};

/// Runs the job: check, load, compile, build, encode, write. Nothing is written unless all of
/// it succeeds; then the plan (and the trace) appear together.
PlanRun run_plan_job(const PlanJob& job);

/// The one-line summary of `plan` (compiled as `compiled`), made from `model` on `cluster`
/// (PlanRun::summary): its layout and mode (Plan::layout), microbatching, skips kept local
/// (pipelines only), time and bubble.
std::string plan_summary(const Plan& plan, const CompiledPlan& compiled, const ModelProfile& model,
                         const ClusterProfile& cluster);

/// The summary's lines for a plan made with --buckets: the weighted figure, then one row per
/// bucket (shape, share, microbatching, family, iteration, throughput, peak memory).
std::string buckets_summary(const PlanBuckets& buckets);

}  // namespace pulse
