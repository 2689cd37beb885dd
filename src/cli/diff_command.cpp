// pulse-plan diff: two plans side by side, with CI switches. The options are the library's
// table and the job the library's run_diff_job (tools/diff_job.hpp): this file parses, calls
// and prints.
#include <iostream>

#include "commands.hpp"
#include "pulse/tools/diff_job.hpp"

namespace pulse::cli {

namespace po = boost::program_options;

namespace {

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

// The job's options (the library's table), then the command line's own.
po::options_description diff_options() {
  po::options_description o = options_from(diff_option_table());
  o.add_options()("help,h", "this help");
  return o;
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
  auto job = read_diff_job(split.positional, given_options(*vm, diff_option_table()));
  if (!job) return report(job.error());
  job->on_note = print_note;
  const DiffRun run = run_diff_job(*job);
  return report_all(run.errors, run.exit_code());
}

}  // namespace pulse::cli
