#include "commands.hpp"

#include <unistd.h>

#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pulse/base/json_check.hpp"
#include "pulse/base/version.hpp"

namespace pulse::cli {

namespace po = boost::program_options;

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"plan", "compile a model and a cluster profile into a pipeline plan (JSON)", plan_command},
      {"diff", "compare two plans: degrees, moved layers, placement, time, memory, traffic",
       diff_command},
      {"simulate",
       "replay a plan on the cost model: time, bubble, memory, traffic; compare with its "
       "predictions",
       simulate_command},
      {"validate", "check a plan against its model and cluster profiles", validate_command},
      {"export", "write a plan as a PyTorch schedule CSV, a Graphviz graph or an HTML report",
       export_command},
  };
  return table;
}

namespace {

void print_usage(std::ostream& out) {
  out << "usage: pulse-plan <command> [options]\n"
         "       pulse-plan <command> --help\n"
         "       pulse-plan --version\n\n"
         "pulse-plan compiles a diffusion model's per-layer profile and a cluster profile into a\n"
         "pipeline-parallel training plan: the model cut into 2P stages placed as a V (stage d\n"
         "and 2P-1-d on device d) so every long skip connection stays on its device, a complete\n"
         "per-device schedule, the parallel degrees, a rank map and predicted figures.\n\n"
         "commands:\n";
  for (const Command& c : commands()) out << fmt::format("  {:<10} {}\n", c.name, c.summary);
  out << "\nexit codes: 0 success, 1 no feasible plan (validate: violations found), 2 bad usage or "
         "input,\n  3 internal error, 4 a diff threshold crossed\n";
}

}  // namespace

int report(const Error& error) {
  std::cerr << "pulse-plan: " << error.message << "\n";
  return exit_code(error.kind);
}

po::options_description options_from(const std::vector<OptionRecord>& table) {
  po::options_description o("options");
  for (const OptionRecord& r : table) {
    const std::optional<OptionValue>& d = r.default_value;
    switch (r.kind) {
      case OptionKind::flag:
        o.add_options()(r.name, r.help.c_str());
        break;
      case OptionKind::integer: {
        auto* v = po::value<int>()->value_name(r.value_name);
        o.add_options()(r.name, d ? v->default_value(std::get<int>(*d)) : v, r.help.c_str());
        break;
      }
      case OptionKind::number: {
        auto* v = po::value<double>()->value_name(r.value_name);
        o.add_options()(r.name, d ? v->default_value(std::get<double>(*d)) : v, r.help.c_str());
        break;
      }
      case OptionKind::text: {
        auto* v = po::value<std::string>()->value_name(r.value_name);
        o.add_options()(r.name, d ? v->default_value(std::get<std::string>(*d)) : v,
                        r.help.c_str());
        break;
      }
    }
  }
  return o;
}

std::vector<GivenOption> given_options(const po::variables_map& vm,
                                       const std::vector<OptionRecord>& table) {
  std::vector<GivenOption> out;
  for (const OptionRecord& r : table) {
    const std::string name = r.long_name();
    if (!vm.count(name)) continue;
    switch (r.kind) {
      case OptionKind::flag:
        out.push_back({name, true});
        break;
      case OptionKind::integer:
        out.push_back({name, vm[name].as<int>()});
        break;
      case OptionKind::number:
        out.push_back({name, vm[name].as<double>()});
        break;
      case OptionKind::text:
        out.push_back({name, vm[name].as<std::string>()});
        break;
    }
  }
  return out;
}

Status write_verdict_outputs(std::string_view command, const std::vector<Output>& outputs,
                             bool passed, std::string_view without) {
  if (passed) return write_outputs(outputs);
  std::vector<Output> streams;
  std::vector<std::string> files;
  for (const Output& o : outputs) {
    if (o.path == "-") {
      streams.push_back(o);
    } else {
      files.push_back(o.path);
    }
  }
  if (!files.empty()) {
    std::cerr << fmt::format(
        "pulse-plan: {}: not written, as the command fails: {} (run it "
        "without {} to write them)\n",
        command, fmt::join(files, ", "), without);
  }
  return write_outputs(streams);
}

bool stderr_is_terminal() {
  return ::isatty(STDERR_FILENO) == 1;
}

Result<po::variables_map> parse_options(const std::string& command,
                                        const std::vector<std::string>& args,
                                        const po::options_description& options) {
  // Stray words are collected under a hidden name so the error can quote them; option
  // prefixes are not guessed (--p must not silently mean --pp).
  po::options_description all;
  all.add(options);
  all.add_options()("unexpected-argument", po::value<std::vector<std::string>>());
  po::positional_options_description rest;
  rest.add("unexpected-argument", -1);
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(rest).style(style).run(), vm);
    po::notify(vm);
    if (vm.count("unexpected-argument")) {
      return usage_error(fmt::format(
          "{}: unexpected argument \"{}\" (options take the form "
          "--name VALUE; see pulse-plan {} --help)",
          command, vm["unexpected-argument"].as<std::vector<std::string>>()[0], command));
    }
  } catch (const po::unknown_option& e) {
    // A prefix of several options names them all; otherwise suggest the closest spelling.
    const std::string given = e.get_option_name();
    std::vector<std::string> names, extending;
    for (const auto& o : options.options()) {
      names.push_back("--" + o->long_name());
      if (names.back().rfind(given, 0) == 0) extending.push_back(names.back());
    }
    std::string hint;
    if (!extending.empty()) {
      hint = "; did you mean " + extending[0];
      for (std::size_t i = 1; i < extending.size(); ++i) {
        hint += (i + 1 == extending.size() ? " or " : ", ") + extending[i];
      }
      hint += "?";
    } else if (const std::string guess = closest_match(given, names); !guess.empty()) {
      hint = "; did you mean " + guess + "?";
    }
    return usage_error(fmt::format("{}: unknown option {}{} (see pulse-plan {} --help)", command,
                                   given, hint, command));
  } catch (const po::error& e) {
    return usage_error(
        fmt::format("{}: {} (see pulse-plan {} --help)", command, e.what(), command));
  }
  return vm;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage(std::cerr);
    return 2;
  }
  const std::string name = args.front();
  if (name == "help" && args.size() > 1) {
    // "pulse-plan help plan" is "pulse-plan plan --help".
    for (const Command& c : commands()) {
      if (args[1] == c.name) return c.run({"--help"});
    }
  }
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(std::cout);
    return 0;
  }
  if (name == "--version") {
    std::cout << "pulse-plan " << kVersion << "\n";
    return 0;
  }
  for (const Command& c : commands()) {
    if (name == c.name) return c.run({args.begin() + 1, args.end()});
  }
  std::vector<std::string> names;
  for (const Command& c : commands()) names.push_back(c.name);
  const std::string guess = closest_match(name, names);
  return report(usage_error(fmt::format("unknown command \"{}\"{} (see pulse-plan --help)", name,
                                        guess.empty() ? "" : "; did you mean \"" + guess + "\"?")));
}

}  // namespace pulse::cli
