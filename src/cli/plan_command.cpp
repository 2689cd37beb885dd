// pulse-plan plan: profiles in, plan JSON out.
#include <cmath>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "pulse/compile/compile.hpp"
#include "pulse/base/io.hpp"
#include "pulse/base/process.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/profile/scaling.hpp"
#include "pulse/tools/trace.hpp"
#include "pulse/base/units.hpp"
#include "pulse/base/defaults.hpp"

namespace pulse::cli {

namespace po = boost::program_options;

namespace {

constexpr const char* kPlanHelp = R"(usage: pulse-plan plan --model FILE --cluster FILE [options]

Compiles a model profile and a cluster profile into a plan: stages and their layers, the
device of every stage, the per-device operation order with predicted times, where every
skip tensor lives, the PP/DP/microbatch degrees, a rank map and predicted throughput,
bubble, memory and traffic. The plan goes to stdout, or atomically to -o FILE; a one-line
summary goes to stderr.

Strategies (all evaluated by the same engine, so their figures compare):
  pulse        2P stages in a V: stage d and stage 2P-1-d on device d, cut so that every
               long skip stays on its device; synthesized schedule (the default)
  v-naive      the same V, cut to balance compute while ignoring skips; skips that end
               up on other devices are sent there
  1f1b         P stages in a row, skip tensors relayed through every stage boundary
               between producer and consumer (as chain-only runtimes do); 1F1B schedule.
               "sequential" is accepted for it
  1f1b-direct  P stages in a row, skip tensors sent straight to the consumer's stage; 1F1B
  gpipe        as 1f1b, with the GPipe schedule (every forward, then every backward)

Tuning: whatever of --pp, --dp and --microbatch-size is not given is searched. Every
pipeline degree that divides the cluster (or fits beside --dp), with the data-parallel
degree filling the cluster, at every power-of-two microbatch size the profile covers, is
planned with a cheap schedule; the best three get the full schedule synthesis and the
fastest wins. Pipelines are placed on the fastest links (an NVLink-connected set on a
DGX-1, an HCCS group on an Ascend 910A server), ordered so the boundaries that move the
most bytes get the strongest links; replicas spread over nodes. The plan's "search" lists
every configuration with its figures or the reason it lost; --explain prints them.

What if the profiles are off: --compute-scale F plans with every compute time of the
cluster's device type multiplied by F (range-low and range-high: the ends of the time range
the model profile states for that device type), --link-scale F with every link F times as
fast (bandwidth x F, latency / F). The plan records both (options, cost_model) beside the
unscaled files' hashes; simulate and validate replay and check it with them.

)";

constexpr const char* kPlanExamples = R"(
examples:
  pulse-plan plan --model profiles/models/tiny-unet.json \
                  --cluster profiles/clusters/dgx1-v100-32gb-1n.json
  pulse-plan plan --model profiles/models/sd2-unet-512.json \
                  --cluster profiles/clusters/dgx1-v100-32gb-1n.json --pp 4 -o sd2.json
  pulse-plan plan ... --strategy sequential --pp 4 -o sd2-seq.json   # the baseline
  pulse-plan plan ... --compute-scale range-high --link-scale 0.5   # slower devices, links

exit codes: 0 plan written; 1 no feasible plan (the message says what does not fit, by how
much, on which device); 2 bad usage or bad input (nothing written); 3 internal error.
)";

