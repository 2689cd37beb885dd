// The plan job (plan_job.hpp): check, load, compile, write.

#include "pulse/compile/plan_job.hpp"

#include <optional>

#include <fmt/format.h>

#include "compile_internal.hpp"
#include "pulse/base/io.hpp"
#include "pulse/base/process.hpp"
#include "pulse/base/units.hpp"
#include "pulse/compile/bucket_plan.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/compile/plan_options.hpp"
#include "pulse/plan/buckets_view.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/simulate/trace.hpp"

namespace pulse {

namespace {

// The outputs in the order they are written: the plan (-o, or stdout without it), then the
// trace when asked for.
std::vector<NamedPath> output_paths(const PlanJob& job) {
  std::vector<NamedPath> out = {job.output_path ? NamedPath{"-o", *job.output_path}
                                                : NamedPath{"", "-"}};
  if (job.trace_path) out.push_back({"--trace", *job.trace_path});
  return out;
}

// Both profiles, or every problem of either: a run reports them all.
struct Loaded {
  std::optional<ModelProfile> model;
  std::optional<ClusterProfile> cluster;
  std::optional<BucketSet> buckets;  // --buckets
  // --buckets: the model at the largest bucket's shape (the plan's body) and the section.
  std::optional<ModelProfile> body_model;
  std::optional<PlanBuckets> section;
};

Loaded load(const PlanJob& job, PlanRun& run, PassClock& clock) {
  PassClock::Run timer(clock, "load");
  Loaded out;
  auto model = load_model_profile(job.model_path);
  auto cluster = load_cluster_profile(job.cluster_path);
  if (!model) run.errors.push_back(model.error());
  if (!cluster) run.errors.push_back(cluster.error());
  if (job.buckets_path) {
    auto buckets = load_bucket_set(*job.buckets_path);
    if (!buckets) run.errors.push_back(buckets.error());
    if (buckets) out.buckets = std::move(*buckets);
  }
  if (model && cluster) {
    out.model = std::move(*model);
    out.cluster = std::move(*cluster);
  }
  return out;
}

// Every output is made before any is written; then they appear together or not at all.
Status write(const PlanJob& job, const Loaded& in, PlanRun& run, PassClock& clock) {
  PassClock::Run timer(clock, "write");
  release_free_memory();  // the planning's, before the plan's text and its read-back
  const std::vector<NamedPath> outputs = output_paths(job);
  run.plan = build_plan(run.compiled, in.body_model ? *in.body_model : *in.model, *in.cluster);
  run.plan.buckets = in.section;
  run.plan.file = outputs[0].path == "-" ? "stdout" : outputs[0].path;
  if (job.fail_on_warning && !run.plan.warnings.empty()) {
    std::string lines;
    for (const std::string& w : run.plan.warnings) lines += "\n  " + w;
    return infeasible_error(
        fmt::format("plan: {} warning(s) and --fail-on-warning, nothing written:{}",
                    run.plan.warnings.size(), lines));
  }
  if (!job.write) {
    auto text = encode_plan(run.plan);
    if (!text) return text.error();
    run.text = std::move(*text);
    return Ok{};
  }
  // Checked first, then streamed into its file: at pp 512 over 2048 layers the text is 0.6
  // GB, which held whole was half of the job's peak memory.
  if (Status s = check_encodable(run.plan); !s) return s.error();
  std::string trace;  // outlives `files`, which views it
  if (job.trace_path) {
    const CompiledPlan& p = run.compiled;
    auto timeline = timeline_with_sends(p);  // the passes' timelines keep no sends
    if (!timeline) return timeline.error();
    trace = chrome_trace(p.model, *timeline, p.evaluation.allreduce, p.dp);
  }
  const Plan& plan = run.plan;
  std::vector<Output> files = {
      {outputs[0].path, [&plan](const TextSink& sink) { return stream_plan(plan, sink); }}};
  if (job.trace_path) files.push_back({outputs[1].path, trace});
  return write_outputs(files);
}

// The plan, or with --buckets the plan for every bucket (bucket_plan.hpp).
Status compile(Loaded& in, const PlanOptions& options, PlanRun& run, PassClock& clock) {
  if (!in.buckets) {
    auto compiled = detail::compile_checked(*in.model, *in.cluster, options, clock);
    if (!compiled) return compiled.error();
    run.compiled = std::move(*compiled);
    return Ok{};
  }
  auto compiled = compile_buckets(*in.model, *in.cluster, options, *in.buckets, clock);
  if (!compiled) return compiled.error();
  run.compiled = std::move(compiled->body);
  in.body_model = std::move(compiled->body_model);
  PlanBuckets& section = in.section.emplace(std::move(compiled->section));
  section.sha256 = in.buckets->sha256;
  ClusterProfile planned = *in.cluster;
  apply_headroom(run.compiled.options.headroom_fraction(), planned);
  section.capacity_bytes = planned.usable_memory();
  return Ok{};
}

// --partition-from: the cut of a plan's stages, as --cuts would give it.
Status cut_from_plan(const PlanJob& job, PlanOptions& options) {
  if (!job.partition_from_path) return Ok{};
  if (!options.cuts.empty()) {
    return usage_error("plan: --cuts and --partition-from both give a cut; give one of them");
  }
  auto plan = load_plan(*job.partition_from_path, PlanCheck::shape_only);
  if (!plan) return plan.error();
  for (std::size_t s = 1; s < plan->stages.size(); ++s) {
    options.cuts.push_back(plan->stages[s].layers.front());
  }
  if (options.cuts.empty()) {
    return usage_error(
        fmt::format("plan: --partition-from {}: the plan has one stage, so no cut to take",
                    *job.partition_from_path));
  }
  return Ok{};
}

// The plan's own warnings, then the run's.
std::vector<std::string> warnings(const Plan& plan, const CompiledPlan& p) {
  std::vector<std::string> out = plan.warnings;
  if (p.safety_limit_hits == 0) return out;
  out.push_back(fmt::format(
      "the CPU-time safety limit (--solver-time-limit {} s) stopped {} schedule search(es) "
      "before their work limits; this plan may differ from run to run (raise the limit)",
      p.options.solver_max_seconds, p.safety_limit_hits));
  return out;
}

}  // namespace

std::string plan_summary(const Plan& plan, const CompiledPlan& p, const ModelProfile& m,
                         const ClusterProfile& c) {
  int local = 0;
  for (const SkipPlacement& s : p.model.skips) local += s.local ? 1 : 0;
  const CostScales& scales = p.options.scales;
  std::string scaled;
  if (!scales.identity()) {
    scaled = fmt::format(", compute x{:g}{}, links x{:g}", scales.compute,
                         scales.compute_from.empty() ? "" : " (" + scales.compute_from + ")",
                         scales.links);
  }
  if (p.derived_times) scaled += ", " + p.derived_times->summary;
  // Where the frozen encoders run and what they cost (docs/frozen.md), before the what-ifs.
  std::string frozen;
  if (plan.frozen) {
    const PlanFrozen& f = *plan.frozen;
    frozen = f.placement == "cached"
                 ? fmt::format("; frozen cached ({} per sample stored)",
                               format_bytes(f.cached_bytes_per_sample))
                 : fmt::format(
                       "; frozen in {} (+{} before the step, {} in bubbles): step {} "
                       "({:.1f} samples/s)",
                       f.placement, format_seconds(f.before_step_s), format_seconds(f.bubble_s),
                       format_seconds(f.step_s), f.samples_per_s);
  }
  // At pp 1 every skip is on its device and there are no stages to count.
  const std::string skips =
      p.pp > 1 ? fmt::format(", {}/{} skips local", local, p.model.skips.size()) : "";
  return fmt::format(
      "{} on {} ({}): {}, microbatch {} x {}{}, iteration {} ({:.1f} samples/s), "
      "bubble {:.1f}%{}{}",
      m.name, c.name, strategy_name(p.strategy), plan.layout(), p.microbatch_size,
      p.num_microbatches, skips, format_seconds(p.evaluation.iteration_s),
      p.evaluation.samples_per_s, 100.0 * p.evaluation.bubble_ratio, frozen, scaled);
}

std::string buckets_summary(const PlanBuckets& b) {
  std::string out = "\n  " + buckets_headline(b);
  for (const std::string& line : bucket_lines(b)) out += "\n    " + line;
  return out;
}

PlanRun run_plan_job(const PlanJob& job) {
  PlanRun run;
  PassClock clock;
  // Check: the options and the outputs, before anything is read.
  Status checked = check_plan_options(job.options);
  std::vector<NamedPath> inputs = {{"--model", job.model_path}, {"--cluster", job.cluster_path}};
  if (job.partition_from_path) inputs.push_back({"--partition-from", *job.partition_from_path});
  if (job.buckets_path) inputs.push_back({"--buckets", *job.buckets_path});
  if (checked) checked = check_output_paths("plan", inputs, output_paths(job));
  PlanOptions options = job.options;
  if (checked) checked = cut_from_plan(job, options);
  if (!checked) {
    run.errors.push_back(checked.error());
    return run;
  }
  Loaded in = load(job, run, clock);
  if (!run.ok()) return run;
  if (auto s = compile(in, options, run, clock); !s) {
    run.errors.push_back(s.error());
    return run;
  }
  if (auto written = write(job, in, run, clock); !written) {
    run.errors.push_back(written.error());
    return run;
  }
  run.summary = plan_summary(run.plan, run.compiled, *in.model, *in.cluster);
  if (run.plan.buckets) run.summary += buckets_summary(*run.plan.buckets);
  run.warnings = warnings(run.plan, run.compiled);
  run.pass_times = clock.times();
  return run;
}

}  // namespace pulse
