// The diff job (diff_job.hpp).

#include "pulse/tools/diff_job.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "pulse/profile/scaling.hpp"
#include "pulse/tools/replay.hpp"

namespace pulse {

namespace {

template <auto member, class T>
Status store(const OptionValue& value, DiffJob& job) {
  job.*member = std::get<T>(value);
  return Ok{};
}

// The output format: --format, or json for --json; --color only with the table.
Result<std::string> output_format(const DiffJob& job) {
  const std::string format = job.format.value_or("table");
  if (format != "table" && format != "json" && format != "markdown" && format != "html") {
    return usage_error(
        fmt::format("diff: --format must be table, json, markdown or html, got \"{}\"", format));
  }
  if (job.json && job.format && format != "json") {
    return usage_error(
        fmt::format("diff: --json and --format {} ask for two formats; give one of them", format));
  }
  const std::string chosen = job.json ? "json" : format;
  if (job.color && chosen != "table") {
    return usage_error(fmt::format("diff: --color applies to --format table, not {}", chosen));
  }
  return chosen;
}

Result<bool> use_color(const std::string& when, bool to_stdout) {
  if (when == "always") return true;
  if (when == "never") return false;
  if (when != "auto") {
    return usage_error(
        fmt::format("diff: --color must be auto, always or never, got \"{}\"", when));
  }
  const char* no_color = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  return to_stdout && ::isatty(STDOUT_FILENO) == 1 && (no_color == nullptr || *no_color == '\0') &&
         !(term != nullptr && std::string(term) == "dumb");
}

Status check_threshold(const std::optional<double>& value, const char* name) {
  if (!value || (std::isfinite(*value) && *value >= 0)) return Ok{};
  return usage_error(fmt::format("diff: --{} must be a percentage >= 0, got {}", name, *value));
}

Result<double> scale(const std::optional<std::string>& given, const char* name) {
  if (!given) return 1.0;
  const std::string& text = *given;
  if (const std::optional<double> v = parse_scale(text)) {
    if (auto s = check_scale_limit("diff", fmt::format("--{}", name), *v); !s) return s.error();
    return *v;
  }
  return usage_error(fmt::format("diff: --{} must be a positive, finite number, got \"{}\"{}", name,
                                 text,
                                 text == "range-low" || text == "range-high"
                                     ? " (the time range is the model profile's: plan with it)"
                                     : ""));
}

// What the job's options say, checked in the order the command line always checked them.
struct Settings {
  std::string format;
  bool color = false;
  double compute_scale = 1, link_scale = 1;
};

Result<Settings> settings(const DiffJob& job) {
  Settings s;
  auto format = output_format(job);
  if (!format) return format.error();
  s.format = *format;
  auto color = use_color(job.color.value_or("auto"), !job.output_path || *job.output_path == "-");
  if (!color) return color.error();
  s.color = *color;
  if (auto t = check_threshold(job.fail_if_slower_pct, "fail-if-slower"); !t) return t.error();
  if (auto t = check_threshold(job.fail_if_more_traffic_pct, "fail-if-more-traffic"); !t) {
    return t.error();
  }
  auto compute = scale(job.compute_scale, "compute-scale");
  if (!compute) return compute.error();
  auto links = scale(job.link_scale, "link-scale");
  if (!links) return links.error();
  s.compute_scale = *compute;
  s.link_scale = *links;
  return s;
}

// Both plans replayed under the scaled costs: their figures are what is compared. False,
// with every problem in the run, when either does not replay.
bool replay_both(const DiffJob& job, const Settings& s, DiffRun& run) {
  if (!job.compute_scale && !job.link_scale) return true;
  auto old_replay = replay_plan({&run.old_plan, nullptr, s.compute_scale, s.link_scale});
  auto new_replay = replay_plan({&run.new_plan, nullptr, s.compute_scale, s.link_scale});
  if (!old_replay || !new_replay) {
    if (!old_replay) run.errors.push_back(old_replay.error());
    if (!new_replay) run.errors.push_back(new_replay.error());
    return false;
  }
  run.old_plan = std::move(old_replay->figures);
  run.new_plan = std::move(new_replay->figures);
  return true;
}

std::string format_report(const std::string& format, const DiffRun& run, bool color) {
  if (format == "json") return format_diff_json(run.diff);
  if (format == "markdown") return format_diff_markdown(run.diff);
  if (format == "html") return format_diff_html(run.diff, run.old_plan, run.new_plan);
  return format_diff_table(run.diff, {color});
}

}  // namespace

const std::vector<JobOption<DiffJob>>& diff_option_table() {
  using K = OptionKind;
  static const std::vector<JobOption<DiffJob>> table = {
      {"format", "NAME", K::text, "table, json, markdown or html", std::string("table"),
       store<&DiffJob::format, std::string>},
      {"json", "", K::flag, "the same as --format json", {}, store<&DiffJob::json, bool>},
      {"output,o",
       "FILE",
       K::text,
       "write here (atomically) instead of stdout",
       {},
       store<&DiffJob::output_path, std::string>},
      {"fail-if-slower",
       "PCT",
       K::number,
       "exit 4 if NEW's samples/s is more than PCT percent below OLD's",
       {},
       store<&DiffJob::fail_if_slower_pct, double>},
      {"fail-if-more-traffic",
       "PCT",
       K::number,
       "exit 4 if NEW moves more than PCT percent more P2P bytes per sample",
       {},
       store<&DiffJob::fail_if_more_traffic_pct, double>},
      {"color", "WHEN", K::text, "auto, always or never (the table only)", std::string("auto"),
       store<&DiffJob::color, std::string>},
      {"compute-scale",
       "F",
       K::text,
       "replay both plans with every stage time x F (0.001 to 1000)",
       {},
       store<&DiffJob::compute_scale, std::string>},
      {"link-scale",
       "F",
       K::text,
       "replay both plans with every link F times as fast (0.001 to 1000)",
       {},
       store<&DiffJob::link_scale, std::string>},
      {"allow-changed-inputs",
       "",
       K::flag,
       "accepted for old scripts; a recalibrated profile is shown, not refused",
       {},
       store<&DiffJob::allow_changed_inputs, bool>},
  };
  return table;
}

Result<DiffJob> read_diff_job(const std::vector<std::string>& files,
                              const std::vector<GivenOption>& given) {
  if (files.size() != 2) {
    return usage_error(
        fmt::format("diff: expected two plan files, OLD and NEW, got {} (see pulse-plan diff "
                    "--help)",
                    files.size()));
  }
  DiffJob job;
  job.old_path = files[0];
  job.new_path = files[1];
  if (auto read = read_job_options(diff_option_table(), given, job); !read) return read.error();
  return job;
}

DiffRun run_diff_job(const DiffJob& job) {
  DiffRun run;
  auto s = settings(job);
  if (!s) {
    run.errors.push_back(s.error());
    return run;
  }
  ToolFiles files;
  files.command = "diff";
  files.plans = {{"the old plan", job.old_path}, {"the new plan", job.new_path}};
  files.outputs = {document_output(job.output_path)};
  std::optional<ToolInputs> in = read_tool_inputs(files, run);
  if (!in) return run;
  run.old_plan = std::move(in->plans[0]);
  run.new_plan = std::move(in->plans[1]);
  if (auto agree = check_inputs_agree(run.old_plan, run.new_plan); !agree) {
    run.errors.push_back(agree.error());
    return run;
  }
  if (!replay_both(job, *s, run)) return run;
  run.diff = diff_plans(
      {&run.old_plan, &run.new_plan, "", "", job.fail_if_slower_pct, job.fail_if_more_traffic_pct});
  run.report = format_report(s->format, run, s->color);
  // The report is written even when a gate trips: CI keeps it as the artifact of a red build.
  if (job.write) {
    if (auto written = write_outputs({{files.outputs[0].path, run.report}}); !written) {
      run.errors.push_back(written.error());
      return run;
    }
  }
  for (const DiffGate& g : run.diff.gates) {
    if (!g.tripped) continue;
    run.note("diff: " + g.reason, job.on_note);
    run.verdict = kDiffThresholdExit;
  }
  return run;
}

}  // namespace pulse
