// pulse-plan simulate: a plan file replayed by the simulator, its figures reported and
// compared with what the plan predicts.
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "commands.hpp"
#include "pulse/base/io.hpp"
#include "pulse/base/json_check.hpp"
#include "pulse/base/text.hpp"
#include "pulse/base/units.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/simulate/trace.hpp"
#include "pulse/tools/replay.hpp"
#include "pulse/tools/simulation_report.hpp"

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

po::options_description simulate_options() {
  po::options_description o("options");
  o.add_options()("cluster", po::value<std::string>()->value_name("FILE"),
                  "replay on this cluster's links, all-reduce and memory instead of the plan's")(
      "json", "print the report as JSON (pulse.simulation/v1) instead of text")(
      "output,o", po::value<std::string>()->value_name("FILE"),
      "write the report to FILE instead of stdout (atomically)")(
      "trace", po::value<std::string>()->value_name("FILE"),
      "also write the replayed timeline as a Chrome trace (chrome://tracing, Perfetto)")(
      "check",
      "exit 1 when a figure differs from the plan's predicted ones (then no -o or --trace "
      "file is written)")("help,h", "this help");
  return o;
}

std::string gib(std::int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

std::string text_report(const std::string& name, const Plan& plan, const Replay& r,
                        const std::vector<FigureDifference>& differences) {
  const PlanParallelism& par = plan.parallelism;
  const Evaluation& e = r.evaluation;
  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  line(fmt::format("{}: replayed with {}", name, r.cost_source));
  line(
      fmt::format("  {} {}, pp {} x dp {}, {} stages, microbatch size {}, {} microbatches, "
                  "global batch {}{}",
                  plan.inputs.model.name.empty() ? "plan" : plan.inputs.model.name,
                  plan.options.strategy ? "(" + *plan.options.strategy + ")" : "", par.pp, par.dp,
                  plan.num_stages(), par.microbatch_size, par.num_microbatches, par.global_batch,
                  r.schedule.split_backward ? ", split backward" : ""));
  const double exposed = e.iteration_s - r.timeline.makespan_s;
  line(fmt::format("  iteration   {:>12}  (pipeline {} + exposed all-reduce {})",
                   format_seconds(e.iteration_s), format_seconds(r.timeline.makespan_s),
                   format_seconds(exposed)));
  line(fmt::format("  throughput  {:>12.2f}  samples/s", e.samples_per_s));
  line(fmt::format("  bubble      {:>11.1f}%  of pipeline device time idle", 100 * e.bubble_ratio));
  line("");
  line(
      "  device  compute_s  send_s  idle_s  allreduce_s  in-flight  peak GiB = weights + grads "
      "+ optim + activ + skips  capacity GiB");
  for (int d = 0; d < par.pp; ++d) {
    const DeviceTimeline& t = r.timeline.devices[d];
    const MemoryBreakdown& m = t.peak;
    line(fmt::format(
        "  {:>6}  {:>9.6f}  {:>6.4f}  {:>6.4f}  {:>11.6f}  {:>9}  {:>8} = {:>7} + "
        "{:>5} + {:>5} + {:>5} + {:>5}  {:>12}",
        d, t.compute_s, t.send_s, t.idle_s, e.allreduce[d].seconds, t.max_inflight, gib(m.total()),
        gib(m.weights), gib(m.gradients), gib(m.optimizer), gib(m.activations), gib(m.skip_cache),
        r.capacity_bytes > 0 ? gib(r.capacity_bytes) : "-"));
  }
  for (int d = 0; d < par.pp; ++d) {
    const std::int64_t peak = r.timeline.devices[d].peak.total();
    if (r.capacity_bytes > 0 && peak > r.capacity_bytes) {
      line(fmt::format("  device {} does not fit: peak {} exceeds the usable {} by {}", d,
                       format_bytes(peak), format_bytes(r.capacity_bytes),
                       format_bytes(peak - r.capacity_bytes)));
    }
  }
  line("");
  const PlanComm& comm = r.figures.comm;
  line(fmt::format("  P2P per iteration  {} (activations {}, skips {}, carried {})",
                   format_bytes(comm.p2p_bytes_per_iteration),
                   format_bytes(comm.activation_bytes_per_iteration.value_or(0)),
                   format_bytes(comm.skip_bytes_per_iteration),
                   format_bytes(comm.carried_bytes_per_iteration.value_or(0))));
  std::string classes;
  for (const auto& [cls, bytes] :
       comm.p2p_bytes_per_link_class.value_or(std::map<std::string, std::int64_t>{})) {
    classes += fmt::format("{}{} {}", classes.empty() ? "" : ", ", cls, format_bytes(bytes));
  }
  line(fmt::format("  by link class      {}", classes.empty() ? "none" : classes));
  line(fmt::format("  all-reduce         {}",
                   format_bytes(comm.allreduce_bytes_per_iteration.value_or(0))));
  line("");
  if (differences.empty()) {
    line("  matches the plan's comm and predicted figures");
  } else {
    line(fmt::format("  {} figure{} differ{} from the plan's (plan -> replay):", differences.size(),
                     differences.size() == 1 ? "" : "s", differences.size() == 1 ? "s" : ""));
    for (const FigureDifference& d : differences) {
      line(fmt::format("    {}: {} -> {}", d.path, d.plan, d.replay));
    }
  }
  return printable(out, LineBreaks::keep);  // names from the plan, shown on a terminal
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
  if (split.positional.size() != 1) {
    return report(usage_error(
        fmt::format("simulate: expected one plan file, got {} (see pulse-plan simulate --help)",
                    split.positional.size())));
  }
  const std::string& name = split.positional[0];
  std::vector<NamedPath> inputs = {{"the plan", name}};
  if (vm->count("cluster")) inputs.push_back({"--cluster", (*vm)["cluster"].as<std::string>()});
  std::vector<NamedPath> outputs = {vm->count("output")
                                        ? NamedPath{"-o", (*vm)["output"].as<std::string>()}
                                        : NamedPath{"", "-"}};
  if (vm->count("trace")) outputs.push_back({"--trace", (*vm)["trace"].as<std::string>()});
  if (auto s = check_output_paths("simulate", inputs, outputs); !s) return report(s.error());
  auto text = read_plan_text(name);
  if (!text) return report(text.error());
  auto plan = parse_plan(*text, name);
  std::optional<ClusterProfile> cluster;
  bool failed = !plan;
  if (!plan) report(plan.error());
  if (vm->count("cluster")) {
    auto loaded = load_cluster_profile((*vm)["cluster"].as<std::string>());
    if (!loaded) {
      report(loaded.error());
      failed = true;
    } else {
      cluster = std::move(*loaded);
    }
  }
  if (failed) return 2;

  auto replay = replay_plan({&*plan, cluster ? &*cluster : nullptr});
  if (!replay) return report(replay.error());
  const std::vector<FigureDifference> differences = compare_figures(*plan, replay->figures);
  const std::string body = vm->count("json")
                               ? simulation_report_json(name, *text, *replay, differences)
                               : text_report(name, *plan, *replay, differences);
  // Every output is formatted before any is written; then they appear together or not at
  // all (stdout is written after the files' temporaries, before they are renamed).
  const std::string trace = vm->count("trace")
                                ? chrome_trace(replay->model, replay->timeline,
                                               replay->evaluation.allreduce, plan->parallelism.dp)
                                : "";
  std::vector<Output> files = {{outputs[0].path, body}};
  if (vm->count("trace")) files.push_back({outputs[1].path, trace});
  const bool passed = !vm->count("check") || differences.empty();
  if (!passed) {
    std::cerr << fmt::format(
        "pulse-plan: {}: the replay differs from the plan's predicted figures in {} place{}\n",
        name, differences.size(), differences.size() == 1 ? "" : "s");
  }
  if (auto written = write_verdict_outputs("simulate", files, passed, "--check"); !written) {
    return report(written.error());
  }
  if (!passed) return 1;
  return 0;
}

}  // namespace pulse::cli
