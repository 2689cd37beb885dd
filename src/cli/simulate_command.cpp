// pulse-plan simulate: a plan file replayed by the simulator, its figures reported and
// compared with what the plan predicts.
// The options are the library's table and the job the library's run_simulate_job
// (tools/simulate_job.hpp): this file parses, calls and prints.
#include <iostream>

#include "commands.hpp"
#include "pulse/tools/simulate_job.hpp"

namespace pulse::cli {

namespace po = boost::program_options;

namespace {

constexpr const char* kSimulateHelp =
    R"txt(usage: pulse-plan simulate PLAN [--cluster FILE] [--json] [-o FILE] [--trace FILE] [--check]

Replays a plan (written by pulse-plan plan, by another tool or edited by hand) on the
cost model with the same event-driven simulator the planner uses, and reports what it
measures: iteration time, samples/s, bubble ratio; per device compute, blocked-send and
idle time, the gradient all-reduce and how much of it sticks out past the pipeline, peak
memory with its breakdown (weights, gradients, optimizer state, activations in flight,
skip cache); point-to-point bytes by kind and by link class. Then it compares every
figure with the plan's own `comm` and `predicted` blocks.

What is replayed is what the plan states: its stages with their forward/backward times,
its transfers with their bytes and link times, its skips and its per-device schedule.
Every op starts when its device is free and its inputs have arrived; a transfer occupies
the link between its two devices for latency x messages + bytes / bandwidth, and
transfers that meet on one link (one direction of one device pair) wait their turn;
with overlap_comm the sender computes on while it sends, otherwise it blocks. Each
device's gradient all-reduce starts after its last backward, so the part that overlaps
other devices' ramp-down is hidden.

Without --cluster the plan's own cost_model block (overlap, all-reduce algorithm), link
times and all-reduce times are used, and an untouched plan replays to exactly its
predicted figures. With --cluster FILE the transfers are timed on that cluster's links
between the plan's ranks, and the all-reduce, overlap and memory capacity come from that
cluster: how the same plan does on other links (a cluster of another device type is an
error: stage times are per device type, plan again). A plan made with --link-scale F
(cost_model.link_scale) is timed on the cluster's links made F times as fast.

)txt";

constexpr const char* kSimulateExamples = R"txt(
examples:
  pulse-plan simulate sd2.json
  pulse-plan simulate sd2.json --check                       # CI: exit 1 unless it matches
  pulse-plan simulate sd2.json --cluster profiles/clusters/dgx1-v100-16gb-4n.json
  pulse-plan simulate sd2.json --json -o sd2-sim.json --trace sd2-trace.json

exit codes: 0 replayed (figures printed); 1 with --check: a figure differs from the plan's;
2 bad usage, or a plan or cluster that cannot be read or replayed; 3 internal error.
)txt";

// The job's options (the library's table), then the command line's own.
po::options_description simulate_options() {
  po::options_description o = options_from(simulate_option_table());
  o.add_options()("help,h", "this help");
  return o;
}

}  // namespace

int simulate_command(const std::vector<std::string>& args) {
  const po::options_description options = simulate_options();
  const SplitArguments split = split_positional(args, options);
  auto vm = parse_options("simulate", split.options, options);
  if (!vm) return report(vm.error());
  if (vm->count("help")) {
    std::cout << kSimulateHelp << options << kSimulateExamples;
    return 0;
  }
  auto job = read_simulate_job(split.positional, given_options(*vm, simulate_option_table()));
  if (!job) return report(job.error());
  job->on_note = print_note;
  const SimulateRun run = run_simulate_job(*job);
  return report_all(run.errors, run.exit_code());
}

}  // namespace pulse::cli
