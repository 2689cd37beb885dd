// pulse-plan export: a plan as a PyTorch schedule CSV, a Graphviz graph or an HTML report.
#include <algorithm>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "commands.hpp"
#include "pulse/base/io.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/tools/export.hpp"

namespace pulse::cli {

namespace po = boost::program_options;

namespace {

constexpr const char* kExportHelp =
    R"txt(usage: pulse-plan export PLAN --format torch-csv|dot|html [-o FILE] [options]

Writes a plan in another format, to stdout or atomically to -o FILE:

  torch-csv  PyTorch pipelining's compute-only schedule CSV, one row per pipeline rank,
             {stage}{F|B|I|W}{microbatch} (I and W for a split backward), run correctly by
             both executors: PipelineScheduleMulti._load_csv(FILE), lock-step, and
             _PipelineScheduleRuntime._load_csv(FILE, format="compute_only"), which drops
             the empty cells and adds the sends and receives. Row g is the rank with group
             rank g (new_group sorts a pipeline's global ranks); each op sits at the first
             step after its rank's previous op and after the op whose output it consumes,
             with empty cells between. Beside it a JSON side file (pulse.torch-stages/v2):
             each row's pipeline device and the global rank of every replica, each stage's
             group rank and layers, the skip tensors each rank caches, skips that cross
             ranks. With -o out.csv it is out.stages.json; name it with --stages FILE.
             With the CSV on stdout there is a side file only if --stages names it (else
             a note on stderr says none is written). Both appear or neither. A plan
             whose pipeline groups order their devices differently is refused (exit 2):
             one CSV cannot serve them all.
  dot        Graphviz: layers in stage clusters, filled by device, skip edges dashed
             (green local, red crossing devices). --model FILE adds kinds and parameters.
  html       one self-contained page (no script, nothing fetched): the schedule as a
             timeline per device, the partition with skip arcs, memory per device against
             capacity. --compare PLAN (repeatable) adds baselines beside the main plan,
             on the same time scale.

)txt";

constexpr const char* kExportExamples = R"txt(
examples:
  pulse-plan export sd2.json --format torch-csv -o sd2.csv    # also sd2.stages.json
  pulse-plan export sd2.json --format dot | dot -Tsvg > sd2.svg
  pulse-plan export sd2.json --format html --compare sd2-seq.json -o sd2.html

exit codes: 0 written; 2 bad usage, a plan that cannot be read or one torch-csv cannot
express (nothing written); 3 internal error (e.g. a write failed).
)txt";

po::options_description export_options() {
  po::options_description o("options");
  o.add_options()("format", po::value<std::string>()->value_name("NAME"),
                  "torch-csv, dot or html (required)")("output,o",
                                                       po::value<std::string>()->value_name("FILE"),
                                                       "write here (atomically) instead of stdout")(
      "stages", po::value<std::string>()->value_name("FILE"),
      "torch-csv: the side file (default: -o FILE with .csv replaced by .stages.json)")(
      "model", po::value<std::string>()->value_name("FILE"),
      "dot: model profile, for layer kinds and parameters")(
      "compare", po::value<std::vector<std::string>>()->value_name("PLAN")->composing(),
      "html: a baseline plan to show beside PLAN (repeatable)")("help,h", "this help");
  return o;
}

// Where export writes: the document (-o FILE, or stdout) and, for torch-csv, its side file
// (--stages FILE, or beside -o FILE; none when the CSV goes to stdout without --stages).
Result<std::vector<NamedPath>> output_paths(const po::variables_map& vm,
                                            const std::string& format) {
  std::vector<NamedPath> out = {vm.count("output") ? NamedPath{"-o", vm["output"].as<std::string>()}
                                                   : NamedPath{"", "-"}};
  if (format != "torch-csv") return out;
  const std::string& csv = out[0].path;
  if (vm.count("stages")) {
    const std::string side = vm["stages"].as<std::string>();
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

// The files export reads: the plan, and --model (dot) or --compare (html) when given.
std::vector<NamedPath> input_paths(const po::variables_map& vm, const std::string& plan) {
  std::vector<NamedPath> in = {{"the plan", plan}};
  if (vm.count("model")) in.push_back({"--model", vm["model"].as<std::string>()});
  if (vm.count("compare")) {
    for (const std::string& other : vm["compare"].as<std::vector<std::string>>()) {
      in.push_back({"--compare", other});
    }
  }
  return in;
}

// The CSV (stdout or -o) and its side file appear together or not at all.
Status export_csv(const Plan& plan, const std::vector<NamedPath>& outputs) {
  auto out = export_torch_csv(plan);
  if (!out) return out.error();
  std::vector<Output> files = {{outputs[0].path, out->csv}};
  if (outputs.size() == 1) {
    std::cerr << "pulse-plan: export: note: the side file (rows' devices and global ranks, "
                 "stage layers, skip caches) is not written; give -o FILE or --stages FILE\n";
  } else {
    files.push_back({outputs[1].path, out->stages_json});
  }
  return write_outputs(files);
}

// Options that belong to another format are a usage error, not silently ignored.
Status check_format_options(const po::variables_map& vm, const std::string& format) {
  for (const ExportFormat& f : export_formats()) {
    if (*f.own_option && vm.count(f.own_option) && format != f.name) {
      return usage_error(
          fmt::format("export: --{} applies to --format {}, not {}", f.own_option, f.name, format));
    }
  }
  return Ok{};
}

Status run_export(const po::variables_map& vm, const std::string& format, const std::string& path,
                  const std::vector<NamedPath>& outputs) {
  auto plan = load_plan(path);
  if (!plan) return plan.error();
  if (format == "torch-csv") return export_csv(*plan, outputs);
  if (format == "dot") {
    std::optional<ModelProfile> model;
    if (vm.count("model")) {
      auto m = load_model_profile(vm["model"].as<std::string>());
      if (!m) return m.error();
      model = std::move(*m);
      if (auto same = check_dot_model(*plan, *model); !same) return same.error();
    }
    const std::string text = export_dot(*plan, {model ? &*model : nullptr});
    return write_outputs({{outputs[0].path, text}});
  }
  std::vector<Plan> baselines;
  if (vm.count("compare")) {
    for (const std::string& other : vm["compare"].as<std::vector<std::string>>()) {
      auto b = load_plan(other);
      if (!b) return b.error();
      baselines.push_back(std::move(*b));
    }
  }
  HtmlRequest request{&*plan, {}};
  for (const Plan& b : baselines) request.baselines.push_back(&b);
  const std::string text = export_html(request);
  return write_outputs({{outputs[0].path, text}});
}

}  // namespace

int export_command(const std::vector<std::string>& args) {
  const po::options_description options = export_options();
  const SplitArguments split = split_positional(args, options);
  auto vm = parse_options("export", split.options, options);
  if (!vm) return report(vm.error());
  if (vm->count("help")) {
    std::cout << kExportHelp << options << kExportExamples;
    return 0;
  }
  if (split.positional.size() != 1) {
    return report(usage_error(
        fmt::format("export: expected one plan file, got {} (see pulse-plan export --help)",
                    split.positional.size())));
  }
  if (!vm->count("format")) {
    return report(usage_error(
        "export: --format torch-csv|dot|html is required (see pulse-plan export --help)"));
  }
  const std::string format = (*vm)["format"].as<std::string>();
  const auto& formats = export_formats();
  if (std::none_of(formats.begin(), formats.end(),
                   [&](const ExportFormat& f) { return format == f.name; })) {
    // A timeline is the simulator's, not an export: point there rather than only refuse.
    const std::string hint =
        format == "trace" || format == "chrome-trace" || format == "perfetto"
            ? "; the timeline as a Chrome trace is pulse-plan simulate PLAN --trace FILE (or "
              "plan --trace FILE)"
            : "";
    return report(usage_error(fmt::format("export: --format must be {}, got \"{}\"{}",
                                          export_format_names(), format, hint)));
  }
  if (auto s = check_format_options(*vm, format); !s) return report(s.error());
  const std::string& plan = split.positional[0];
  auto outputs = output_paths(*vm, format);
  if (!outputs) return report(outputs.error());
  if (auto s = check_output_paths("export", input_paths(*vm, plan), *outputs); !s) {
    return report(s.error());
  }
  if (auto s = run_export(*vm, format, plan, *outputs); !s) return report(s.error());
  return 0;
}

}  // namespace pulse::cli
