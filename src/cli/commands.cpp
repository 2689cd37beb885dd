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

void add_option(po::options_description& o, const char* name, const char* value_name,
                OptionKind kind, const std::string& help, const std::optional<OptionValue>& d) {
  switch (kind) {
    case OptionKind::flag:
      o.add_options()(name, help.c_str());
      break;
    case OptionKind::integer: {
      auto* v = po::value<int>()->value_name(value_name);
      o.add_options()(name, d ? v->default_value(std::get<int>(*d)) : v, help.c_str());
      break;
    }
    case OptionKind::number: {
      auto* v = po::value<double>()->value_name(value_name);
      o.add_options()(name, d ? v->default_value(std::get<double>(*d)) : v, help.c_str());
      break;
    }
    case OptionKind::text: {
      auto* v = po::value<std::string>()->value_name(value_name);
      o.add_options()(name, d ? v->default_value(std::get<std::string>(*d)) : v, help.c_str());
      break;
    }
    case OptionKind::texts:
      o.add_options()(name,
                      po::value<std::vector<std::string>>()->value_name(value_name)->composing(),
                      help.c_str());
      break;
  }
}

std::optional<GivenOption> given_option(const po::variables_map& vm, const std::string& name,
                                        OptionKind kind) {
  if (!vm.count(name) || vm[name].defaulted()) return std::nullopt;
  switch (kind) {
    case OptionKind::flag:
      return GivenOption{name, true};
    case OptionKind::integer:
      return GivenOption{name, vm[name].as<int>()};
    case OptionKind::number:
      return GivenOption{name, vm[name].as<double>()};
    case OptionKind::text:
      return GivenOption{name, vm[name].as<std::string>()};
    case OptionKind::texts:
      return GivenOption{name, vm[name].as<std::vector<std::string>>()};
  }
  return std::nullopt;
}

void print_note(const std::string& note) {
  std::cerr << "pulse-plan: " << note << "\n";
}

int report_all(const std::vector<Error>& errors, int exit_code) {
  for (const Error& e : errors) report(e);
  return exit_code;
}

SplitArguments split_positional(const std::vector<std::string>& args,
                                const po::options_description& options) {
  SplitArguments out;
  auto takes_value = [&](const std::string& name) {
    const po::option_description* d = options.find_nothrow(name, false, false, false);
    return d != nullptr && d->semantic()->max_tokens() > 0;
  };
  bool rest_positional = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (rest_positional || a == "-" || a.empty() || a[0] != '-') {
      out.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      rest_positional = true;
      continue;
    }
    out.options.push_back(a);
    // "--name VALUE" and "-o VALUE" take the next word; "--name=VALUE" and "-oVALUE" do not.
    const bool is_long = a.rfind("--", 0) == 0;
    const std::string name = is_long ? a.substr(2) : a.substr(0, 2);
    const bool joined = is_long ? a.find('=') != std::string::npos : a.size() > 2;
    if (!joined && takes_value(name) && i + 1 < args.size()) out.options.push_back(args[++i]);
  }
  return out;
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
