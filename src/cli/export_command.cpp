// pulse-plan export: a plan as a PyTorch schedule CSV, a Graphviz graph or an HTML report.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "commands.hpp"
#include "pulse/tools/export.hpp"
#include "pulse/base/io.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/plan/plan_codec.hpp"

namespace pulse::cli {

namespace po = boost::program_options;

namespace {

constexpr const char* kExportHelp =
    R"txt(usage: pulse-plan export PLAN --format torch-csv|dot|html [-o FILE] [options]

Writes a plan in another format, to stdout or atomically to -o FILE:

  torch-csv  PyTorch pipelining's compute-only schedule CSV, loadable with
             PipelineScheduleMulti._load_csv(FILE, format="compute_only"): one row per
             pipeline rank (the plan's pipeline device), the rank's actions in the plan's
             order, {stage}{F|B|I|W}{microbatch} (I and W for a split backward). Beside it
             a JSON side file (pulse.torch-stages/v1) with what the CSV cannot say: each
             stage's rank and layers, the skip tensors each rank caches (name, producer
             and consumer layer, stage pair, bytes), skips that cross ranks, and the
             global ranks of every pipeline. With -o out.csv it is out.stages.json; name
             it with --stages FILE (required for it when the CSV goes to stdout).
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

exit codes: 0 written; 2 bad usage or a plan that cannot be read (nothing written);
3 internal error (e.g. a write failed).
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

Status emit(const po::variables_map& vm, const std::string& text) {
  if (!vm.count("output")) {
    std::cout << text << std::flush;
    return Ok{};
  }
  return write_output(vm["output"].as<std::string>(), text);
}

Status export_csv(const po::variables_map& vm, const Plan& plan) {
  const TorchCsv out = export_torch_csv(plan);
  std::string side;
  if (vm.count("stages")) {
    side = vm["stages"].as<std::string>();
  } else if (vm.count("output") && vm["output"].as<std::string>() != "-") {
    side = torch_stages_path(vm["output"].as<std::string>());
  }
  if (side.empty()) {
    std::cerr << "pulse-plan: export: note: the stage map and skip caches are not written; "
                 "give -o FILE or --stages FILE\n";
  } else if (auto s = write_file_atomically(side, out.stages_json); !s) {
    return s;
  }
  auto written = emit(vm, out.csv);
  if (!written && !side.empty()) ::unlink(side.c_str());
  return written;
}

// Options that belong to another format are a usage error, not silently ignored.
Status check_format_options(const po::variables_map& vm, const std::string& format) {
  for (const ExportFormat& f : export_formats()) {
    if (*f.own_option && vm.count(f.own_option) && format != f.name) {
      return usage_error(fmt::format("export: --{} applies to --format {}, not {}", f.own_option,
                                     f.name, format));
    }
  }
  return Ok{};
}

Status run_export(const po::variables_map& vm, const std::string& format, const std::string& path) {
  auto plan = load_plan(path);
  if (!plan) return plan.error();
  if (format == "torch-csv") return export_csv(vm, *plan);
  if (format == "dot") {
    std::optional<ModelProfile> model;
    if (vm.count("model")) {
      auto m = load_model_profile(vm["model"].as<std::string>());
      if (!m) return m.error();
      model = std::move(*m);
    }
    return emit(vm, export_dot(*plan, {model ? &*model : nullptr}));
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
  return emit(vm, export_html(request));
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
    return report(usage_error(fmt::format("export: --format must be {}, got \"{}\"",
                                          export_format_names(), format)));
  }
  if (auto s = check_format_options(*vm, format); !s) return report(s.error());
  if (auto s = run_export(*vm, format, split.positional[0]); !s) return report(s.error());
  return 0;
}

}  // namespace pulse::cli
