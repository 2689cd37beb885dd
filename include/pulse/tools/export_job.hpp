// The job of `pulse-plan export`: a plan written in another format (export.hpp): PyTorch's
// schedule CSV with its side file, Graphviz or an HTML page. The command line
// (src/cli/export_command.cpp) parses its arguments into an ExportJob by
// export_option_table(), calls run_export_job and prints what the run says.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pulse/base/options.hpp"
#include "pulse/tools/export.hpp"
#include "pulse/tools/tool_job.hpp"

namespace pulse {

struct ExportJob {
  std::string plan_path;
  std::string format;                      ///< --format: a name of export_formats().
  std::optional<std::string> output_path;  ///< -o; absent: stdout.
  /// torch-csv: --stages, the side file; absent: beside -o FILE (out.csv -> out.stages.json),
  /// none when the CSV goes to stdout.
  std::optional<std::string> stages_path;
  std::optional<std::string> model_path;   ///< dot: --model, for layer kinds and parameters.
  std::vector<std::string> compare_paths;  ///< html: --compare, plans shown beside the plan.
  /// False: make the run's texts and write nothing (a library caller that wants them).
  bool write = true;
  NoteSink on_note;  ///< Optional (tool_job.hpp).
};

struct ExportRun : ToolRun {
  Plan plan;              ///< As read.
  std::string document;   ///< What went to -o FILE or stdout.
  std::string side_file;  ///< torch-csv: the side file's text, when one is written.
};

/// Every option of the job, in the order `export --help` lists them.
const std::vector<JobOption<ExportJob>>& export_option_table();

/// The job of the files and options the command line gave: one plan file and --format, else
/// a usage error.
Result<ExportJob> read_export_job(const std::vector<std::string>& files,
                                  const std::vector<GivenOption>& given);

/// Checks the format, the options only another format takes and the outputs; reads the plan
/// (then --compare's plans, or --model), each problem ending the job; writes the document
/// (and torch-csv's side file: both or neither).
ExportRun run_export_job(const ExportJob& job);

}  // namespace pulse
