// The plan job's options, one record each: the name and the help `plan --help` prints, the
// default, the bounds and the check, in the order the help lists them. The command line
// builds its parser from this table and hands what it parsed to read_plan_job, which turns
// each value into the job (parsing the ones given as text); check_plan_options holds the
// options to every record's bounds and check, once, before any pass runs. Nothing else checks
// an option: compile_plan and run_plan_job call check_plan_options, the command line does not.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pulse/base/options.hpp"
#include "pulse/base/result.hpp"
#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_job.hpp"

namespace pulse {

struct OptionRecord;
using OptionRead = Status (*)(const OptionValue& value, PlanJob& job);
using OptionCheck = Status (*)(const OptionRecord& self, const PlanOptions& options);

/// One option of `pulse-plan plan`.
struct OptionRecord {
  const char* name;        ///< "pp"; "output,o" with its one-letter form.
  const char* value_name;  ///< "N", "FILE"; "" for a flag.
  OptionKind kind = OptionKind::flag;
  std::string help;
  /// What an absent option means; --help shows it as (=VALUE). The PlanOptions defaults are
  /// these (a unit test holds them equal).
  std::optional<OptionValue> default_value;
  bool required = false;
  /// An integer's or a number's bounds: below `least` the option is refused as such, above
  /// `most` as beyond pulse-plan's limit (base/limits.hpp), stated with `unit`.
  std::optional<double> least;
  std::optional<double> most;
  const char* unit = "";
  /// Stores a given value in the job; a value given as text that does not parse is a usage
  /// error saying what was expected.
  OptionRead read = nullptr;
  /// The option's check on the options as read, or as a library caller set them: its bounds
  /// (OptionRecord::within) and any rule of its own. nullptr: nothing to check.
  OptionCheck check = nullptr;

  /// "output" of "output,o".
  std::string long_name() const;
  /// Ok when `value` is absent or within [least, most]; else the usage error.
  Status within(std::optional<double> value) const;
};

/// Every option of the plan job, in the order `plan --help` lists them.
const std::vector<OptionRecord>& plan_option_table();

/// The job the given options describe: each read in table order, an absent one as its
/// default; a required one absent, or a value that does not parse, is a usage error. The
/// options are not checked here (check_plan_options is, by run_plan_job).
Result<PlanJob> read_plan_job(const std::vector<GivenOption>& given);

/// Every record's check, in table order; the first failure.
Status check_plan_options(const PlanOptions& options);

}  // namespace pulse
