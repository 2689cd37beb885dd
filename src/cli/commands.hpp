// The pulse-plan command table and the helpers every subcommand shares.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>

#include "pulse/base/options.hpp"
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

/// Adds one option of a library table to `options`: its name, value, default and help.
void add_option(boost::program_options::options_description& options, const char* name,
                const char* value_name, OptionKind kind, const std::string& help,
                const std::optional<OptionValue>& default_value);

/// What `vm` holds for the option `name` of `kind`, when the command line gave it (an option
/// left at its default is not given).
std::optional<GivenOption> given_option(const boost::program_options::variables_map& vm,
                                        const std::string& name, OptionKind kind);

/// A parser for a library option table (compile/plan_options.hpp for `plan`, a JobOption
/// table of base/options.hpp for the tools): each record's name, value, default and help,
/// in table order, under the heading "options".
template <class Record>
boost::program_options::options_description options_from(const std::vector<Record>& table) {
  boost::program_options::options_description o("options");
  for (const Record& r : table)
    add_option(o, r.name, r.value_name, r.kind, r.help, r.default_value);
  return o;
}

/// What `vm` holds for the records of `table`, for the job's read (read_plan_job,
/// read_simulate_job, ...).
template <class Record>
std::vector<GivenOption> given_options(const boost::program_options::variables_map& vm,
                                       const std::vector<Record>& table) {
  std::vector<GivenOption> out;
  for (const Record& r : table) {
    if (auto g = given_option(vm, r.long_name(), r.kind)) out.push_back(std::move(*g));
  }
  return out;
}

/// Prints a job's note on stderr: "pulse-plan: <note>" (a NoteSink, tools/tool_job.hpp).
void print_note(const std::string& note);

/// Prints every error (report) and returns `exit_code`: a job's run ends so.
int report_all(const std::vector<Error>& errors, int exit_code);

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