po::options_description plan_options() {
  po::options_description o("options");
  // One statement per option: a chained add_options() call does not survive clang-format.
  auto add = o.add_options();
  add("model", po::value<std::string>()->value_name("FILE"), "model profile (pulse.model/v1)");
  add("cluster", po::value<std::string>()->value_name("FILE"),
      "cluster profile (pulse.cluster/v1)");
  add("strategy", po::value<std::string>()->value_name("NAME")->default_value("pulse"),
      "pulse, v-naive, 1f1b, 1f1b-direct or gpipe");
  add("family", po::value<std::string>()->value_name("NAME"),
      "pulse only: plan this one family (v, v-released, w2, w2-released, w3, w3-released, "
      "chain, chain-relayed, v-naive, 1f1b, 1f1b-direct, gpipe) instead of searching them all");
  add("pp", po::value<int>()->value_name("N"), "pipeline degree (default: search)");
  add("dp", po::value<int>()->value_name("N"), "data-parallel degree (default: devices / pp)");
  add("microbatch-size", po::value<int>()->value_name("B"),
      "samples per microbatch (default: search)");
  add("global-batch", po::value<int>()->value_name("G"),
      fmt::format("samples per iteration (default: {} per device)", kDefaultSamplesPerDevice)
          .c_str());
  add("zero", po::value<int>()->value_name("0|1")->default_value(0),
      "1: shard optimizer state over the data-parallel replicas (ZeRO-1)");
  add("split-backward", "backward as input-gradient (I) and weight-gradient (W) ops");
  add("compute-scale", po::value<std::string>()->value_name("F"),
      "multiply every compute time of the cluster's device type by F (0.001 to 1000), or by "
      "an end of the profile's time range: range-low, range-high");
  add("link-scale", po::value<std::string>()->value_name("F"),
      "make every link F times as fast (0.001 to 1000: bandwidth x F, latency / F)");
  add("activation-budget", po::value<std::string>()->value_name("BYTES|FRACTION"),
      "cap on each device's activation memory: bytes (8589934592, 8GiB, 512MiB) or a "
      "fraction of the device's usable memory in (0, 1], written with a decimal point (0.5, "
      "1.0; a bare 1 is one byte); default: what the device leaves");
  add("solver-nodes", po::value<int>()->value_name("N")->default_value(kDefaultSolverNodes),
      "branch-and-bound nodes per integer program (the deterministic work limit)");
  add("solver-time-limit", po::value<double>()->value_name("S")->default_value(kDefaultSolverSeconds),
      "wall-clock safety limit of the schedule search, seconds (0: list schedules only)");
  add("output,o", po::value<std::string>()->value_name("FILE"),
      "write the plan here (atomically, with --trace: both or neither) instead of stdout; - "
      "is stdout");
  add("trace", po::value<std::string>()->value_name("FILE"),
      "also write the simulated timeline as a Chrome trace (chrome://tracing, Perfetto)");
  add("stats", "print the time of each pass on stderr");
  add("explain", "print every configuration tried, and why each lost, on stderr");
  add("exhaustive",
      "give every configuration the full schedule synthesis (slow; for checking "
      "the tuner)");
  add("quiet,q", "no summary line on stderr");
  add("help,h", "this help");
  return o;
}

// --compute-scale and --link-scale as given; range words are resolved once the model is
// loaded (resolve_compute_scale).
Result<CostScales> read_scales(const po::variables_map& vm) {
  CostScales scales;
  if (vm.count("compute-scale")) {
    auto parsed = parse_compute_scale(vm["compute-scale"].as<std::string>());
    if (!parsed) return usage_error("plan: " + parsed.error().message);
    scales = *parsed;
  }
  if (vm.count("link-scale")) {
    const std::string text = vm["link-scale"].as<std::string>();
    const std::optional<double> links = parse_scale(text);
    if (!links) {
      return usage_error(
          fmt::format("plan: --link-scale must be a positive, finite number, got \"{}\"", text));
    }
    scales.links = *links;
    if (auto s = check_scale_limit("plan", "--link-scale", *links); !s) return s.error();
  }
  return scales;
}

// --activation-budget: a byte count, bare or with a binary unit, or a fraction of the
// device's usable memory written with a decimal point. Anything else is a usage error.
Status read_activation_budget(const std::string& text, PlanOptions& o) {
  const Error bad = usage_error(fmt::format(
      "plan: --activation-budget must be a byte count (such as 8589934592 or 8GiB) or a "
      "fraction of the device's usable memory in (0, 1] with a decimal point (such as 0.5), "
      "got \"{}\"",
      text));
  if (text.find_first_of(".eE") != std::string::npos) {
    char* end = nullptr;
    const double f = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(f > 0 && f <= 1)) return bad;
    o.activation_budget_fraction = f;
    return Ok{};
  }
  const std::size_t digits = text.find_first_not_of("0123456789");
  if (text.empty() || digits == 0 || text.size() > 24) return bad;
  const std::string unit = digits == std::string::npos ? "" : text.substr(digits);
  const std::pair<const char*, int> units[] = {{"", 0}, {"B", 0}, {"KiB", 10}, {"MiB", 20},
                                               {"GiB", 30}, {"TiB", 40}};
  for (const auto& [name, shift] : units) {
    if (unit != name) continue;
    const long double count = std::strtold(text.substr(0, digits).c_str(), nullptr);
    const long double bytes = count * std::pow(2.0L, shift);
    if (bytes < 1 || bytes > 9.0e18L) return bad;
    o.activation_budget_bytes = static_cast<std::int64_t>(bytes);
    return Ok{};
  }
  return bad;
}

