// pulse-plan validate: an independent check of a plan against its profiles. The options are
// the library's table and the job the library's run_validate_job (tools/validate_job.hpp):
// this file parses, calls and prints.
#include <iostream>

#include "commands.hpp"
#include "pulse/tools/validate_job.hpp"

namespace pulse::cli {

namespace po = boost::program_options;

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

// The job's options (the library's table), then the command line's own.
po::options_description validate_options() {
  po::options_description o = options_from(validate_option_table());
  o.add_options()("help,h", "this help");
  return o;
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
  auto job = read_validate_job(split.positional, given_options(*vm, validate_option_table()));
  if (!job) return report(job.error());
  job->on_note = print_note;
  const ValidateRun run = run_validate_job(*job);
  return report_all(run.errors, run.exit_code());
}

}  // namespace pulse::cli
