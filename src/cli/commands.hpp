// The pulse-plan command table and the helpers every subcommand shares.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>

#include "pulse/base/io.hpp"
#include "pulse/base/result.hpp"

namespace pulse::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

/// Every subcommand, in the order `--help` lists them.
const std::vector<Command>& commands();

/// Entry point: dispatches argv to a subcommand; returns the process exit code.
int run(int argc, char** argv);

/// Prints "pulse-plan: <message>" on stderr and returns the error's exit code.
int report(const Error& error);

/// Parses `args` against `options`; a usage Error names the bad option (with a suggestion).
Result<boost::program_options::variables_map> parse_options(
    const std::string& command, const std::vector<std::string>& args,
    const boost::program_options::options_description& options);

/// A what-if factor (--compute-scale, --link-scale) within plan_check.hpp's limit, or a usage
/// error naming the command and the option: beyond it a plan would state times its reader
/// refuses.
Status check_scale_limit(std::string_view command, std::string_view option, double factor);

/// A command whose verdict fails (simulate --check, diff's --fail-if-* thresholds) exits
/// non-zero, and a command that exits non-zero leaves no file: of `outputs`, only those for
/// stdout ("-") are written; the files are named on stderr as not written, with how to get
/// them (`without`: "--check", "the --fail-if-* thresholds").
Status write_verdict_outputs(std::string_view command, const std::vector<Output>& outputs,
                             bool passed, std::string_view without);

/// True when stderr is a terminal (progress and colour go there only then).
bool stderr_is_terminal();

/// For commands that take files as positional arguments (diff, validate, export): splits
/// `args` into the positional words and the rest (options with their values, for
/// parse_options). Words after "--" are positional.
struct SplitArguments {
  std::vector<std::string> positional;
  std::vector<std::string> options;
};
SplitArguments split_positional(const std::vector<std::string>& args,
                                const boost::program_options::options_description& options);

// Subcommands.
int plan_command(const std::vector<std::string>& args);
int diff_command(const std::vector<std::string>& args);
int validate_command(const std::vector<std::string>& args);
int export_command(const std::vector<std::string>& args);
int simulate_command(const std::vector<std::string>& args);

}  // namespace pulse::cli
