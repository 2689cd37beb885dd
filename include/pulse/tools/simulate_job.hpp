// The job of `pulse-plan simulate`: a plan replayed by the simulator (replay.hpp), its
// figures reported (simulation_report.hpp) and compared with what the plan predicts. The
// command line (src/cli/simulate_command.cpp) parses its arguments into a SimulateJob by
// simulate_option_table(), calls run_simulate_job and prints what the run says.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pulse/base/options.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/tools/replay.hpp"
#include "pulse/tools/tool_job.hpp"

namespace pulse {

struct SimulateJob {
  std::string plan_path;
  /// --cluster: replay on this cluster's links, all-reduce and memory instead of the plan's.
  std::optional<std::string> cluster_path;
  bool json = false;                       ///< --json: the report as pulse.simulation/v1.
  std::optional<std::string> output_path;  ///< -o; absent: stdout.
  std::optional<std::string> trace_path;   ///< --trace: the replayed timeline, a Chrome trace.
  /// --check: a figure that differs from the plan's is a failing verdict (exit 1), and then
  /// only what goes to stdout is written.
  bool check = false;
  /// False: make the run's texts and write nothing (a library caller that wants them).
  bool write = true;
  NoteSink on_note;  ///< Optional (tool_job.hpp).
};

struct SimulateRun : ToolRun {
  Plan plan;  ///< As read.
  Replay replay;
  std::vector<FigureDifference> differences;  ///< Plan -> replay; empty: it matches.
  std::string report;                         ///< The text or JSON written.
};

/// Every option of the job, in the order `simulate --help` lists them.
const std::vector<JobOption<SimulateJob>>& simulate_option_table();

/// The job of the files and options the command line gave: one plan file, else a usage
/// error.
Result<SimulateJob> read_simulate_job(const std::vector<std::string>& files,
                                      const std::vector<GivenOption>& given);

/// Checks the outputs, reads the plan (and the cluster), replays, reports and writes the
/// report (and the trace): all of them, or with --check and a differing figure only what
/// goes to stdout (verdict 1).
SimulateRun run_simulate_job(const SimulateJob& job);

}  // namespace pulse
