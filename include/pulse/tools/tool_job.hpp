// What the tools' jobs share (simulate_job.hpp, validate_job.hpp, diff_job.hpp,
// export_job.hpp): the run's record of what went wrong and what to tell the user, and the
// preamble every one of them starts with, written once: the outputs checked against the
// inputs, then the plans and the profiles read.
//
// A tool's job is what `pulse-plan plan`'s is (compile/plan_job.hpp): a record of the files
// and the options in, a run out; the command line parses its arguments into the job by the
// job's option table (base/options.hpp), calls the job and prints what the run says. A
// library caller calls the same function.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pulse/base/io.hpp"
#include "pulse/base/result.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// Called with each note of a job as it arises, before the outputs that follow it are
/// written: the command line prints it on stderr, so that on a terminal a note comes before
/// the output it is about. The run keeps every note too.
using NoteSink = std::function<void(const std::string& note)>;

/// What every tool's run says besides what it made.
struct ToolRun {
  /// Empty when the job did its work. Otherwise every problem found before the job stopped
  /// (each file's, where several are read at once); the first decides the exit code.
  std::vector<Error> errors;
  /// Lines for stderr, without the "pulse-plan: " the command line puts before them, in the
  /// order they arose: what was not written and why, what was not checked.
  std::vector<std::string> notes;
  /// The exit code of a job that did its work but whose verdict fails: 1 (simulate --check
  /// with a differing figure, validate with a violation), 4 (a diff threshold); else 0.
  int verdict = 0;

  bool ok() const { return errors.empty(); }
  /// The process's exit code: the first error's, else the verdict.
  int exit_code() const;
  /// Keeps `note` and hands it to `sink` when there is one.
  void note(std::string note, const NoteSink& sink);
};

/// How a job reads its files when more than one can be wrong.
enum class Reading {
  every_problem,     ///< Every file is read and every problem reported (validate, diff).
  first_problem,     ///< In order; the first problem ends the job (export).
  plan_bytes_first,  ///< The plan's bytes first, a problem there ends the job; then the rest,
                     ///< every problem reported (simulate, whose report hashes those bytes).
};

/// The files of a tool's job.
struct ToolFiles {
  const char* command = "";  ///< "simulate", for messages.
  /// The plans, in the order they are read: each named for messages ("the plan", "the old
  /// plan", "--compare").
  std::vector<NamedPath> plans;
  PlanCheck plan_check = PlanCheck::structure;
  std::optional<std::string> model_path;    ///< --model, read after the plans.
  std::optional<std::string> cluster_path;  ///< --cluster, read after the model.
  /// Where the job writes: held to check_output_paths (base/io.hpp) before anything is read.
  std::vector<NamedPath> outputs;
  Reading reading = Reading::every_problem;
};

/// The files read.
struct ToolInputs {
  std::vector<Plan> plans;             ///< In the order of ToolFiles::plans.
  std::vector<std::string> plan_text;  ///< Each plan's bytes as read.
  std::optional<ModelProfile> model;
  std::optional<ClusterProfile> cluster;
};

/// The preamble: the outputs checked against the inputs, then every file read as `reading`
/// says. nullopt, with the problems in `run.errors`, when something is wrong.
std::optional<ToolInputs> read_tool_inputs(const ToolFiles& files, ToolRun& run);

/// A job whose verdict fails (simulate --check) leaves no file: when `passed`, every output
/// is written; otherwise only those for stdout ("-"), and a note names the files not
/// written and how to get them (`without`: "--check"). `command` names the job in the note.
Status write_verdict_outputs(std::string_view command, const std::vector<Output>& outputs,
                             bool passed, std::string_view without, ToolRun& run,
                             const NoteSink& sink);

/// "-o FILE" or stdout, then the named others: the outputs of a job writing its document to
/// `output_path` (stdout when absent).
NamedPath document_output(const std::optional<std::string>& output_path);

}  // namespace pulse
