// The strategies a plan can follow, and the families of plans each one may choose from.
// Every family goes through the same passes and the same engine, so their figures compare;
// what differs is written here, once.
//
// A baseline strategy is one family. `pulse` is many: it searches them all and keeps the
// fastest by the simulator (time under memory, then fewer bytes moved), the baselines' own
// families included, so it is never slower than a baseline printed beside it. Skip
// locality is its means, not its end: the V with every skip local comes first, then the
// same V with skips released where crossing devices pays (the partitioner charges each at
// its transfer cost and memory), then waves (2kP stages, k per side on each device, see
// partition.hpp), then the baselines' partitions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"

namespace pulse {

/// Which kind of schedule a family asks the schedule pass for.
enum class ScheduleFamily {
  synthesized,  ///< The best the synthesizer finds (heuristic, search, exact ILP).
  one_f_one_b,  ///< The 1F1B list schedule itself (the baselines' schedule).
  gpipe,        ///< GPipe: every forward, then every backward; all microbatches in flight.
};

/// How the partitioner treats skips.
enum class SkipTreatment {
  local_first,  ///< Every skip on its device if any partition allows it, else as `released`.
  released,     ///< Skips may cross devices where that pays; each charged at its cost.
  blind,        ///< Cut as if there were no skips (they are paid for afterwards).
};

/// One way to cut, place and schedule a job.
struct Family {
  const char* name;  ///< As in plans ("v", "w2-released", "1f1b", ...).
  /// 0: P stages in a row (a chain); k >= 1: 2kP stages in k waves (1: the V).
  int waves;
  SkipTreatment skips;
  SkipRouting routing;  ///< How skips that leave their device travel.
  ScheduleFamily schedule;
  /// A baseline strategy's own plan (what `--strategy NAME` would print).
  const char* baseline = nullptr;

  bool chain() const { return waves == 0; }
  /// Stages for pipeline degree `pp`.
  int num_stages(int pp) const { return chain() ? pp : 2 * waves * pp; }
};

/// How a job is cut, placed and scheduled.
enum class Strategy {
  pulse,               ///< Every family below; the fastest wins.
  v_naive,             ///< V placement, cuts balanced ignoring skips, synthesized schedule.
  one_f_one_b,         ///< P stages in a row, skips relayed through each boundary, 1F1B.
  one_f_one_b_direct,  ///< P stages in a row, skips sent straight to the consumer, 1F1B.
  gpipe,               ///< P stages in a row, skips relayed, GPipe (all forwards first).
};

const char* strategy_name(Strategy s);
/// The strategy called `name`; "sequential" is accepted for 1f1b (the foundation's name).
std::optional<Strategy> parse_strategy(std::string_view name);
/// Every strategy name, for help texts and messages.
std::string strategy_names();

/// The families a strategy chooses from, in the order they are tried (the first is the
/// reference: pulse's full-locality V).
const std::vector<Family>& families(Strategy s);
/// The family called `name`, among every strategy's, or null.
const Family* find_family(std::string_view name);

}  // namespace pulse
