#include "pulse/simulate/event_runs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "pulse/cost/memory.hpp"
#include "pulse/simulate/engine.hpp"

namespace pulse {
namespace {

struct Added {
  double time;
  int run;
};

// Random runs (0 to 9 of them, each empty or up to 30 events, in order or shuffled, times
// on a coarse grid so that instants repeat within and across runs): sweep() visits every
// event added once, in time order, each with its own run, and ends an instant exactly where
// the next event's time differs (and after the last).
TEST(TimeRuns, SweepVisitsTheEventsInTimeOrderAndEndsEachInstant) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> runs_of(0, 9), size_of(0, 30), step(0, 2), coin(0, 3);
  detail::TimeRuns runs;
  int out_of_order = 0, several = 0, empty = 0;
  for (int trial = 0; trial < 500; ++trial) {
    runs.clear();
    std::vector<Added> all;
    const int n = runs_of(rng);
    several += n > 2;
    for (int r = 0; r < n; ++r) {
      std::vector<double> run;
      double t = step(rng);
      for (int k = size_of(rng); k > 0; --k) {
        run.push_back(t);
        t += step(rng) * 0.5;
      }
      empty += run.empty();
      if (coin(rng) == 0 && run.size() > 1) {
        std::shuffle(run.begin(), run.end(), rng);
        out_of_order += !std::is_sorted(run.begin(), run.end());
      }
      for (double x : run) {
        runs.add(x);
        all.push_back({x, r});
      }
      runs.end_run();
    }
    ASSERT_EQ(runs.num_runs(), static_cast<std::size_t>(n));
    std::vector<Added> got;
    std::vector<std::size_t> ends;  // how many events were visited at each instant's end
    std::size_t visited = 0;
    runs.sweep(
        [&](std::uint32_t r) {
          ASSERT_LT(r, static_cast<std::uint32_t>(n));
          got.push_back({0, static_cast<int>(r)});
          ++visited;
        },
        [&] { ends.push_back(visited); });
    // Each run's events, visited in the order of their times: the k-th event visited of
    // run r is its k-th smallest time.
    std::vector<std::vector<double>> by_run(n);
    for (const Added& a : all) by_run[a.run].push_back(a.time);
    for (auto& v : by_run) std::sort(v.begin(), v.end());
    std::vector<std::size_t> taken(n, 0);
    for (Added& g : got) g.time = by_run[g.run][taken[g.run]++];
    for (int r = 0; r < n; ++r) ASSERT_EQ(taken[r], by_run[r].size()) << "trial " << trial;
    ASSERT_EQ(got.size(), all.size());
    for (std::size_t k = 1; k < got.size(); ++k) {
      ASSERT_LE(got[k - 1].time, got[k].time) << "trial " << trial << " event " << k;
    }
    std::vector<std::size_t> expected_ends;
    for (std::size_t k = 0; k < got.size(); ++k) {
      if (k + 1 == got.size() || got[k + 1].time != got[k].time) expected_ends.push_back(k + 1);
    }
    ASSERT_EQ(ends, expected_ends) << "trial " << trial;
  }
  EXPECT_GT(out_of_order, 50);
  EXPECT_GT(several, 200);
  EXPECT_GT(empty, 20);
}

// The memory rule's charge, swept over runs of holds (each hold's start in one run, its
// end in another, as add_activation_runs lays out a stage's microbatches), is residency()'s
// over the same holds: random holds on a two-stage device, starts and ends on a coarse grid
// so that releases and allocations share instants.
TEST(TimeRuns, SweptChargeIsResidency) {
  // Two devices, four stages: device 0 runs stages 0 (where microbatches enter, with the
  // skip's 5 bytes) and 3.
  PipelineModel m;
  m.layout = v_layout({0, 1, 2, 3, 4}, 2);
  for (std::int64_t a : {7, 1, 1, 3}) {
    StageCost c;
    c.activation_bytes = a;
    m.stages.push_back(c);
  }
  m.skips.push_back(SkipPlacement{0, 0, 3, true, 5});
  const std::int64_t skip = skip_bytes_per_microbatch(m)[0];
  ASSERT_EQ(skip, 5);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> count_of(0, 12), at(0, 8), length(0, 4), order(0, 2);
  int shared_instants = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<ActivationHold> holds;
    detail::MemoryRuns runs;
    for (StageId s : {0, 3}) {
      std::vector<ActivationHold> mine;
      for (int k = count_of(rng); k > 0; --k) {
        const double from = at(rng) * 0.5;
        mine.push_back({s, from, from + length(rng) * 0.5});
      }
      if (order(rng) == 0) std::shuffle(mine.begin(), mine.end(), rng);
      const std::int64_t charged = m.stages[s].activation_bytes + (s == 0 ? skip : 0);
      for (const ActivationHold& h : mine) runs.runs.add(h.from_s);
      runs.end_run({0, 0, charged, s == 0 ? 1 : 0});
      for (const ActivationHold& h : mine) runs.runs.add(h.until_s);
      runs.end_run({0, 0, -charged, s == 0 ? -1 : 0});
      holds.insert(holds.end(), mine.begin(), mine.end());
    }
    for (const ActivationHold& a : holds) {
      for (const ActivationHold& b : holds) shared_instants += a.until_s == b.from_s;
    }
    const Residency expected = residency(m, 0, holds);
    const Residency got = detail::sweep_memory(runs).charged;
    ASSERT_EQ(got.peak_bytes, expected.peak_bytes) << "trial " << trial;
    ASSERT_EQ(got.max_inflight, expected.max_inflight) << "trial " << trial;
  }
  EXPECT_GT(shared_instants, 1000);
}

}  // namespace
}  // namespace pulse
