// Plans in other people's formats:
//   torch-csv  PyTorch pipelining's compute-only schedule CSV (PipelineScheduleMulti
//              ._load_csv(path, format="compute_only")), plus a JSON side file with the
//              stage -> layer map and the skip tensors each rank caches, which the CSV
//              cannot say;
//   dot        Graphviz of the layer graph, stages as clusters, skip edges dashed, layers
//              coloured by device;
//   html       one self-contained page: the schedule as an SVG timeline per device, the
//              partition over the layer sequence with skip arcs, memory per device, and
//              baseline plans beside the main one.
#pragma once

#include <string>
#include <vector>

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
inline constexpr const char* kTorchStagesSchema = "pulse.torch-stages/v1";

struct TorchCsv {
  /// One row per pipeline rank (the plan's pipeline device), no header: the rank's actions
  /// in the plan's order, `{stage}{F|B|I|W}{microbatch}`, comma-separated.
  std::string csv;
  /// pulse.torch-stages/v1: stages with their rank and layers, per rank the skip tensors
  /// cached there (name, producer and consumer layer, stage pair, bytes), skips that cross
  /// ranks with their route, and the global ranks of every pipeline.
  std::string stages_json;
};

TorchCsv export_torch_csv(const Plan& plan);

struct DotOptions {
  /// Optional: adds each layer's kind and parameter count to its label.
  const ModelProfile* model = nullptr;
};

std::string export_dot(const Plan& plan, const DotOptions& options);

struct HtmlRequest {
  const Plan* plan = nullptr;
  /// Plans shown beside the main one (e.g. the sequential baseline), same time scale.
  std::vector<const Plan*> baselines;
};

std::string export_html(const HtmlRequest& request);

}  // namespace pulse
