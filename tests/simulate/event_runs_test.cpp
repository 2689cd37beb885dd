#include "pulse/simulate/event_runs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace pulse {
namespace {

using detail::MemEvent;

std::vector<double> times_of(const std::vector<MemEvent>& events) {
  std::vector<double> t;
  for (const MemEvent& e : events) t.push_back(e.time);
  return t;
}

// Random runs (0 to 9 of them, each empty or up to 30 events, in order or shuffled, times
// on a coarse grid so that instants repeat within and across runs): by_time() holds every
// event added, each with its own bytes, in time order, as sorting them all does.
TEST(EventRuns, MergingTheRunsIsSortingTheEvents) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> runs_of(0, 9), size_of(0, 30), step(0, 2), coin(0, 3);
  detail::EventRuns runs;
  int out_of_order = 0, several = 0;
  for (int trial = 0; trial < 500; ++trial) {
    runs.clear();
    std::vector<MemEvent> all;
    const int n = runs_of(rng);
    several += n > 2;
    for (int r = 0; r < n; ++r) {
      std::vector<MemEvent> run;
      double t = step(rng);
      for (int k = size_of(rng); k > 0; --k) {
        run.push_back({t, static_cast<std::int64_t>(all.size() + run.size()), r});
        t += step(rng) * 0.5;
      }
      if (coin(rng) == 0 && run.size() > 1) {
        std::shuffle(run.begin(), run.end(), rng);
        out_of_order += !std::is_sorted(run.begin(), run.end(),
                                        [](auto& a, auto& b) { return a.time < b.time; });
      }
      for (const MemEvent& e : run) runs.add(e);
      all.insert(all.end(), run.begin(), run.end());
      if (r + 1 < n) runs.end_run();  // the last run is ended by by_time()
    }
    const std::vector<MemEvent> got = runs.by_time();
    std::vector<MemEvent> expected = all;
    std::stable_sort(expected.begin(), expected.end(),
                     [](const MemEvent& a, const MemEvent& b) { return a.time < b.time; });
    ASSERT_EQ(times_of(got), times_of(expected)) << "trial " << trial;
    // The same events, each once (its activations field is its number).
    std::vector<std::int64_t> ids;
    for (const MemEvent& e : got) ids.push_back(e.activations);
    std::sort(ids.begin(), ids.end());
    for (std::size_t k = 0; k < ids.size(); ++k) ASSERT_EQ(ids[k], static_cast<std::int64_t>(k));
    for (const MemEvent& e : got) EXPECT_EQ(e.skips, all[e.activations].skips);
  }
  EXPECT_GT(out_of_order, 50);
  EXPECT_GT(several, 200);
}

}  // namespace
}  // namespace pulse
