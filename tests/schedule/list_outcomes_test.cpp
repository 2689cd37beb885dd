// The list-schedule outcomes the policy searches of a job share (solver/schedule/
// list_outcomes.hpp): what is kept, and that a search which recalls them finds exactly what
// it finds alone.

#include "schedule/list_outcomes.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "pulse/schedule/schedule_memo.hpp"
#include "pulse/simulate/simulate.hpp"
#include "schedule/policy_search.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using detail::ListCandidate;
using detail::ListOutcome;
using detail::ListOutcomes;

ListCandidate outcome_candidate(int limit) {
  return ListCandidate{{0, 1, 1000}, {0}, {limit}};
}

TEST(ListOutcomes, AStoppedRunDecidesOnlyStopsNoLaterThanItsOwn) {
  const ListOutcome stopped{true, 10.0, {2}, {}};
  EXPECT_TRUE(stopped.decides(10.0));
  EXPECT_TRUE(stopped.decides(9.0));
  EXPECT_FALSE(stopped.decides(10.5));  // the run might end between 10 and 10.5: kept
  const ListOutcome complete{false, 12.0, {2}, {}};
  EXPECT_TRUE(complete.decides(1.0));
  EXPECT_TRUE(complete.decides(std::numeric_limits<double>::infinity()));
}

TEST(ListOutcomes, KeepsWhatDecidesMore) {
  ListOutcomes kept;
  EXPECT_FALSE(kept.find(outcome_candidate(1)));
  kept.keep(outcome_candidate(1), ListOutcome{true, 10.0, {1}, {}});
  kept.keep(outcome_candidate(1), ListOutcome{true, 9.0, {1}, {}});  // an earlier stop: less
  EXPECT_EQ(kept.find(outcome_candidate(1))->at_s, 10.0);
  kept.keep(outcome_candidate(1), ListOutcome{true, 11.0, {1}, {}});  // a later one: more
  EXPECT_EQ(kept.find(outcome_candidate(1))->at_s, 11.0);
  kept.keep(outcome_candidate(1), ListOutcome{false, 13.0, {1}, {}});  // complete: all
  EXPECT_FALSE(kept.find(outcome_candidate(1))->stopped);
  kept.keep(outcome_candidate(1), ListOutcome{true, 20.0, {1}, {}});
  EXPECT_FALSE(kept.find(outcome_candidate(1))->stopped);
  EXPECT_EQ(kept.find(outcome_candidate(1))->at_s, 13.0);
  EXPECT_FALSE(kept.find(outcome_candidate(2)));  // another limit, another candidate
}

TEST(ListOutcomes, OneSetPerModelMicrobatchesAndSplit) {
  ScheduleMemo memo;
  const std::vector<test::LayerSpec> layers(4, test::LayerSpec{});
  const LayerGraph g = LayerGraph::build(test::make_model(layers, {}), 0, 1);
  const PipelineModel a = build_pipeline_model(g, v_layout({0, 1, 2, 3, 4}, 2), SkipRouting::direct,
                                               test::free_links(2), false);
  PipelineModel b = a;
  b.stages[1].forward_s *= 2;
  const auto first = detail::list_outcomes(&memo, a, 4, false);
  EXPECT_EQ(detail::list_outcomes(&memo, a, 4, false), first);
  EXPECT_NE(detail::list_outcomes(&memo, a, 5, false), first);
  EXPECT_NE(detail::list_outcomes(&memo, a, 4, true), first);
  EXPECT_NE(detail::list_outcomes(&memo, b, 4, false), first);
  EXPECT_EQ(detail::list_outcomes(&memo, PipelineModel(a), 4, false), first);  // by value
  EXPECT_EQ(detail::list_outcomes(nullptr, a, 4, false), nullptr);
}

// A random pipeline: a V or a chain of one-layer stages with random forward times (backward
// twice), outputs and activations, over links slow enough to matter.
PipelineModel random_pipeline(std::mt19937& rng, bool v, int pp) {
  std::uniform_real_distribution<double> time(0.5, 3.0);
  std::uniform_int_distribution<int> bytes(1, 8);
  const int n = v ? 2 * pp : pp;
  std::vector<test::LayerSpec> layers;
  for (int i = 0; i < n; ++i) {
    layers.push_back({time(rng), 10, 100 * bytes(rng), 1000 * bytes(rng)});
  }
  std::vector<LayerId> first;
  for (int i = 0; i <= n; ++i) first.push_back(i);
  const LayerGraph g = LayerGraph::build(test::make_model(layers, {}), 0, 1);
  return build_pipeline_model(g, v ? v_layout(first, pp) : sequential_layout(first, pp),
                              v ? SkipRouting::direct : SkipRouting::forwarded,
                              test::uniform_links(pp, 2e3, 0.05), false);
}

