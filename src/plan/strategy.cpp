#include "pulse/plan/strategy.hpp"

#include <iterator>

namespace pulse {

namespace {

// Indexed by Strategy.
constexpr StrategyTraits kStrategies[] = {
    {"pulse", true, SkipRouting::direct, true, ScheduleFamily::synthesized},
    {"v-naive", true, SkipRouting::direct, false, ScheduleFamily::synthesized},
    {"1f1b", false, SkipRouting::forwarded, true, ScheduleFamily::one_f_one_b},
    {"1f1b-direct", false, SkipRouting::direct, true, ScheduleFamily::one_f_one_b},
    {"gpipe", false, SkipRouting::forwarded, true, ScheduleFamily::gpipe},
};

}  // namespace

const StrategyTraits& traits(Strategy s) {
  return kStrategies[static_cast<int>(s)];
}

const char* strategy_name(Strategy s) {
  return traits(s).name;
}

std::optional<Strategy> parse_strategy(std::string_view name) {
  if (name == "sequential") return Strategy::one_f_one_b;
  for (int i = 0; i < static_cast<int>(std::size(kStrategies)); ++i) {
    if (name == kStrategies[i].name) return static_cast<Strategy>(i);
  }
  return std::nullopt;
}

std::string strategy_names() {
  std::string out;
  for (const StrategyTraits& t : kStrategies)
    out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

}  // namespace pulse
