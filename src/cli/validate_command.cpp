// pulse-plan validate: an independent check of a plan against its profiles.
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "pulse/base/text.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/tools/validate.hpp"

namespace pulse::cli {

namespace po = boost::program_options;

SplitArguments split_positional(const std::vector<std::string>& args,
                                const po::options_description& options) {
  SplitArguments out;
  auto takes_value = [&](const std::string& name) {
    const po::option_description* d = options.find_nothrow(name, false, false, false);
    return d != nullptr && d->semantic()->max_tokens() > 0;
  };
  bool rest_positional = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (rest_positional || a == "-" || a.empty() || a[0] != '-') {
      out.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      rest_positional = true;
      continue;
    }
    out.options.push_back(a);
    // "--name VALUE" and "-o VALUE" take the next word; "--name=VALUE" and "-oVALUE" do not.
    const bool is_long = a.rfind("--", 0) == 0;
    const std::string name = is_long ? a.substr(2) : a.substr(0, 2);
    const bool joined = is_long ? a.find('=') != std::string::npos : a.size() > 2;
    if (!joined && takes_value(name) && i + 1 < args.size()) out.options.push_back(args[++i]);
  }
  return out;
}

namespace {

constexpr const char* kValidateHelp =
    R"txt(usage: pulse-plan validate PLAN --model FILE --cluster FILE

Checks a plan (written by pulse-plan plan, by another tool or by hand) against the model
and cluster profiles it claims to come from, independently of the planner: the stage
layout and the pipeline model are rebuilt from the plan's own layer lists, and every
claim is compared with them.

  inputs     the profiles' sha256 against inputs.*.sha256, the device type, cost_model
  degrees    pp x dp within the cluster, global_batch = dp x microbatch_size x microbatches
  layers     every model layer in exactly one stage, in execution order
  placement  stage -> device is the V (2P stages) or the chain (P stages) claimed
  stages     each stage's times, parameters and activation bytes, each device's load
  skips      producer/consumer stage, devices, locality and route of every skip
  transfers  bytes and link times of every point-to-point transfer
  schedule   every op once on its stage's device, one op at a time per device,
             dependencies with their transfer times
  timing     op durations against the cost model, the claimed makespan
  memory     weights, gradients, optimizer state and microbatches in flight within the
             usable memory; predicted peaks
  rank_map   ranks, nodes, local devices and groups consistent with the cluster
  predicted  the plan replayed on the profiles: its comm and predicted figures, the
             solver's makespan, peak and memory curve (a plan with no other violation)
  summary    partition objective, the chosen family and configuration, options given

Each violation is one line on stdout, "PLAN: CHECK: what is wrong"; a valid plan gets
one line "PLAN: valid (...)".

)txt";

constexpr const char* kValidateExamples = R"txt(
examples:
  pulse-plan validate sd2.json --model profiles/models/sd2-unet-512.json \
                               --cluster profiles/clusters/dgx1-v100-32gb-1n.json

exit codes: 0 valid; 1 violations found; 2 bad usage, or a plan or profile that cannot be
read; 3 internal error.
)txt";

po::options_description validate_options() {
  po::options_description o("options");
  o.add_options()("model", po::value<std::string>()->value_name("FILE"),
                  "model profile the plan was made from")(
      "cluster", po::value<std::string>()->value_name("FILE"),
      "cluster profile the plan was made for")("help,h", "this help");
  return o;
}

std::string summary(const Plan& p, const ModelProfile& m, const ClusterProfile& c) {
  int local = 0;
  for (const PlanSkip& s : p.skips) local += s.local ? 1 : 0;
  auto n = [](std::size_t count, const char* one, const char* many) {
    return fmt::format("{} {}", count, count == 1 ? one : many);
  };
  return fmt::format("{} on {}: {} on {}, {}, {}, {}/{} skips local", m.name, c.name,
                     n(p.num_stages(), "stage", "stages"), n(p.pp(), "device", "devices"),
                     n(p.parallelism.num_microbatches, "microbatch", "microbatches"),
                     n(p.num_ops(), "op", "ops"), local, p.skips.size());
}

}  // namespace

int validate_command(const std::vector<std::string>& args) {
  const po::options_description options = validate_options();
  const SplitArguments split = split_positional(args, options);
  auto vm = parse_options("validate", split.options, options);
  if (!vm) return report(vm.error());
  if (vm->count("help")) {
    std::cout << kValidateHelp << options << kValidateExamples;
    return 0;
  }
  if (split.positional.size() != 1) {
    return report(usage_error(
        fmt::format("validate: expected one plan file, got {} (see pulse-plan validate --help)",
                    split.positional.size())));
  }
  for (const char* required : {"model", "cluster"}) {
    if (!vm->count(required)) {
      return report(usage_error(fmt::format(
          "validate: --{} FILE is required (see pulse-plan validate --help)", required)));
    }
  }
  // Structural problems are violations here (exit 1), listed with the others.
  auto plan = load_plan(split.positional[0], PlanCheck::shape_only);
  auto model = load_model_profile((*vm)["model"].as<std::string>());
  auto cluster = load_cluster_profile((*vm)["cluster"].as<std::string>());
  if (!plan || !model || !cluster) {
    if (!plan) report(plan.error());
    if (!model) report(model.error());
    if (!cluster) report(cluster.error());
    return 2;
  }
  const ValidateResult result = validate_plan({&*plan, &*model, &*cluster});
  const std::string name = printable(split.positional[0]);
  for (const std::string& s : result.skipped) {
    std::cerr << fmt::format("pulse-plan: {}: not checked: {}\n", name, s);
  }
  if (result.ok()) {
    std::cout << fmt::format("{}: valid ({})\n", name, printable(summary(*plan, *model, *cluster)));
    return 0;
  }
  for (const Violation& v : result.violations) {
    std::cout << fmt::format("{}: {}: {}\n", name, v.check, v.message);
  }
  std::cout << std::flush;
  std::cerr << fmt::format("pulse-plan: {}: invalid plan: {} violation{}\n", name, result.total,
                           result.total == 1 ? "" : "s");
  return 1;
}

}  // namespace pulse::cli
