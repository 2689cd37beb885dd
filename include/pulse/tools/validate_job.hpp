// The job of `pulse-plan validate`: a plan checked against the profiles it claims to come
// from (validate.hpp), its verdict as lines for stdout. The command line
// (src/cli/validate_command.cpp) parses its arguments into a ValidateJob by
// validate_option_table(), calls run_validate_job and prints what the run says.
#pragma once

#include <string>
#include <vector>

#include "pulse/base/options.hpp"
#include "pulse/tools/tool_job.hpp"
#include "pulse/tools/validate.hpp"

namespace pulse {

struct ValidateJob {
  std::string plan_path;
  std::string model_path;    ///< --model: the profile the plan was made from.
  std::string cluster_path;  ///< --cluster: the profile the plan was made for.
  /// False: make the run's texts and write nothing (a library caller that wants them).
  bool write = true;
  NoteSink on_note;  ///< Optional (tool_job.hpp).
};

struct ValidateRun : ToolRun {
  ValidateResult result;
  /// Written to stdout: "PLAN: valid (...)", or one line per violation listed,
  /// "PLAN: CHECK: what is wrong". Empty when the files could not be read.
  std::string report;
};

/// Every option of the job, in the order `validate --help` lists them.
const std::vector<JobOption<ValidateJob>>& validate_option_table();

/// The job of the files and options the command line gave: one plan file, --model and
/// --cluster, else a usage error.
Result<ValidateJob> read_validate_job(const std::vector<std::string>& files,
                                      const std::vector<GivenOption>& given);

/// Reads the three files (every problem reported) and checks the plan: a note for each
/// check that could not run, then the report written to stdout, then with a violation the
/// note "PLAN: invalid plan: N violations" and verdict 1. A plan's structural problems are
/// violations here, listed with the others.
ValidateRun run_validate_job(const ValidateJob& job);

}  // namespace pulse
