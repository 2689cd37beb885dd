// The vocabulary of a job's option table: what kind of value an option takes, a value as the
// command line gives it, and one record per option of a tool's job (the plan job's records,
// compile/plan_options.hpp, add bounds and a check). A job declares its options once, as
// such a table; the command line builds its parser and its help from the table
// (src/cli/commands.cpp, options_from) and hands back what it parsed, which the job's
// records read into the job.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "pulse/base/result.hpp"

namespace pulse {

/// What an option's value is on the command line: present or not, a whole number, a number,
/// text (parsed by the record's read, such as "8GiB" or "range-high"), or text that may be
/// given more than once (every value, in order).
enum class OptionKind { flag, integer, number, text, texts };

/// A value as the command line gives it: a flag's presence, an integer, a number, text or
/// the texts of a repeated option.
using OptionValue = std::variant<bool, int, double, std::string, std::vector<std::string>>;

/// One option as the command line gave it: its long name and its value. An option left at
/// its default is not given.
struct GivenOption {
  std::string name;
  OptionValue value;
};

/// "output" of "output,o".
std::string option_long_name(const char* name);

/// One option of a tool's job (`Job`: SimulateJob, DiffJob, ...).
template <class Job>
struct JobOption {
  const char* name = "";        ///< "cluster"; "output,o" with its one-letter form.
  const char* value_name = "";  ///< "FILE", "PCT"; "" for a flag.
  OptionKind kind = OptionKind::flag;
  std::string help;
  /// What an absent option means, as --help shows it (=VALUE): the job member's own initial
  /// value, which an absent option leaves as it is.
  std::optional<OptionValue> default_value;
  /// Stores a given value in the job.
  Status (*read)(const OptionValue& value, Job& job) = nullptr;

  std::string long_name() const { return option_long_name(name); }
};

/// Reads `given` into `job` by `table`, in table order; an absent option is not read. The
/// first read that fails ends it.
template <class Job>
Status read_job_options(const std::vector<JobOption<Job>>& table,
                        const std::vector<GivenOption>& given, Job& job) {
  std::map<std::string, const OptionValue*> by_name;
  for (const GivenOption& g : given) by_name[g.name] = &g.value;
  for (const JobOption<Job>& r : table) {
    const auto it = by_name.find(r.long_name());
    if (it == by_name.end()) continue;
    if (auto read = r.read(*it->second, job); !read) return read.error();
  }
  return Ok{};
}

}  // namespace pulse
