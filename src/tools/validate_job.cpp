// The validate job (validate_job.hpp).

#include "pulse/tools/validate_job.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "pulse/base/text.hpp"

namespace pulse {

namespace {

template <auto member>
Status store_path(const OptionValue& value, ValidateJob& job) {
  job.*member = std::get<std::string>(value);
  return Ok{};
}

std::string summary(const Plan& p, const ModelProfile& m, const ClusterProfile& c) {
  int local = 0;
  for (const PlanSkip& s : p.skips) local += s.local ? 1 : 0;
  auto n = [](std::size_t count, const char* one, const char* many) {
    return fmt::format("{} {}", count, count == 1 ? one : many);
  };
  // At pp 1 one device runs the whole model: every skip is on it, its stages are no cut.
  const std::string skips =
      p.pp() > 1 ? fmt::format(", {}/{} skips local", local, p.skips.size()) : "";
  return fmt::format("{} on {}: {}, {}, {}{}", m.name, c.name, p.layout(),
                     n(p.parallelism.num_microbatches, "microbatch", "microbatches"),
                     n(p.num_ops(), "op", "ops"), skips);
}

}  // namespace

const std::vector<JobOption<ValidateJob>>& validate_option_table() {
  static const std::vector<JobOption<ValidateJob>> table = {
      {"model",
       "FILE",
       OptionKind::text,
       "model profile the plan was made from",
       {},
       store_path<&ValidateJob::model_path>},
      {"cluster",
       "FILE",
       OptionKind::text,
       "cluster profile the plan was made for",
       {},
       store_path<&ValidateJob::cluster_path>},
  };
  return table;
}

Result<ValidateJob> read_validate_job(const std::vector<std::string>& files,
                                      const std::vector<GivenOption>& given) {
  if (files.size() != 1) {
    return usage_error(fmt::format(
        "validate: expected one plan file, got {} (see pulse-plan validate --help)", files.size()));
  }
  for (const char* required : {"model", "cluster"}) {
    const bool named = std::any_of(given.begin(), given.end(),
                                   [&](const GivenOption& g) { return g.name == required; });
    if (!named) {
      return usage_error(fmt::format(
          "validate: --{} FILE is required (see pulse-plan validate --help)", required));
    }
  }
  ValidateJob job;
  job.plan_path = files[0];
  if (auto read = read_job_options(validate_option_table(), given, job); !read) {
    return read.error();
  }
  return job;
}

ValidateRun run_validate_job(const ValidateJob& job) {
  ValidateRun run;
  ToolFiles files;
  files.command = "validate";
  files.plans = {{"the plan", job.plan_path}};
  files.plan_check = PlanCheck::shape_only;  // structural problems are violations here
  files.model_path = job.model_path;
  files.cluster_path = job.cluster_path;
  std::optional<ToolInputs> in = read_tool_inputs(files, run);
  if (!in) return run;
  const Plan& plan = in->plans[0];
  run.result = validate_plan({&plan, &*in->model, &*in->cluster});
  const std::string name = printable(job.plan_path);
  for (const std::string& s : run.result.skipped) {
    run.note(fmt::format("{}: not checked: {}", name, s), job.on_note);
  }
  if (run.result.ok()) {
    run.report =
        fmt::format("{}: valid ({})\n", name, printable(summary(plan, *in->model, *in->cluster)));
  }
  for (const Violation& v : run.result.violations) {
    run.report += fmt::format("{}: {}: {}\n", name, v.check, v.message);
  }
  Status written = job.write ? write_outputs({{"-", run.report}}) : Status(Ok{});
  if (!run.result.ok()) {
    const std::size_t n = run.result.total;
    run.note(fmt::format("{}: invalid plan: {} violation{}", name, n, n == 1 ? "" : "s"),
             job.on_note);
    run.verdict = 1;
  }
  if (!written) run.errors.push_back(written.error());
  return run;
}

}  // namespace pulse
