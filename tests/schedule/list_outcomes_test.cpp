// The list-schedule outcomes the policy searches of a job share (solver/schedule/
// list_outcomes.hpp): what is kept, and that a search which recalls them finds exactly what
// it finds alone. Likewise the synthesizer's own first run (policy_search.hpp, FirstRun).

#include "schedule/list_outcomes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "pulse/schedule/list_schedule.hpp"
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

// Two searches' results agree on all but the schedule: what was found, after how many
// evaluations, with which policy and limits.
void expect_same_search(const detail::SearchResult& a, const detail::SearchResult& b,
                        const std::string& what) {
  ASSERT_EQ(a.found, b.found) << what;
  EXPECT_EQ(a.makespan_s, b.makespan_s) << what;
  EXPECT_EQ(a.evaluations, b.evaluations) << what;
  EXPECT_EQ(a.limits, b.limits) << what;
  EXPECT_EQ(a.policy.forward_rank, b.policy.forward_rank) << what;
  EXPECT_EQ(a.policy.backward_rank, b.policy.backward_rank) << what;
  EXPECT_EQ(a.policy.active, b.policy.active) << what;
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
      expect_same_search(alone, shared, what);
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

// The synthesizer's heuristic as synthesize.cpp runs it (first_list_schedule): the
// portfolio's first candidate, with its records.
Schedule first_run(const PipelineModel& m, const detail::SearchInput& in, detail::FirstRun& run) {
  run = detail::first_candidate(m, in.num_microbatches, in.safe_cap);
  return list_schedule(m, in.num_microbatches, run.limits, false, run.policy, &run.makespan_s,
                       &run.checked, &run.ties);
}

TEST(PolicySearch, TheCallersFirstRunServesTheFirstCandidate) {
  // Given the caller's run of the heuristic, a search finds what it finds without it, to the
  // op and the evaluation, with or without the shared outcomes; where that run stays the
  // best, the result says so instead of holding its schedule, which is the search's own.
  std::mt19937 rng(20261202);
  int first_best = 0, other_best = 0;
  for (int k = 0; k < 36; ++k) {
    const bool v = k % 2 == 0;
    const int pp = 2 + k % 3;
    const PipelineModel m = random_pipeline(rng, v, pp);
    const int M = 4 + k % 5;
    const std::int64_t two = 2 * 8 * 1000 * (v ? 2 : 1);
    ScheduleMemo memo;
    for (const Room& room : {Room{0, 0, std::int64_t{1} << 40}, Room{M, 1, two},
                             Room{M, 2, 3 * two / 2}, Room{3, 1, two / 4}}) {
      const std::string what = "model " + std::to_string(k) + ", safe cap " +
                               std::to_string(room.safe_cap) + ", " +
                               std::to_string(room.free_bytes) + " bytes";
      const detail::SearchInput alone_in = search_input(m, M, room, 0.0);
      detail::FirstRun run;
      const Schedule heuristic = first_run(m, alone_in, run);
      const detail::SearchResult alone = detail::search_list_schedules(m, alone_in);
      for (const bool shared : {false, true}) {
        detail::SearchInput in = search_input(m, M, room, 0.0);
        in.first = &run;
        if (shared) in.outcomes = detail::list_outcomes(&memo, m, M, false);
        const detail::SearchResult with = detail::search_list_schedules(m, in);
        expect_same_search(alone, with, what);
        EXPECT_FALSE(alone.first) << what;
        if (with.first) {
          EXPECT_TRUE(with.schedule.device_ops.empty()) << what;
          EXPECT_EQ(alone.schedule.device_ops, heuristic.device_ops) << what;
          ++first_best;
        } else {
          EXPECT_EQ(alone.schedule.device_ops, with.schedule.device_ops) << what;
          ++other_best;
        }
      }
    }
  }
  EXPECT_GT(first_best, 0);  // both outcomes occur
  EXPECT_GT(other_best, 0);
}

TEST(PolicySearch, TakesTheFirstRunOnlyForItsOwnCandidate) {
  std::mt19937 rng(7);
  const PipelineModel m = random_pipeline(rng, true, 3);
  const int M = 6;
  const detail::SearchInput plain = search_input(m, M, Room{}, 0.0);
  detail::FirstRun run;
  first_run(m, plain, run);
  // Its outcome is taken, not run again: a run said to end sooner stays the best.
  detail::FirstRun sooner = run;
  sooner.makespan_s = run.makespan_s / 100;
  detail::SearchInput in = search_input(m, M, Room{}, 0.0);
  in.first = &sooner;
  const detail::SearchResult taken = detail::search_list_schedules(m, in);
  EXPECT_TRUE(taken.first);
  EXPECT_EQ(taken.makespan_s, sooner.makespan_s);
  // Another candidate's run (other limits, or window limits) is not the first's: the search
  // runs its own.
  const detail::SearchResult alone = detail::search_list_schedules(m, plain);
  detail::FirstRun other = sooner;
  for (int& limit : other.limits) limit += 1;
  detail::FirstRun windowed = sooner;
  windowed.policy.window_limit.assign(m.layout.num_stages(), 1);
  for (const detail::FirstRun* wrong : {&other, &windowed}) {
    in.first = wrong;
    const detail::SearchResult ran = detail::search_list_schedules(m, in);
    EXPECT_FALSE(ran.first);
    EXPECT_EQ(ran.makespan_s, alone.makespan_s);
  }
  // Nor with `seen`, which is shown every schedule.
  int shown = 0;
  in.first = &sooner;
  in.seen = [&shown](const Schedule&) { ++shown; };
  const detail::SearchResult seen = detail::search_list_schedules(m, in);
  EXPECT_FALSE(seen.first);
  EXPECT_EQ(seen.makespan_s, alone.makespan_s);
  EXPECT_GT(shown, 0);
}

}  // namespace
}  // namespace pulse
