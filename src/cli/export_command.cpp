// pulse-plan export: a plan as a PyTorch schedule CSV, a Graphviz graph or an HTML report.
// The options are the library's table and the job the library's run_export_job
// (tools/export_job.hpp): this file parses, calls and prints.
#include <iostream>

#include "commands.hpp"
#include "pulse/tools/export_job.hpp"

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

// The job's options (the library's table), then the command line's own.
po::options_description export_options() {
  po::options_description o = options_from(export_option_table());
  o.add_options()("help,h", "this help");
  return o;
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
  auto job = read_export_job(split.positional, given_options(*vm, export_option_table()));
  if (!job) return report(job.error());
  job->on_note = print_note;
  const ExportRun run = run_export_job(*job);
  return report_all(run.errors, run.exit_code());
}

}  // namespace pulse::cli
