// The plan's JSON codec. One list of keys per section (src/plan/plan_sections.cpp) drives
// the writer, the reader and the key listing the schema is checked against, so the three
// cannot disagree. The writer is deterministic: keys in that fixed order, two-space indent,
// times rounded to the nanosecond, ratios to 1e-9 and rates to 1e-6, so the same plan gives
// the same bytes on every machine; text that is not valid UTF-8 (a file name given as raw
// bytes) is written with U+FFFD in place of each bad byte. The reader checks the shape
// (types, required keys, every index in range), the limits of plan_check.hpp (the degrees
// before anything else) and, unless asked not to, the structure (check_plan_structure); it
// reports every problem found as "FILE: $.json.path: expected ..., got ..."; keys it does
// not know are ignored (plans may gain keys within v1).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pulse/base/io.hpp"
#include "pulse/base/result.hpp"
#include "pulse/plan/plan.hpp"

namespace pulse {

/// The plan as JSON text (two-space indented, trailing newline).
std::string write_plan(const Plan& plan);

/// The plan as JSON text, checked to read back: every number finite and within the limits,
/// the structure whole. What `plan` writes, so that no command writes a plan the others
/// refuse. An error (internal kind: the planner made it) names the JSON path.
Result<std::string> encode_plan(const Plan& plan);

/// encode_plan's checks alone: Ok where it would give the text, else its error.
Status check_encodable(const Plan& plan);

/// The text encode_plan gives, handed to `sink` in pieces of about 1 MiB, for a plan
/// check_encodable passed: a plan's text need not be held whole (`plan` writes it to its
/// file this way). Stops where the sink refuses a piece; an internal error where a number
/// is not finite after all (check_encodable refuses that first).
Status stream_plan(const Plan& plan, const TextSink& sink);

/// Which checks the reader applies beyond the shape and the limits.
enum class PlanCheck {
  structure,   ///< check_plan_structure too: what every tool but validate reads.
  shape_only,  ///< Without it: validate, which lists structural problems as violations.
};

/// Reads and checks a plan file (at most kMaxPlanFileBytes). Errors (input kind, exit 2)
/// list every problem found.
Result<Plan> load_plan(const std::string& path, PlanCheck checks = PlanCheck::structure);
/// The same from text in memory; `file` is the name used in messages.
Result<Plan> parse_plan(std::string_view text, const std::string& file,
                        PlanCheck checks = PlanCheck::structure);
/// A plan file's text, refused (input error) beyond kMaxPlanFileBytes before it is read.
Result<std::string> read_plan_text(const std::string& path);

/// A key the codec knows: its JSON path ("$.stages[].layers[]"), the JSON type it writes
/// ("integer", "number", "string", "boolean", "array", "object"; "integer|null" where a
/// null stands for "not given") and whether the reader requires it.
struct PlanKey {
  std::string path;
  std::string type;
  bool required = false;
};

/// Every key the writer can emit, in writing order (what the schema must describe).
std::vector<PlanKey> plan_keys();

/// The `comm` and `predicted` sections as the writer writes them, in an object of their
/// own (what `simulate --json` reports).
nlohmann::ordered_json figure_sections(const Plan& plan);

/// One number or value that differs between two plans' `comm` and `predicted` sections,
/// each formatted as the writer formats it ("(absent)" where one side lacks it).
struct FigureDifference {
  std::string path;  ///< JSON path, e.g. "$.predicted.iteration_s".
  std::string plan;
  std::string replay;
};

/// Compares the `comm` and `predicted` sections of two plans key by key, after rounding
/// both as the writer does; numbers agree within a nanosecond or a part in 10^9.
std::vector<FigureDifference> compare_figures(const Plan& plan, const Plan& replay);

}  // namespace pulse
