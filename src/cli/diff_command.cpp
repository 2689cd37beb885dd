// pulse-plan diff: two plans side by side, with CI switches.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "pulse/base/io.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/profile/scaling.hpp"
#include "pulse/tools/diff.hpp"
#include "pulse/tools/replay.hpp"

namespace pulse::cli {

namespace po = boost::program_options;

namespace {

/// Exit code when a --fail-if threshold trips (the report is still printed).
constexpr int kThresholdExit = 4;

constexpr const char* kDiffHelp =
    R"txt(usage: pulse-plan diff OLD NEW [--format table|json|markdown|html] [-o FILE]
                       [--fail-if-slower PCT] [--fail-if-more-traffic PCT]
                       [--color auto|always|never] [--compute-scale F] [--link-scale F]

Compares two plans semantically, typically one model planned for two clusters. First a
headline: how much faster or slower NEW is (samples/s) and why, as device time per sample
(every pipeline device's time over the samples it trains: compute, blocked sends, idle,
exposed all-reduce; it adds up to devices used / samples/s, so it compares across
microbatch sizes and device counts where per-stage times do not). Then the degrees (pp,
dp, microbatches), the placement (stage -> device, pipeline ranks, skips kept local),
every stage's layers, the schedule, predicted time and throughput, the per-sample rows
with the point-to-point bandwidth per link class, traffic (point-to-point, of it skip
tensors, all-reduce) and peak memory per device, old value beside new with the change;
then every layer that moved to another stage or device.

--format table (the default) prints that as aligned text, json as pulse.plan-diff/v1 (--json
is the same; numbers as JSON numbers: seconds, bytes, counts, delta_value in percent),
markdown for a pull-request comment (the headline, the rows that changed, every row and
the moved layers folded in <details>), html as one self-contained page (no script, nothing fetched) with the two plans
side by side, OLD left and NEW right: the schedules' timelines on one time scale, the stage
maps (stage -> device, layers, skip arcs), memory per device against capacity and
point-to-point traffic by link class, each pair on one scale; then every row and the moved
layers. -o FILE writes any format there atomically (nothing is written on an error).

In the table, colour (green better, red worse, yellow changed) only when stdout is a
terminal, unless --color says otherwise; NO_COLOR in the environment turns auto colour off.

For CI, --fail-if-slower PCT exits 4 when NEW's throughput (samples/s) is more than PCT
percent below OLD's, and --fail-if-more-traffic PCT when NEW moves more than PCT percent
more point-to-point bytes per sample. The report is written either way (stdout or -o
FILE), then the reason goes to stderr and diff exits 4: one call gives the artifact and
the red build. Mind the planner's own noise: a recalibration that moved SD2's per-layer
times by 1-5% (its total compute by at most 1.2%) moved the re-searched V100 plan's
throughput by up to 5.4% (docs/plans.md, "The noise floor"), so a gate under about 6%
trips on noise; scripts/noise_floor.py measures it for a model and cluster.

Both plans name their inputs (inputs.model, inputs.cluster: file, profile name, sha256).
Plans that name the same profile file and profile but different sha256 were made from
different contents of it (a recalibrated profile, or one plan is stale): the headline says
"recalibrated" and the inputs rows show both hashes (--allow-changed-inputs, once needed
for this, is accepted and changes nothing). Plans that give the same sha256 under
different names contradict each other: refused (exit 2).

What if: --compute-scale F and --link-scale F first replay both plans, as simulate does on
a plan's own cost model, with every stage time multiplied by F and every link made F times
as fast (transfer and all-reduce times divided by F); the time rows then hold the replayed
figures. Stages, placement and schedules stay the plans' own (plan with the same options
to let the planner choose again). A plan made with scales keeps them: the factors
multiply, and the rows "compute scale" and "link scale" show what each side assumes.

)txt";

constexpr const char* kDiffExamples = R"txt(
examples:
  pulse-plan diff sd2-v100.json sd2-910a.json
  pulse-plan diff old.json new.json --json > diff.json
  pulse-plan diff sd2-v100.json sd2-910a.json --format html -o sd2-move.html
  pulse-plan diff main.json branch.json --format markdown -o diff.md --fail-if-slower 6
  pulse-plan diff sd2-v100.json sd2-910a.json --compute-scale 1.2 --link-scale 0.5

exit codes: 0 report written; 2 bad usage or a plan that cannot be read; 3 internal error;
4 a --fail-if threshold tripped (the report is written, the reason is on stderr).
)txt";

