// pulse-plan plan: profiles in, plan JSON out. The options are the library's table
// (compile/plan_options.hpp) and the job is the library's run_plan_job (compile/plan_job.hpp):
// this file parses, calls and prints.
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "pulse/base/process.hpp"
#include "pulse/base/units.hpp"
#include "pulse/compile/plan_job.hpp"
#include "pulse/compile/plan_options.hpp"

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
fastest wins (--exhaustive gives every configuration the full synthesis: a check of that
shortcut, which on the shipped models gives the same plan, only slower). Devices beyond pp x
dp stay idle: --pp 3 on 8 devices plans dp 2 on 6 and lists the other 2 in
rank_map.unused_ranks.

A given cut: --cuts L1,L2,... names the first layer of each stage after the first (S - 1
names for S stages), --partition-from PLAN takes them from a plan's stages (one edited by
hand, or made for another cluster). The cut is kept and re-costed on this cluster; pp
follows from S (2P stages for the V families, P for a chain); placement, dp, microbatch size
and schedule are still searched. The plan records the cut (options.cuts) and says
partition.method "given". Pipelines are placed on the fastest links (an NVLink-connected set on a
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

// The job's options (the library's table), then the command line's own: what it prints.
po::options_description plan_options() {
  po::options_description o = options_from(plan_option_table());
  auto add = o.add_options();
  add("stats", "print the time of each pass on stderr");
  add("explain", "print every configuration tried, and why each lost, on stderr");
  add("quiet,q", "no summary line on stderr");
  add("help,h", "this help");
  return o;
}

// What was tried, best first, and why each configuration lost.
std::string explanation(const CompiledPlan& p) {
  std::string out = fmt::format("{:>4} {:>5} {:>5} {:>5}  {:>11}  {:>11}  {:>10}  {}\n", "pp", "dp",
                                "mb", "M", "samples/s", "iteration", "peak mem", "verdict");
  for (const Candidate& c : p.candidates) {
    const std::string figures =
        c.feasible ? fmt::format("{:>11.2f}  {:>11}  {:>10}", *c.samples_per_s,
                                 format_seconds(*c.iteration_s), format_bytes(*c.peak_memory_bytes))
                   : fmt::format("{:>11}  {:>11}  {:>10}", "-", "-", "-");
    out += fmt::format("{:>4} {:>5} {:>5} {:>5}  {}  {}\n", c.pp, c.dp, c.microbatch_size,
                       c.num_microbatches, figures, c.chosen ? "chosen" : c.reason.value_or(""));
  }
  return out;
}

void print_stats(const std::vector<PassTime>& times) {
  for (const PassTime& t : times) {
    std::cerr << fmt::format("  {:<15} {:>10}  {:>6} runs, longest {}\n", t.pass,
                             format_seconds(t.seconds), t.runs, format_seconds(t.longest_s));
  }
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
  auto job = read_plan_job(given_options(*vm, plan_option_table()));
  if (!job) return report(job.error());
  const bool quiet = vm->count("quiet") > 0;
  if (stderr_is_terminal() && !quiet) {
    job->options.progress = [](int done, int total) {
      terminal_stderr() << fmt::format("\rpulse-plan: tuning, {}/{} configurations", done, total)
                        << (done == total ? "\r\033[K" : "") << std::flush;
    };
  }
  const PlanRun run = run_plan_job(*job);
  for (const Error& e : run.errors) report(e);
  if (!run.ok()) return exit_code(run.errors.front().kind);
  if (!quiet) std::cerr << "pulse-plan: " << run.summary << "\n";
  if (vm->count("explain")) std::cerr << explanation(run.compiled);
  for (const std::string& w : run.warnings) std::cerr << "pulse-plan: warning: " << w << "\n";
  if (vm->count("stats")) print_stats(run.pass_times);
  return 0;
}

}  // namespace pulse::cli
