// The job of `pulse-plan diff`: two plans compared (diff.hpp), optionally both replayed under
// scaled costs first (replay.hpp), the report written in one of four formats, and CI's
// thresholds held against it. The command line (src/cli/diff_command.cpp) parses its
// arguments into a DiffJob by diff_option_table(), calls run_diff_job and prints what the
// run says.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pulse/base/options.hpp"
#include "pulse/tools/diff.hpp"
#include "pulse/tools/tool_job.hpp"

namespace pulse {

/// The exit code of a diff whose threshold trips (the report is still written).
inline constexpr int kDiffThresholdExit = 4;

struct DiffJob {
  std::string old_path;
  std::string new_path;
  /// --format: table, json, markdown or html; absent: table (json with --json).
  std::optional<std::string> format;
  bool json = false;                       ///< --json: the same as --format json.
  std::optional<std::string> output_path;  ///< -o; absent: stdout.
  /// --fail-if-slower PCT: verdict 4 when NEW's samples/s is more than PCT percent below
  /// OLD's; --fail-if-more-traffic PCT when NEW moves more than PCT percent more
  /// point-to-point bytes per sample. Percentages >= 0.
  std::optional<double> fail_if_slower_pct;
  std::optional<double> fail_if_more_traffic_pct;
  /// --color: auto, always or never (the table only); absent: auto, which colours only a
  /// table going to a terminal, with NO_COLOR unset and TERM not "dumb".
  std::optional<std::string> color;
  /// --compute-scale F, --link-scale F: replay both plans with every stage time x F and
  /// every link F times as fast first, F a positive number within base/limits.hpp's bounds.
  std::optional<std::string> compute_scale;
  std::optional<std::string> link_scale;
  bool allow_changed_inputs = false;  ///< Accepted for old scripts; changes nothing.
  /// False: make the run's texts and write nothing (a library caller that wants them).
  bool write = true;
  NoteSink on_note;  ///< Optional (tool_job.hpp).
};

struct DiffRun : ToolRun {
  Plan old_plan;  ///< As compared: replayed under the scales when the job gives any.
  Plan new_plan;
  PlanDiff diff;
  std::string report;  ///< What was written, in the format asked for.
};

/// Every option of the job, in the order `diff --help` lists them.
const std::vector<JobOption<DiffJob>>& diff_option_table();

/// The job of the files and options the command line gave: two plan files, OLD and NEW,
/// else a usage error.
Result<DiffJob> read_diff_job(const std::vector<std::string>& files,
                              const std::vector<GivenOption>& given);

/// Checks the options and the output, reads both plans (every problem reported), checks that
/// their inputs agree, replays them when scaled, compares and writes the report; then each
/// threshold that trips is a note ("diff: NEW is 7.0% slower ...") and verdict 4.
DiffRun run_diff_job(const DiffJob& job);

}  // namespace pulse
