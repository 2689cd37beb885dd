// The strategies a plan can follow: Pulse's V and the baselines it is compared with. Every
// strategy goes through the same passes and the same engine, so their figures compare;
// what differs is written here, once.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pulse/cost/pipeline_model.hpp"

namespace pulse {

/// Which kind of schedule a strategy asks the schedule pass for.
enum class ScheduleFamily {
  synthesized,  ///< The best the synthesizer finds (heuristic, search, exact ILP).
  one_f_one_b,  ///< The 1F1B list schedule itself (the baselines' schedule).
  gpipe,        ///< GPipe: every forward, then every backward; all microbatches in flight.
};

/// How a job is cut, placed and scheduled.
enum class Strategy {
  pulse,               ///< V placement, skip-aware partition, synthesized schedule.
  v_naive,             ///< V placement, cuts balanced ignoring skips, synthesized schedule.
  one_f_one_b,         ///< P stages in a row, skips relayed through each boundary, 1F1B.
  one_f_one_b_direct,  ///< P stages in a row, skips sent straight to the consumer, 1F1B.
  gpipe,               ///< P stages in a row, skips relayed, GPipe (all forwards first).
};

/// What a strategy is made of.
struct StrategyTraits {
  const char* name;     ///< As on the command line and in plans.
  bool v_placement;     ///< 2P stages in a V; else P stages in a row.
  SkipRouting routing;  ///< How non-local skips travel.
  bool skip_aware;      ///< The partitioner sees skips (false: balanced ignoring them).
  ScheduleFamily schedule;
};

const StrategyTraits& traits(Strategy s);
const char* strategy_name(Strategy s);
/// The strategy called `name`; "sequential" is accepted for 1f1b (the foundation's name).
std::optional<Strategy> parse_strategy(std::string_view name);
/// Every strategy name, for help texts and messages.
std::string strategy_names();

}  // namespace pulse