Result<PlanOptions> read_options(const po::variables_map& vm) {
  PlanOptions o;
  const std::string strategy = vm["strategy"].as<std::string>();
  if (const auto s = parse_strategy(strategy)) {
    o.strategy = *s;
  } else {
    return usage_error(
        fmt::format("plan: --strategy must be one of {} (sequential means 1f1b), got \"{}\"",
                    strategy_names(), strategy));
  }
  auto positive = [&](const char* name) -> Result<std::optional<int>> {
    if (!vm.count(name)) return std::optional<int>{};
    const int v = vm[name].as<int>();
    if (v < 1) return usage_error(fmt::format("plan: --{} must be at least 1, got {}", name, v));
    return std::optional<int>{v};
  };
  for (const char* name : {"pp", "dp", "microbatch-size", "global-batch"}) {
    auto v = positive(name);
    if (!v) return v.error();
  }
  o.pp = *positive("pp");
  o.dp = *positive("dp");
  o.microbatch_size = *positive("microbatch-size");
  o.global_batch = *positive("global-batch");
  const int zero = vm["zero"].as<int>();
  if (zero != 0 && zero != 1) {
    return usage_error(fmt::format("plan: --zero must be 0 or 1, got {}", zero));
  }
  o.memory.zero_stage = zero;
  if (vm.count("family")) {
    if (o.strategy != Strategy::pulse) {
      return usage_error(fmt::format("plan: --family applies to --strategy pulse, not {}",
                                     strategy_name(o.strategy)));
    }
    o.family = vm["family"].as<std::string>();
  }
  o.split_backward = vm.count("split-backward") > 0;
  if (vm.count("activation-budget")) {
    if (auto ok = read_activation_budget(vm["activation-budget"].as<std::string>(), o); !ok) {
      return ok.error();
    }
  }
  if (vm.count("exhaustive")) o.tuner_top_k = 0;
  o.solver_max_nodes = vm["solver-nodes"].as<int>();
  o.solver_max_seconds = vm["solver-time-limit"].as<double>();
  if (o.solver_max_nodes < 0 || !(o.solver_max_seconds >= 0)) {
    return usage_error("plan: --solver-nodes and --solver-time-limit must not be negative");
  }
  return o;
}

// What was tried, best first, and why each configuration lost.
std::string explanation(const CompiledPlan& p) {
  std::string out = fmt::format("{:>4} {:>5} {:>5} {:>5}  {:>11}  {:>11}  {:>10}  {}\n", "pp", "dp",
                                "mb", "M", "samples/s", "iteration", "peak mem", "verdict");
  for (const Candidate& c : p.candidates) {
    const std::string figures =
        c.feasible ? fmt::format("{:>11.2f}  {:>11}  {:>10}", c.samples_per_s,
                                 format_seconds(c.iteration_s), format_bytes(c.peak_memory_bytes))
                   : fmt::format("{:>11}  {:>11}  {:>10}", "-", "-", "-");
    out += fmt::format("{:>4} {:>5} {:>5} {:>5}  {}  {}\n", c.pp, c.dp, c.microbatch_size,
                       c.num_microbatches, figures, c.chosen ? "chosen" : c.reason);
  }
  return out;
}

std::string summary(const CompiledPlan& p, const ModelProfile& m, const ClusterProfile& c,
                    const CostScales& scales) {
  int local = 0;
  for (const SkipPlacement& s : p.model.skips) local += s.local ? 1 : 0;
  std::string scaled;
  if (!scales.identity()) {
    scaled = fmt::format(", compute x{:g}{}, links x{:g}", scales.compute,
                         scales.compute_from.empty() ? "" : " (" + scales.compute_from + ")",
                         scales.links);
  }
  return fmt::format(
      "{} on {} ({}): pp {} x dp {}, {} stages{}, microbatch {} x {}, {}/{} skips local, "
      "iteration {} ({:.1f} samples/s), bubble {:.1f}%{}",
      m.name, c.name, strategy_name(p.strategy), p.pp, p.dp, p.model.layout.num_stages(),
      p.strategy == Strategy::pulse ? fmt::format(" ({})", p.family->name) : "",
      p.microbatch_size, p.num_microbatches, local, p.model.skips.size(),
      format_seconds(p.evaluation.iteration_s), p.evaluation.samples_per_s,
      100.0 * p.evaluation.bubble_ratio, scaled);
}

