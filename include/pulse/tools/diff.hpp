// A semantic diff of two plans: one report with the old value beside the new for the
// degrees, the placement, every stage's layers, the schedule, time, traffic and memory,
// and the list of layers that moved between stages or devices. The typical pair is one
// model planned for two clusters (V100 NVLink vs Ascend 910A HCCS).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pulse/plan/plan.hpp"

namespace pulse {

/// How a row changed, for colour: `better`/`worse` where a direction is meaningful
/// (time, traffic, memory, bubble), `changed` otherwise.
enum class Change { same, changed, better, worse };

struct DiffRow {
  std::string section;  ///< "inputs", "degrees", "placement", "stages", ...
  std::string key;      ///< Stable machine name within the section: "pp", "iteration_s".
  std::string label;    ///< For people: "pp", "iteration".
  std::string old_text;
  std::string new_text;
  std::optional<double> old_value;  ///< Raw number (seconds, bytes) when the row is numeric.
  std::optional<double> new_value;
  std::string delta;  ///< "+12.3%", "+4", "-1.5 pp", "changed" or "".
  /// The delta as a number: percent for times, bytes and rates, percentage points for
  /// ratios, new - old for counts; absent for text rows, unchanged rows and from zero.
  std::optional<double> delta_value;
  bool integral = false;  ///< Counts and bytes: the JSON writes old/new as integers.
  Change change = Change::same;
};

/// A layer whose stage or device differs; -1 where the layer is absent from that plan.
struct LayerMove {
  std::string layer;
  StageId old_stage = -1;
  StageId new_stage = -1;
  DeviceId old_device = -1;
  DeviceId new_device = -1;
};

/// A CI gate of `diff` (--fail-if-slower, --fail-if-more-traffic): the option, its threshold,
/// the figure it holds to it (both in percent) and whether it tripped (exit 4).
struct DiffGate {
  std::string option;  ///< "fail-if-slower" or "fail-if-more-traffic".
  double threshold_pct = 0;
  double value_pct = 0;  ///< slowdown_pct or traffic_increase_pct (may be infinite).
  bool tripped = false;
  std::string reason;  ///< One line: what the figure is against the threshold.
};

struct DiffRequest {
  const Plan* old_plan = nullptr;
  const Plan* new_plan = nullptr;
  std::string old_name = {};  ///< Column titles; default: the plans' file names.
  std::string new_name = {};
  /// The gates asked for (percent); each is stated in the report, tripped or not.
  std::optional<double> fail_if_slower_pct = {};
  std::optional<double> fail_if_more_traffic_pct = {};
};

struct PlanDiff {
  std::string old_name;
  std::string new_name;
  std::vector<DiffRow> rows;
  std::vector<LayerMove> moved_layers;       ///< In the new plan's layer order, then removed.
  std::vector<std::string> changed_degrees;  ///< Keys of the "degrees" rows that changed.
  /// Throughput lost, percent: (1 - new samples/s / old samples/s) x 100; < 0 is faster.
  double slowdown_pct = 0;
  /// Point-to-point bytes per sample, percent more than the old plan (infinite when the
  /// old plan moved none and the new one does).
  double traffic_increase_pct = 0;
  int num_layers = 0;  ///< Layers in the new plan.
  /// Either plan has a pipeline (pp > 1). Else one device runs the whole model in both: no
  /// placement or stage rows, no moved layers.
  bool pipelines = true;
  /// How the plans train, where it changed: "ZeRO-0 -> ZeRO-2, recompute none -> selective"
  /// (the "mode" rows: verdict, ZeRO stage, recomputation, precision); "" when it did not.
  std::string mode_change;
  /// The gates asked for, in option order, each with whether it tripped; the report (table,
  /// JSON, Markdown, HTML) states them, so a red build's artefact says why it is red.
  std::vector<DiffGate> gates;
  /// One line for people: what changed in how they train first (verdict, ZeRO stage,
  /// recomputation, precision: "ZeRO-0 -> ZeRO-2: "), then faster or slower by how much, and why
  /// (device time per sample split into compute, blocked sends, idle and exposed all-reduce; a
  /// recalibrated profile).
  std::string headline;
};

PlanDiff diff_plans(const DiffRequest& request);

/// Whether two plans' claims about their inputs (`inputs.model`, `inputs.cluster`: file
/// name, profile name, sha256 of the file's bytes) can both be true, and whether they say
/// the two plans come from one profile whose contents differ. For each input:
///   - the same sha256 with another profile name or provenance: the same bytes cannot have
///     two names, so one plan's inputs were edited: an input error, always;
///   - the same file and profile name with another sha256: the plans claim the same input,
///     but it changed between them (recalibrated, edited): not an error, as a pull request
///     that recalibrates a profile is what CI diffs; the rows and the headline show it.
/// Different names with different hashes are simply different inputs (two clusters).
Status check_inputs_agree(const Plan& old_plan, const Plan& new_plan);

struct DiffTableOptions {
  bool color = false;  ///< ANSI colours: green better, red worse, yellow changed.
};

/// The aligned table: label, old, new, change; then the moved layers.
std::string format_diff_table(const PlanDiff& diff, const DiffTableOptions& options);
/// The same as JSON (schema "pulse.plan-diff/v1"), for machines.
std::string format_diff_json(const PlanDiff& diff);
/// GitHub-flavoured Markdown for a pull-request comment: the headline, a table of the rows
/// that changed, every row and the moved layers in collapsed <details> blocks.
std::string format_diff_markdown(const PlanDiff& diff);
/// One self-contained HTML page (no script, nothing fetched): the two plans side by side
/// (`old_plan` left, `new_plan` right, those `diff` was made from), each pair of figures on
/// one scale: the schedules' timelines, the stage maps, memory per device against capacity,
/// point-to-point traffic by link class; then the rows and the moved layers.
std::string format_diff_html(const PlanDiff& diff, const Plan& old_plan, const Plan& new_plan);

}  // namespace pulse
