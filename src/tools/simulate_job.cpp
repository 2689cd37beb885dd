// The simulate job (simulate_job.hpp).

#include "pulse/tools/simulate_job.hpp"

#include <fmt/format.h>

#include "pulse/simulate/trace.hpp"
#include "pulse/tools/simulation_report.hpp"

namespace pulse {

namespace {

template <auto member>
Status store_path(const OptionValue& value, SimulateJob& job) {
  job.*member = std::get<std::string>(value);
  return Ok{};
}
template <auto member>
Status store_flag(const OptionValue& value, SimulateJob& job) {
  job.*member = std::get<bool>(value);
  return Ok{};
}

}  // namespace

const std::vector<JobOption<SimulateJob>>& simulate_option_table() {
  using K = OptionKind;
  static const std::vector<JobOption<SimulateJob>> table = {
      {"cluster",
       "FILE",
       K::text,
       "replay on this cluster's links, all-reduce and memory instead of the plan's",
       {},
       store_path<&SimulateJob::cluster_path>},
      {"json",
       "",
       K::flag,
       "print the report as JSON (pulse.simulation/v1) instead of text",
       {},
       store_flag<&SimulateJob::json>},
      {"output,o",
       "FILE",
       K::text,
       "write the report to FILE instead of stdout (atomically)",
       {},
       store_path<&SimulateJob::output_path>},
      {"trace",
       "FILE",
       K::text,
       "also write the replayed timeline as a Chrome trace (chrome://tracing, Perfetto)",
       {},
       store_path<&SimulateJob::trace_path>},
      {"check",
       "",
       K::flag,
       "exit 1 when a figure differs from the plan's predicted ones (then no -o or --trace "
       "file is written)",
       {},
       store_flag<&SimulateJob::check>},
  };
  return table;
}

Result<SimulateJob> read_simulate_job(const std::vector<std::string>& files,
                                      const std::vector<GivenOption>& given) {
  if (files.size() != 1) {
    return usage_error(fmt::format(
        "simulate: expected one plan file, got {} (see pulse-plan simulate --help)", files.size()));
  }
  SimulateJob job;
  job.plan_path = files[0];
  if (auto read = read_job_options(simulate_option_table(), given, job); !read) {
    return read.error();
  }
  return job;
}

SimulateRun run_simulate_job(const SimulateJob& job) {
  SimulateRun run;
  ToolFiles files;
  files.command = "simulate";
  files.plans = {{"the plan", job.plan_path}};
  files.cluster_path = job.cluster_path;
  files.outputs = {document_output(job.output_path)};
  if (job.trace_path) files.outputs.push_back({"--trace", *job.trace_path});
  files.reading = Reading::plan_bytes_first;
  std::optional<ToolInputs> in = read_tool_inputs(files, run);
  if (!in) return run;
  run.plan = std::move(in->plans[0]);
  const ClusterProfile* cluster = in->cluster ? &*in->cluster : nullptr;
  auto replay = replay_plan({&run.plan, cluster});
  if (!replay) {
    run.errors.push_back(replay.error());
    return run;
  }
  run.replay = std::move(*replay);
  run.differences = compare_figures(run.plan, run.replay.figures);
  const std::string& name = job.plan_path;
  run.report = job.json ? simulation_report_json(name, in->plan_text[0], run.plan, run.replay,
                                                 run.differences)
                        : simulation_report_text(name, run.plan, run.replay, run.differences);
  // Every output is formatted before any is written; then they appear together or not at
  // all (stdout is written after the files' temporaries, before they are renamed).
  const Replay& r = run.replay;
  const std::string trace =
      job.trace_path
          ? chrome_trace(r.model, r.timeline, r.evaluation.allreduce, run.plan.parallelism.dp)
          : "";
  std::vector<Output> outputs = {{files.outputs[0].path, run.report}};
  if (job.trace_path) outputs.push_back({files.outputs[1].path, trace});
  const bool passed = !job.check || run.differences.empty();
  if (!passed) {
    const std::size_t n = run.differences.size();
    run.note(fmt::format("{}: the replay differs from the plan's predicted figures in {} place{}",
                         name, n, n == 1 ? "" : "s"),
             job.on_note);
    run.verdict = 1;
  }
  if (!job.write) return run;
  if (auto written =
          write_verdict_outputs("simulate", outputs, passed, "--check", run, job.on_note);
      !written) {
    run.errors.push_back(written.error());
  }
  return run;
}

}  // namespace pulse