// A policy search's room: each device's in-flight caps and free bytes, and the memory rule
// as each device's residency peak against those bytes.
struct Room {
  int memory_cap = 0;  // 0: M
  int safe_cap = 0;    // 0: M
  std::int64_t free_bytes = std::int64_t{1} << 40;
};

detail::SearchInput search_input(const PipelineModel& m, int M, const Room& room, double stop_at) {
  detail::SearchInput in;
  in.num_microbatches = M;
  in.memory_cap.assign(m.num_devices(), room.memory_cap > 0 ? room.memory_cap : M);
  in.safe_cap.assign(m.num_devices(), room.safe_cap > 0 ? room.safe_cap : M);
  in.free_bytes.assign(m.num_devices(), room.free_bytes);
  in.max_evaluations = 60;
  in.stop_at = stop_at;
  const std::int64_t free = room.free_bytes;
  in.fits = [free](const std::vector<std::int64_t>& resident_peaks) {
    for (std::int64_t peak : resident_peaks) {
      if (peak > free) return false;
    }
    return true;
  };
  return in;
}

TEST(ListOutcomes, SearchesSharingOutcomesFindWhatEachFindsAlone) {
  // Each model is searched at several rooms in turn, as one job does (a screen, its own
  // room, the probe and the curve at smaller ones, the full synthesis at the screen's room
  // again): every search with the shared outcomes has the answer of the same search
  // without them, to the op and the evaluation.
  //  - A room that shrinks after a larger one meets candidates stopped there at a shorter
  //    best, which decide nothing here: they must run again. A record that decided them
  //    anyway (ListOutcome::decides always true) fails here (model 9).
  //  - The rooms with a fourth and an eighth of the bytes close the windows of the V's later
  //    stages (policy_search.cpp, windows_for) where the larger rooms left them at the
  //    limits: a candidate keyed without its windows recalls another room's makespan, which
  //    the replay of a kept one refuses (an exception) or which decides another way.
  //  - Rooms that come back recall almost everything.
  std::mt19937 rng(20261130);
  int recalled = 0, computed = 0, searches = 0;
  for (int k = 0; k < 48; ++k) {
    const bool v = k % 2 == 0;
    const int pp = 2 + k % 3;
    const PipelineModel m = random_pipeline(rng, v, pp);
    const int M = 4 + k % 5;
    // The fullest device holds about this much at two microbatches in flight.
    const std::int64_t two = 2 * 8 * 1000 * (v ? 2 : 1);
    const std::vector<Room> rooms = {{0, 0, std::int64_t{1} << 40},
                                     {M, 1, two},
                                     {M, 1, two / 4},
                                     {M, 1, two / 8},
                                     {M, 2, 3 * two / 2},
                                     {3, 1, two},
                                     {0, 0, std::int64_t{1} << 40},
                                     {M, 2, 3 * two / 2},
                                     {3, 1, two}};
    ScheduleMemo memo;
    for (std::size_t i = 0; i < rooms.size(); ++i) {
      const double stop_at = i == 6 ? 1.0 : 0.0;  // a bound below every makespan, once
      const detail::SearchInput alone_in = search_input(m, M, rooms[i], stop_at);
      detail::SearchInput shared_in = search_input(m, M, rooms[i], stop_at);
      shared_in.outcomes = detail::list_outcomes(&memo, m, M, false);
      const detail::SearchResult alone = detail::search_list_schedules(m, alone_in);
      const detail::SearchResult shared = detail::search_list_schedules(m, shared_in);
      const std::string what = "model " + std::to_string(k) + ", room " + std::to_string(i);
      ++searches;
      ASSERT_EQ(alone.found, shared.found) << what;
      EXPECT_EQ(alone.makespan_s, shared.makespan_s) << what;
      EXPECT_EQ(alone.evaluations, shared.evaluations) << what;
      EXPECT_EQ(alone.limits, shared.limits) << what;
      EXPECT_EQ(alone.policy.forward_rank, shared.policy.forward_rank) << what;
      EXPECT_EQ(alone.policy.backward_rank, shared.policy.backward_rank) << what;
      EXPECT_EQ(alone.policy.active, shared.policy.active) << what;
      EXPECT_EQ(alone.schedule.device_ops, shared.schedule.device_ops) << what;
    }
    const ScheduleMemo::Counts c = memo.counts().list_outcomes;
    recalled += c.recalled;
    computed += c.computed;
  }
  // The sharing is exercised: most candidates of the repeated rooms are recalled.
  EXPECT_GT(recalled, computed / 2)
      << recalled << " recalled, " << computed << " computed, " << searches << " searches";
}

}  // namespace
}  // namespace pulse
