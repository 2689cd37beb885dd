// What the tools' jobs share (tool_job.hpp): the run's record and the preamble.

#include "pulse/tools/tool_job.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pulse {

int ToolRun::exit_code() const {
  return errors.empty() ? verdict : pulse::exit_code(errors.front().kind);
}

void ToolRun::note(std::string note, const NoteSink& sink) {
  notes.push_back(std::move(note));
  if (sink) sink(notes.back());
}

namespace {

// One plan: its bytes, then the plan they hold. A problem with the bytes is kept apart, as
// Reading::plan_bytes_first stops there.
struct PlanRead {
  std::optional<std::string> text;
  std::optional<Plan> plan;
  std::optional<Error> error;
};

PlanRead read_one(const std::string& path, PlanCheck check) {
  PlanRead out;
  auto text = read_plan_text(path);
  if (!text) {
    out.error = text.error();
    return out;
  }
  auto plan = parse_plan(*text, path, check);
  out.text = std::move(*text);
  if (plan) {
    out.plan = std::move(*plan);
  } else {
    out.error = plan.error();
  }
  return out;
}

std::vector<NamedPath> input_paths(const ToolFiles& files) {
  std::vector<NamedPath> in = files.plans;
  if (files.model_path) in.push_back({"--model", *files.model_path});
  if (files.cluster_path) in.push_back({"--cluster", *files.cluster_path});
  return in;
}

}  // namespace

std::optional<ToolInputs> read_tool_inputs(const ToolFiles& files, ToolRun& run) {
  if (!files.outputs.empty()) {
    if (auto s = check_output_paths(files.command, input_paths(files), files.outputs); !s) {
      run.errors.push_back(s.error());
      return std::nullopt;
    }
  }
  const bool stop_at_first = files.reading == Reading::first_problem;
  ToolInputs in;
  for (std::size_t k = 0; k < files.plans.size(); ++k) {
    PlanRead read = read_one(files.plans[k].path, files.plan_check);
    if (read.error) {
      run.errors.push_back(std::move(*read.error));
      const bool bytes = !read.text && files.reading == Reading::plan_bytes_first;
      if (stop_at_first || bytes) return std::nullopt;
      continue;
    }
    in.plans.push_back(std::move(*read.plan));
    in.plan_text.push_back(std::move(*read.text));
  }
  if (files.model_path && (run.ok() || !stop_at_first)) {
    auto model = load_model_profile(*files.model_path);
    if (model) {
      in.model = std::move(*model);
    } else {
      run.errors.push_back(model.error());
    }
  }
  if (files.cluster_path && (run.ok() || !stop_at_first)) {
    auto cluster = load_cluster_profile(*files.cluster_path);
    if (cluster) {
      in.cluster = std::move(*cluster);
    } else {
      run.errors.push_back(cluster.error());
    }
  }
  if (!run.ok()) return std::nullopt;
  return in;
}

Status write_verdict_outputs(std::string_view command, const std::vector<Output>& outputs,
                             bool passed, std::string_view without, ToolRun& run,
                             const NoteSink& sink) {
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
    run.note(fmt::format("{}: not written, as the command fails: {} (run it without {} to write "
                         "them)",
                         command, fmt::join(files, ", "), without),
             sink);
  }
  return write_outputs(streams);
}

NamedPath document_output(const std::optional<std::string>& output_path) {
  return output_path ? NamedPath{"-o", *output_path} : NamedPath{"", "-"};
}

}  // namespace pulse
