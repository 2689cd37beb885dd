// The pulse-plan command table and the helpers every subcommand shares.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>

#include "pulse/base/io.hpp"
#include "pulse/base/result.hpp"
#include "pulse/compile/plan_options.hpp"

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

/// A parser for a library option table (compile/plan_options.hpp): each record's name,
/// value, default and help, in table order, under the heading "options".
boost::program_options::options_description options_from(const std::vector<OptionRecord>& table);

/// What `vm` holds for the records of `table`, for read_plan_job.
std::vector<GivenOption> given_options(const boost::program_options::variables_map& vm,
                                       const std::vector<OptionRecord>& table);

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
