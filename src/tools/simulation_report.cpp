#include "pulse/tools/simulation_report.hpp"

#include <nlohmann/json.hpp>

#include "pulse/base/io.hpp"

namespace pulse {

std::string simulation_report_json(const std::string& plan_name, std::string_view plan_text,
                                   const Replay& replay,
                                   const std::vector<FigureDifference>& differences) {
  const nlohmann::ordered_json figures = figure_sections(replay.figures);
  nlohmann::ordered_json out;
  out["schema"] = kSimulationSchema;
  out["plan"] = {{"file", plan_name}, {"sha256", sha256_hex(plan_text)}};
  out["cost_source"] = replay.cost_source;
  out["comm"] = figures["comm"];
  out["predicted"] = figures["predicted"];
  out["matches_plan"] = differences.empty();
  nlohmann::ordered_json diffs = nlohmann::ordered_json::array();
  for (const FigureDifference& d : differences) {
    diffs.push_back({{"path", d.path}, {"plan", d.plan}, {"replay", d.replay}});
  }
  out["differences"] = diffs;
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace pulse
