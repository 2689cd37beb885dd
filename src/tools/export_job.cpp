// The export job (export_job.hpp): the format's checks, then one branch per format.

#include "pulse/tools/export_job.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace pulse {

namespace {

template <auto member, class T>
Status store(const OptionValue& value, ExportJob& job) {
  job.*member = std::get<T>(value);
  return Ok{};
}

// Whether the job gives `option`, one format's own option (ExportFormat::own_option).
bool gives(const ExportJob& job, std::string_view option) {
  if (option == "stages") return job.stages_path.has_value();
  if (option == "model") return job.model_path.has_value();
  if (option == "compare") return !job.compare_paths.empty();
  return false;
}

// A known format, and no option that belongs to another: a usage error, not ignored.
Status check_format(const ExportJob& job) {
  const auto& formats = export_formats();
  if (std::none_of(formats.begin(), formats.end(),
                   [&](const ExportFormat& f) { return job.format == f.name; })) {
    // A timeline is the simulator's, not an export: point there rather than only refuse.
    const std::string& format = job.format;
    const std::string hint =
        format == "trace" || format == "chrome-trace" || format == "perfetto"
            ? "; the timeline as a Chrome trace is pulse-plan simulate PLAN --trace FILE (or "
              "plan --trace FILE)"
            : "";
    return usage_error(fmt::format("export: --format must be {}, got \"{}\"{}",
                                   export_format_names(), format, hint));
  }
  for (const ExportFormat& f : formats) {
    if (gives(job, f.own_option) && job.format != f.name) {
      return usage_error(fmt::format("export: --{} applies to --format {}, not {}", f.own_option,
                                     f.name, job.format));
    }
  }
  return Ok{};
}

// Where export writes: the document (-o FILE, or stdout) and, for torch-csv, its side file
// (--stages FILE, or beside -o FILE; none when the CSV goes to stdout without --stages).
Result<std::vector<NamedPath>> output_paths(const ExportJob& job) {
  std::vector<NamedPath> out = {document_output(job.output_path)};
  if (job.format != "torch-csv") return out;
  const std::string& csv = out[0].path;
  if (job.stages_path) {
    const std::string& side = *job.stages_path;
    if (side == "-" && csv == "-") {
      return usage_error("export: the CSV and --stages cannot both go to stdout");
    }
    if (side == csv) {
      return usage_error(
          fmt::format("export: --stages {} names the CSV's own file; give another name", side));
    }
    out.push_back({"--stages", side});
  } else if (csv != "-" && !is_special_file(csv)) {
    // Beside a file; -o /dev/stdout, like -o -, gets no side file of its own invention.
    out.push_back({"the side file", torch_stages_path(csv)});
  }
  return out;
}

// The CSV (stdout or -o) and its side file appear together or not at all.
Status write_csv(const ExportJob& job, const std::vector<NamedPath>& outputs, ExportRun& run) {
  auto out = export_torch_csv(run.plan);
  if (!out) return out.error();
  run.document = std::move(out->csv);
  std::vector<Output> files = {{outputs[0].path, run.document}};
  if (outputs.size() == 1) {
    run.note(
        "export: note: the side file (rows' devices and global ranks, stage layers, skip "
        "caches) is not written; give -o FILE or --stages FILE",
        job.on_note);
  } else {
    run.side_file = std::move(out->stages_json);
    files.push_back({outputs[1].path, run.side_file});
  }
  return job.write ? write_outputs(files) : Status(Ok{});
}

Status write_dot(const ExportJob& job, const ToolInputs& in, const std::vector<NamedPath>& outputs,
                 ExportRun& run) {
  if (in.model) {
    if (auto same = check_dot_model(run.plan, *in.model); !same) return same.error();
  }
  run.document = export_dot(run.plan, {in.model ? &*in.model : nullptr});
  return job.write ? write_outputs({{outputs[0].path, run.document}}) : Status(Ok{});
}

Status write_html(const ExportJob& job, const ToolInputs& in, const std::vector<NamedPath>& outputs,
                  ExportRun& run) {
  HtmlRequest request{&run.plan, {}};
  for (std::size_t k = 1; k < in.plans.size(); ++k) request.baselines.push_back(&in.plans[k]);
  run.document = export_html(request);
  return job.write ? write_outputs({{outputs[0].path, run.document}}) : Status(Ok{});
}

}  // namespace

const std::vector<JobOption<ExportJob>>& export_option_table() {
  using K = OptionKind;
  static const std::vector<JobOption<ExportJob>> table = {
      {"format",
       "NAME",
       K::text,
       "torch-csv, dot or html (required)",
       {},
       store<&ExportJob::format, std::string>},
      {"output,o",
       "FILE",
       K::text,
       "write here (atomically) instead of stdout",
       {},
       store<&ExportJob::output_path, std::string>},
      {"stages",
       "FILE",
       K::text,
       "torch-csv: the side file (default: -o FILE with .csv replaced by .stages.json)",
       {},
       store<&ExportJob::stages_path, std::string>},
      {"model",
       "FILE",
       K::text,
       "dot: model profile, for layer kinds and parameters",
       {},
       store<&ExportJob::model_path, std::string>},
      {"compare",
       "PLAN",
       K::texts,
       "html: a baseline plan to show beside PLAN (repeatable)",
       {},
       store<&ExportJob::compare_paths, std::vector<std::string>>},
  };
  return table;
}

Result<ExportJob> read_export_job(const std::vector<std::string>& files,
                                  const std::vector<GivenOption>& given) {
  if (files.size() != 1) {
    return usage_error(fmt::format(
        "export: expected one plan file, got {} (see pulse-plan export --help)", files.size()));
  }
  if (std::none_of(given.begin(), given.end(),
                   [](const GivenOption& g) { return g.name == "format"; })) {
    return usage_error(
        "export: --format torch-csv|dot|html is required (see pulse-plan export --help)");
  }
  ExportJob job;
  job.plan_path = files[0];
  if (auto read = read_job_options(export_option_table(), given, job); !read) return read.error();
  return job;
}

ExportRun run_export_job(const ExportJob& job) {
  ExportRun run;
  Status checked = check_format(job);
  auto outputs = checked ? output_paths(job) : Result<std::vector<NamedPath>>(checked.error());
  if (!outputs) {
    run.errors.push_back(outputs.error());
    return run;
  }
  ToolFiles files;
  files.command = "export";
  files.plans = {{"the plan", job.plan_path}};
  for (const std::string& other : job.compare_paths) files.plans.push_back({"--compare", other});
  files.model_path = job.model_path;
  files.outputs = *outputs;
  files.reading = Reading::first_problem;
  std::optional<ToolInputs> in = read_tool_inputs(files, run);
  if (!in) return run;
  run.plan = std::move(in->plans[0]);
  Status written = job.format == "torch-csv" ? write_csv(job, *outputs, run)
                   : job.format == "dot"     ? write_dot(job, *in, *outputs, run)
                                             : write_html(job, *in, *outputs, run);
  if (!written) run.errors.push_back(written.error());
  return run;
}

}  // namespace pulse
