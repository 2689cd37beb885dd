// The pulse-plan command table and the helpers every subcommand shares.
#pragma once

#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "pulse/result.hpp"

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

/// True when stderr is a terminal (progress and colour go there only then).
bool stderr_is_terminal();

// Subcommands.
int plan_command(const std::vector<std::string>& args);

}  // namespace pulse::cli
