// Plans in other people's formats:
//   torch-csv  PyTorch pipelining's compute-only schedule CSV, rows in group-rank order with
//              lock-step idle cells, which both PipelineScheduleMulti._load_csv(path) and
//              _PipelineScheduleRuntime._load_csv(path, format="compute_only") run
//              correctly; plus a JSON side file with the rows' devices and global ranks,
//              the stage -> layer map and the skip tensors each rank caches;
//   dot        Graphviz of the layer graph, stages as clusters, skip edges dashed, layers
//              coloured by device;
//   html       one self-contained page: the schedule as an SVG timeline per device, the
//              partition over the layer sequence with skip arcs, memory per device, and
//              baseline plans beside the main one.
#pragma once

#include <string>
#include <vector>

#include "pulse/base/result.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// An export format: its name on the command line and the option only it takes ("" when
/// none). A new format is a row of export_formats() and a function below.
struct ExportFormat {
  const char* name;
  const char* own_option;
};

/// Every format, in the order `export --help` lists them.
const std::vector<ExportFormat>& export_formats();
/// "torch-csv, dot or html", for messages.
std::string export_format_names();

/// The torch-csv side file beside `csv_path`: "out.csv" -> "out.stages.json".
std::string torch_stages_path(const std::string& csv_path);

/// The schema tag of the torch-csv side file.
inline constexpr const char* kTorchStagesSchema = "pulse.torch-stages/v2";

struct TorchCsv {
  /// One row per pipeline rank in group-rank order (row g: the device whose global rank is
  /// the g-th smallest of its pipeline group, as torch.distributed.new_group numbers them),
  /// no header: the device's actions in the plan's order, `{stage}{F|B|I|W}{microbatch}`,
  /// each at its lock-step step (empty cells between), so that PipelineScheduleMulti never
  /// runs an op at or before the step of the op whose output it consumes.
  std::string csv;
  /// pulse.torch-stages/v2: the rows' devices, stages with their group rank and layers, per
  /// rank its stages, global ranks and cached skips, skips that cross ranks with their route.
  std::string stages_json;
  std::vector<DeviceId> row_devices;  ///< The pipeline device of each row.
  int num_steps = 0;                  ///< Cells in the longest row.
};

/// Input error (exit 2) when the pipeline groups order their devices differently (one CSV
/// cannot serve every replica) or the schedule cannot run to its end.
Result<TorchCsv> export_torch_csv(const Plan& plan);

struct DotOptions {
  /// Optional: adds each layer's kind and parameter count to its label.
  const ModelProfile* model = nullptr;
};

/// Whether `model` is the plan's (for DotOptions::model): its layers, each once, listed by
/// the stages in the model's execution order. An input error (exit 2) names the plan's JSON
/// path of the first layer that is unknown or out of order, or the counts.
Status check_dot_model(const Plan& plan, const ModelProfile& model);

std::string export_dot(const Plan& plan, const DotOptions& options);

struct HtmlRequest {
  const Plan* plan = nullptr;
  /// Plans shown beside the main one (e.g. the sequential baseline), same time scale.
  std::vector<const Plan*> baselines;
};

std::string export_html(const HtmlRequest& request);

}  // namespace pulse