// The plan's output (-o, or stdout without it) first, then --trace when given.
std::vector<NamedPath> output_paths(const po::variables_map& vm) {
  std::vector<NamedPath> out = {vm.count("output") ? NamedPath{"-o", vm["output"].as<std::string>()}
                                                   : NamedPath{"", "-"}};
  if (vm.count("trace")) out.push_back({"--trace", vm["trace"].as<std::string>()});
  return out;
}

}  // namespace

int plan_command(const std::vector<std::string>& args) {
  const po::options_description options = plan_options();
  auto vm = parse_options("plan", args, options);
  if (!vm) return report(vm.error());
  if (vm->count("help")) {
    std::cout << kPlanHelp << options << kPlanExamples;
    return 0;
  }
  for (const char* required : {"model", "cluster"}) {
    if (!vm->count(required)) {
      return report(
          usage_error(fmt::format("plan: --{} FILE is required (see pulse-plan plan "
                                  "--help)",
                                  required)));
    }
  }
  auto plan_options = read_options(*vm);
  if (!plan_options) return report(plan_options.error());
  auto scales = read_scales(*vm);
  if (!scales) return report(scales.error());
  const std::string model_path = (*vm)["model"].as<std::string>();
  const std::string cluster_path = (*vm)["cluster"].as<std::string>();
  const std::vector<NamedPath> outputs = output_paths(*vm);
  if (auto s = check_output_paths("plan", {{"--model", model_path}, {"--cluster", cluster_path}},
                                  outputs);
      !s) {
    return report(s.error());
  }

  PassClock clock;
  auto model = load_model_profile(model_path);
  auto cluster = load_cluster_profile(cluster_path);
  if (!model || !cluster) {
    // Report both files' problems in one run.
    if (!model) report(model.error());
    if (!cluster) report(cluster.error());
    return 2;
  }
  if (auto resolved = resolve_compute_scale(*scales, *model, cluster->device_type); !resolved) {
    return report({resolved.error().kind, "plan: " + resolved.error().message});
  }
  if (auto s = check_scale_limit("plan", "--compute-scale", scales->compute); !s) {
    return report(s.error());
  }
  // The plan is made from the scaled profiles and names the files as they are.
  apply_scales(*scales, *model, *cluster);
  clock.lap("load");
  if (stderr_is_terminal() && !vm->count("quiet")) {
    plan_options->progress = [](int done, int total) {
      terminal_stderr() << fmt::format("\rpulse-plan: tuning, {}/{} configurations", done, total)
                        << (done == total ? "\r\033[K" : "") << std::flush;
    };
  }
  auto plan = compile_plan(*model, *cluster, *plan_options, &clock);
  if (!plan) return report(plan.error());

  // Every output is made before any is written; then they appear together or not at all.
  Plan document = build_plan(*plan, *model, *cluster, *scales);
  document.file = outputs[0].path == "-" ? "stdout" : outputs[0].path;
  const auto text = encode_plan(document);
  if (!text) return report(text.error());
  const std::string trace = vm->count("trace") ? chrome_trace(plan->model, plan->timeline,
                                                              plan->evaluation.allreduce, plan->dp)
                                               : "";
  std::vector<Output> files = {{outputs[0].path, *text}};
  if (vm->count("trace")) files.push_back({outputs[1].path, trace});
  if (auto written = write_outputs(files); !written) return report(written.error());
  clock.lap("write");
  if (!vm->count("quiet")) {
    std::cerr << "pulse-plan: " << summary(*plan, *model, *cluster, *scales) << "\n";
  }
  if (vm->count("explain")) std::cerr << explanation(*plan);
  if (plan->safety_limit_hits > 0) {
    std::cerr << fmt::format(
        "pulse-plan: warning: the wall-clock safety limit (--solver-time-limit {} s) stopped {} "
        "schedule search(es) before their work limits; this plan may differ from run to run "
        "(raise the limit)\n",
        plan->options.solver_max_seconds, plan->safety_limit_hits);
  }
  if (vm->count("stats")) {
    for (const PassTime& t : clock.times()) {
      std::cerr << fmt::format("  {:<15} {:>10}  {:>6} runs, longest {}\n", t.pass,
                               format_seconds(t.seconds), t.runs, format_seconds(t.longest_s));
    }
  }
  return 0;
}

}  // namespace pulse::cli
