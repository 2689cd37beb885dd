// The report of `pulse-plan simulate --json` (schema pulse.simulation/v1): the replay's
// figures in the plan's own `comm` and `predicted` sections (plan/figures.hpp), beside the
// plan's name and hash and every figure that differs from what the plan predicts; or the
// same as text. Both are assembled here, once; the simulate job writes them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pulse/plan/plan_codec.hpp"
#include "pulse/tools/replay.hpp"

namespace pulse {

/// The schema tag of simulation reports.
inline constexpr const char* kSimulationSchema = "pulse.simulation/v1";

/// The report as text, for a person (`simulate` without --json): `plan_name`, the cost
/// source, iteration, throughput and bubble; per device its times, memory peak with its
/// breakdown and capacity, and any device that does not fit; point-to-point bytes by kind and
/// by link class; then whether the figures match the plan's, or each difference. Names from
/// the plan are shown printable (base/text.hpp).
std::string simulation_report_text(const std::string& plan_name, const Plan& plan,
                                   const Replay& replay,
                                   const std::vector<FigureDifference>& differences);

/// The report as JSON text: `plan_name` and the sha256 of `plan_text` (the plan's bytes as
/// read), the cost source, the replay's comm and predicted sections, a plan with frozen
/// encoders their `frozen` ops with the step on the replayed iteration and every problem the
/// check (tools/frozen_check.hpp) finds against the replay, whether the figures match the plan
/// and each difference (plan -> replay).
std::string simulation_report_json(const std::string& plan_name, std::string_view plan_text,
                                   const Plan& plan, const Replay& replay,
                                   const std::vector<FigureDifference>& differences);

}  // namespace pulse