po::options_description diff_options() {
  po::options_description o("options");
  o.add_options()("format", po::value<std::string>()->value_name("NAME")->default_value("table"),
                  "table, json, markdown or html")("json", "the same as --format json")(
      "output,o", po::value<std::string>()->value_name("FILE"),
      "write here (atomically) instead of stdout")(
      "fail-if-slower", po::value<double>()->value_name("PCT"),
      "exit 4 if NEW's samples/s is more than PCT percent below OLD's")(
      "fail-if-more-traffic", po::value<double>()->value_name("PCT"),
      "exit 4 if NEW moves more than PCT percent more P2P bytes per sample")(
      "color", po::value<std::string>()->value_name("WHEN")->default_value("auto"),
      "auto, always or never (the table only)")(
      "compute-scale", po::value<std::string>()->value_name("F"),
      "replay both plans with every stage time x F (0.001 to 1000)")(
      "link-scale", po::value<std::string>()->value_name("F"),
      "replay both plans with every link F times as fast (0.001 to 1000)")(
      "allow-changed-inputs",
      "accepted for old scripts; a recalibrated profile is shown, not refused")("help,h",
                                                                                "this help");
  return o;
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

Result<std::optional<double>> threshold(const po::variables_map& vm, const char* name) {
  if (!vm.count(name)) return std::optional<double>{};
  const double v = vm[name].as<double>();
  if (!std::isfinite(v) || v < 0) {
    return usage_error(fmt::format("diff: --{} must be a percentage >= 0, got {}", name, v));
  }
  return std::optional<double>{v};
}

Result<double> scale(const po::variables_map& vm, const char* name) {
  if (!vm.count(name)) return 1.0;
  const std::string text = vm[name].as<std::string>();
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

// The reasons the thresholds trip, one line each; empty when none does.
std::vector<std::string> tripped(const PlanDiff& d, std::optional<double> slower,
                                 std::optional<double> traffic) {
  std::vector<std::string> out;
  if (slower && d.slowdown_pct > *slower) {
    out.push_back(
        fmt::format("{} is {:.1f}% slower than {} (samples/s), over the "
                    "--fail-if-slower {} threshold",
                    d.new_name, d.slowdown_pct, d.old_name, *slower));
  }
  if (traffic && d.traffic_increase_pct > *traffic) {
    out.push_back(std::isfinite(d.traffic_increase_pct)
                      ? fmt::format("{} moves {:.1f}% more point-to-point bytes per sample than "
                                    "{}, over the --fail-if-more-traffic {} threshold",
                                    d.new_name, d.traffic_increase_pct, d.old_name, *traffic)
                      : fmt::format("{} moves point-to-point bytes, {} moved none "
                                    "(--fail-if-more-traffic {})",
                                    d.new_name, d.old_name, *traffic));
  }
  return out;
}

// The output format: --format, or json for --json; --color only with the table.
Result<std::string> output_format(const po::variables_map& vm) {
  const std::string format = vm["format"].as<std::string>();
  if (format != "table" && format != "json" && format != "markdown" && format != "html") {
    return usage_error(
        fmt::format("diff: --format must be table, json, markdown or html, got \"{}\"", format));
  }
  if (vm.count("json") && !vm["format"].defaulted() && format != "json") {
    return usage_error(
        fmt::format("diff: --json and --format {} ask for two formats; give one of them", format));
  }
  const std::string chosen = vm.count("json") ? "json" : format;
  if (!vm["color"].defaulted() && chosen != "table") {
    return usage_error(fmt::format("diff: --color applies to --format table, not {}", chosen));
  }
  return chosen;
}

}  // namespace

int diff_command(const std::vector<std::string>& args) {
  const po::options_description options = diff_options();
  const SplitArguments split = split_positional(args, options);
  auto vm = parse_options("diff", split.options, options);
  if (!vm) return report(vm.error());
  if (vm->count("help")) {
    std::cout << kDiffHelp << options << kDiffExamples;
    return 0;
  }
  if (split.positional.size() != 2) {
    return report(usage_error(
        fmt::format("diff: expected two plan files, OLD and NEW, got {} (see pulse-plan diff "
                    "--help)",
                    split.positional.size())));
  }
  auto format = output_format(*vm);
  if (!format) return report(format.error());
  const std::string output = vm->count("output") ? (*vm)["output"].as<std::string>() : "-";
  auto color = use_color((*vm)["color"].as<std::string>(), output == "-");
  if (!color) return report(color.error());
  auto slower = threshold(*vm, "fail-if-slower");
  if (!slower) return report(slower.error());
  auto traffic = threshold(*vm, "fail-if-more-traffic");
  if (!traffic) return report(traffic.error());
  auto compute = scale(*vm, "compute-scale");
  if (!compute) return report(compute.error());
  auto links = scale(*vm, "link-scale");
  if (!links) return report(links.error());
  if (auto s = check_output_paths(
          "diff", {{"the old plan", split.positional[0]}, {"the new plan", split.positional[1]}},
          {vm->count("output") ? NamedPath{"-o", output} : NamedPath{"", "-"}});
      !s) {
    return report(s.error());
  }
  auto a = load_plan(split.positional[0]);
  auto b = load_plan(split.positional[1]);
  if (!a || !b) {
    if (!a) report(a.error());
    if (!b) report(b.error());
    return 2;
  }
  if (auto agree = check_inputs_agree(*a, *b); !agree) {
    return report(agree.error());
  }
  if (vm->count("compute-scale") || vm->count("link-scale")) {
    // Both plans replayed under the scaled costs; their figures are what is compared.
    auto ra = replay_plan({&*a, nullptr, *compute, *links});
    auto rb = replay_plan({&*b, nullptr, *compute, *links});
    if (!ra || !rb) {
      if (!ra) report(ra.error());
      if (!rb) report(rb.error());
      return 2;
    }
    a = std::move(ra->figures);
    b = std::move(rb->figures);
  }
  const PlanDiff d = diff_plans({&*a, &*b});
  const std::string text = *format == "json"       ? format_diff_json(d)
                           : *format == "markdown" ? format_diff_markdown(d)
                           : *format == "html"     ? format_diff_html(d, *a, *b)
                                                   : format_diff_table(d, {*color});
  // The report is written even when a gate trips: CI keeps it as the artifact of a red build.
  if (auto written = write_outputs({{output, text}}); !written) return report(written.error());
  const std::vector<std::string> reasons = tripped(d, *slower, *traffic);
  for (const std::string& r : reasons) std::cerr << "pulse-plan: diff: " << r << "\n";
  return reasons.empty() ? 0 : kThresholdExit;
}

}  // namespace pulse::cli
