#include "pulse/simulate/schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pulse/schedule/list_schedule.hpp"
#include "pulse/simulate/engine.hpp"
#include "pulse/simulate/schedule_check.hpp"
#include "pulse/simulate/simulate.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

// A pipeline model over synthetic layers, one layer per stage.
PipelineModel one_layer_per_stage(const std::vector<double>& forward_s, bool v, double bandwidth,
                                  double latency, std::int64_t out_bytes = 1000) {
  std::vector<test::LayerSpec> layers;
  for (double f : forward_s) layers.push_back({f, 10, 100, out_bytes});
  std::vector<std::pair<int, int>> skips;
  const int n = static_cast<int>(forward_s.size());
  if (v) {
    for (int i = 0; i < n / 2 - 1; ++i) skips.push_back({i, n - 1 - i});
  }
  const LayerGraph g = LayerGraph::build(test::make_model(layers, skips, 500), 0, 1);
  std::vector<LayerId> first;
  for (int i = 0; i <= n; ++i) first.push_back(i);
  const int pp = v ? n / 2 : n;
  const StageLayout layout = v ? v_layout(first, pp) : sequential_layout(first, pp);
  return build_pipeline_model(g, layout, v ? SkipRouting::direct : SkipRouting::forwarded,
                              test::uniform_links(pp, bandwidth, latency), false);
}

// The property tests' random pipelines: trial by trial a V or a chain of 1-8 stages, half
// with equal stage costs (0.5-3 s), no latency every third trial, a limit of 1-4 in flight
// per device; and random ranks (0-3) for its stages, drawn when asked for.
struct RandomPipeline {
  RandomPipeline(std::mt19937& rng, int trial) : rng_(rng) {
    std::uniform_real_distribution<double> cost(0.5, 3.0);
    std::uniform_int_distribution<int> limit(1, 4);
    const bool v = trial % 2 == 0;
    const int stages = v ? 2 * (1 + trial % 4) : 1 + trial % 5;
    std::vector<double> f;
    const double flat = cost(rng);
    for (int s = 0; s < stages; ++s) f.push_back(trial % 4 < 2 ? flat : cost(rng));
    model = one_layer_per_stage(f, v, 2000, trial % 3 == 0 ? 0.0 : 0.01);
    for (int d = 0; d < model.num_devices(); ++d) limits.push_back(limit(rng));
  }

  ListPolicy random_policy() {
    std::uniform_int_distribution<int> rank(0, 3);
    const int stages = model.layout.num_stages();
    ListPolicy p = ListPolicy::backward_first(stages);
    for (int st = 0; st < stages; ++st) {
      p.forward_rank[st] = rank(rng_);
      p.backward_rank[st] = rank(rng_);
    }
    return p;
  }

  PipelineModel model;
  std::vector<int> limits;

 private:
  std::mt19937& rng_;
};

Timeline run(const PipelineModel& m, int M, const std::vector<int>& limits, bool split = false) {
  const Schedule s = list_schedule(m, M, limits, split);
  const std::vector<MemoryBreakdown> zero(m.num_devices());
  auto t = simulate(m, s, M, zero);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  ScheduleCheckRequest check{&m, &t.value(), M, split, zero, std::int64_t{1} << 40};
  const auto problems = check_schedule(check);
  EXPECT_TRUE(problems.empty()) << problems.front();
  return t.value();
}

TEST(ListSchedule, ChainReproducesOneFOneB) {
  // Equal stages without communication: 1F1B takes (P - 1 + M) (f + b) and idles
  // (P - 1) / (M + P - 1) of the time.
  for (int P : {2, 3, 4, 8}) {
    for (int M : {1, P, 2 * P, 5 * P}) {
      const PipelineModel m = one_layer_per_stage(std::vector<double>(P, 1.0), false, 1e30, 0);
      const Timeline t = run(m, M, default_inflight(m.layout, M));
      EXPECT_DOUBLE_EQ(t.makespan_s, 3.0 * (P - 1 + M)) << "P " << P << " M " << M;
      double idle = 0;
      for (const auto& d : t.devices) idle += d.idle_s;
      EXPECT_NEAR(idle / (P * t.makespan_s), double(P - 1) / (M + P - 1), 1e-12);
      // 1F1B never holds more than P - s microbatches on stage s.
      for (int s = 0; s < P; ++s) EXPECT_LE(t.devices[s].max_inflight, std::min(M, P - s));
    }
  }
}

TEST(ListSchedule, RanksBeyondTheKeysFieldAreRefused) {
  // A candidate's rank, microbatch, stage and device share one 64-bit word, 16 bits each:
  // a rank outside [-2^15, 2^15) would wrap into its neighbours' bits, so it is refused.
  const PipelineModel m = one_layer_per_stage({0.001, 0.002}, false, 1e30, 0);
  ListPolicy p = ListPolicy::backward_first(2);
  p.forward_rank[1] = (1 << 15) - 1;
  p.backward_rank[0] = -(1 << 15);
  EXPECT_NO_THROW(list_schedule(m, 3, {2, 2}, false, p));
  p.forward_rank[1] = 1 << 15;
  EXPECT_THROW(list_schedule(m, 3, {2, 2}, false, p), std::invalid_argument);
  p.forward_rank[1] = 0;
  p.backward_rank[0] = -(1 << 15) - 1;
  EXPECT_THROW(list_schedule(m, 3, {2, 2}, false, p), std::invalid_argument);
}

TEST(ListSchedule, SingleDeviceRunsEverythingBackToBack) {
  // pp 1: stages 0 and 1 on one device, 1 + 2 ms forward, twice that backward, M = 5.
  const PipelineModel m = one_layer_per_stage({0.001, 0.002}, true, 1e30, 0);
  const Timeline t = run(m, 5, {5});
  EXPECT_NEAR(t.makespan_s, 5 * 0.009, 1e-12);
  EXPECT_NEAR(t.devices[0].idle_s, 0.0, 1e-12);
}

TEST(ListSchedule, TransferTimeDelaysTheReceiver) {
  // Two stages on two devices, 1 s each way of compute, a 1000-byte output on a 1000 B/s
  // link with 0.5 s latency: the message takes 1.5 s. One microbatch:
  // F0 [0,1] send [1,2.5] F1 [2.5,3.5] B1 [3.5,5.5] send [5.5,7] B0 [7,9].
  const PipelineModel m = one_layer_per_stage({1.0, 1.0}, false, 1000, 0.5);
  const Timeline t = run(m, 1, {1, 1});
  EXPECT_DOUBLE_EQ(t.makespan_s, 9.0);
  EXPECT_DOUBLE_EQ(t.devices[1].ops[0].start_s, 2.5);
  EXPECT_DOUBLE_EQ(t.devices[0].ops[0].busy_until_s, 2.5);
  EXPECT_DOUBLE_EQ(t.devices[0].send_s, 1.5);  // the activation forward
  EXPECT_DOUBLE_EQ(t.devices[1].send_s, 1.5);  // its gradient back
}

// Most microbatches of stage s at once between its forward's start and its last backward's
// end, from the replayed op times.
int most_in_window(const Timeline& t, const PipelineModel& m, StageId s, bool split) {
  const OpKind last = split ? OpKind::backward_weight : OpKind::backward;
  std::vector<std::pair<double, int>> events;
  for (const TimedOp& op : t.devices[m.layout.device[s]].ops) {
    if (op.op.stage != s) continue;
    if (op.op.kind == OpKind::forward) events.push_back({op.start_s, +1});
    if (op.op.kind == last) events.push_back({op.end_s, -1});
  }
  std::sort(events.begin(), events.end());
  int open = 0, most = 0;
  for (const auto& e : events) most = std::max(most, open += e.second);
  return most;
}

TEST(ListSchedule, WindowLimitsKeepLaterStagesApart) {
  // Three microbatches in flight per device, forward first (which likes to run a second
  // microbatch's later stage before the first one's backward). With a window limit of one
  // on every later stage, no two microbatches overlap there; without it, some do.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> cost(0.5, 3.0);
  int overlapping_without = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const int stages = 2 * (2 + trial % 3);
    std::vector<double> f;
    for (int s = 0; s < stages; ++s) f.push_back(cost(rng));
    const PipelineModel m = one_layer_per_stage(f, true, 2000, 0.01);
    const std::vector<int> limits(m.num_devices(), 3);
    for (bool split : {false, true}) {
      ListPolicy policy = ListPolicy::forward_first(stages);
      const Schedule free_order = list_schedule(m, 8, limits, split, policy);
      policy.window_limit.assign(stages, 0);
      for (StageId s = stages / 2; s < stages; ++s) policy.window_limit[s] = 1;
      const Schedule s = list_schedule(m, 8, limits, split, policy);
      const std::vector<MemoryBreakdown> zero(m.num_devices());
      const Timeline limited = simulate(m, s, 8, zero).value();
      const Timeline unlimited = simulate(m, free_order, 8, zero).value();
      for (StageId st = stages / 2; st < stages; ++st) {
        EXPECT_EQ(most_in_window(limited, m, st, split), 1) << "trial " << trial << " stage " << st;
        overlapping_without += most_in_window(unlimited, m, st, split) > 1;
      }
      for (int d = 0; d < m.num_devices(); ++d) EXPECT_LE(limited.devices[d].max_inflight, 3);
    }
  }
  EXPECT_GT(overlapping_without, 0);
}

TEST(ListSchedule, RandomPipelinesAreValidAndRespectLimits) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.5, 3.0);
  std::uniform_int_distribution<int> limit(1, 4);
  for (int trial = 0; trial < 40; ++trial) {
    const bool v = trial % 2 == 0;
    const int stages = v ? 2 * (1 + trial % 4) : 1 + trial % 5;
    std::vector<double> f;
    for (int s = 0; s < stages; ++s) f.push_back(cost(rng));
    const PipelineModel m = one_layer_per_stage(f, v, 2000, 0.01);
    std::vector<int> limits;
    for (int d = 0; d < m.num_devices(); ++d) limits.push_back(limit(rng));
    const int M = 1 + trial % 9;
    for (bool split : {false, true}) {
      const Timeline t = run(m, M, limits, split);
      for (int d = 0; d < m.num_devices(); ++d) EXPECT_LE(t.devices[d].max_inflight, limits[d]);
    }
  }
}

// Both uniform rules, and the active rule on backward-first ranks.
std::vector<ListPolicy> uniform_and_active(int num_stages) {
  ListPolicy active = ListPolicy::backward_first(num_stages);
  active.active = true;
  return {ListPolicy::backward_first(num_stages), ListPolicy::forward_first(num_stages), active};
}

TEST(ListSchedule, ResidentPeaksAreTheReplays) {
  // The policy search checks the memory rule on the list scheduler's own residency peaks
  // (list_schedule's resident_peaks) instead of replaying the schedule: they must be the
  // replay's, device by device, to the byte. Random V and chain pipelines, both backward
  // forms, both uniform rules and the active one, limits that bind and that do not; a stopped
  // run leaves them as they were.
  std::mt19937 rng(20261201);
  int compared = 0, differ_by_device = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const RandomPipeline pipeline(rng, trial);
    const PipelineModel& m = pipeline.model;
    const std::vector<int>& limits = pipeline.limits;
    const int M = 2 + trial % 9;
    const int S = m.layout.num_stages();
    for (bool split : {false, true}) {
      for (const ListPolicy& policy : uniform_and_active(S)) {
        double makespan = 0;
        std::vector<std::int64_t> peaks;
        const Schedule s = list_schedule(m, M, limits, split, policy, &makespan, nullptr, nullptr,
                                         nullptr, &peaks);
        const auto t =
            simulate(m, s, M, std::vector<MemoryBreakdown>(m.num_devices()), Peaks::rule_only);
        ASSERT_TRUE(t.ok());
        ASSERT_EQ(peaks.size(), t->devices.size());
        for (std::size_t d = 0; d < peaks.size(); ++d) {
          EXPECT_EQ(peaks[d], t->devices[d].resident_peak) << "trial " << trial << " device " << d;
          differ_by_device += peaks[d] != peaks[0];
        }
        ++compared;
        ListStop stop;
        stop.at = makespan / 2;
        std::vector<std::int64_t> untouched{-1};
        list_schedule(m, M, limits, split, policy, nullptr, nullptr, nullptr, &stop, &untouched);
        ASSERT_TRUE(stop.stopped);
        EXPECT_EQ(untouched, std::vector<std::int64_t>{-1});
      }
    }
  }
  EXPECT_EQ(compared, 240);
  EXPECT_GT(differ_by_device, 0);  // the peaks are per device, not one figure
}

TEST(ListSchedule, ItsReplayIsSimulatesToTheBit) {
  // The synthesizer takes the heuristic's replay from the list scheduler (ListReplay)
  // instead of replaying its schedule: every figure must be the replay's, rule-only or held. Random
  // V and chain pipelines, both backward forms, both uniform rules and the active one, static state
  // that differs by device.
  std::mt19937 rng(20261202);
  int compared = 0, held_differs = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const RandomPipeline pipeline(rng, trial);
    const PipelineModel& m = pipeline.model;
    const int M = 2 + trial % 9;
    const int S = m.layout.num_stages();
    std::vector<MemoryBreakdown> state(m.num_devices());
    for (int d = 0; d < m.num_devices(); ++d) {
      state[d].weights = 1000 + d;
      state[d].gradients = 200 + 3 * d;
      state[d].optimizer = 70 * (d + 1);
      state[d].workspace = 5 + d;
    }
    for (bool split : {false, true}) {
      for (const ListPolicy& policy : uniform_and_active(S)) {
        ListReplay replay;
        replay.static_bytes = &state;
        const Schedule s = list_schedule(m, M, pipeline.limits, split, policy, nullptr, nullptr,
                                         nullptr, nullptr, nullptr, &replay);
        const auto t = simulate(m, s, M, state, Peaks::rule_only);
        ASSERT_TRUE(t.ok());
        const std::string what = "trial " + std::to_string(trial);
        test::expect_same_timeline(replay.timeline, *t, what);
        for (std::size_t d = 0; d < t->devices.size(); ++d) {
          EXPECT_EQ(replay.timeline.devices[d].sends.size(), t->devices[d].sends.size()) << what;
        }
        ++compared;
        // The comparison sees every peak figure: the held replay's differ.
        const auto held = simulate(m, s, M, state, Peaks::held);
        ASSERT_TRUE(held.ok());
        for (std::size_t d = 0; d < held->devices.size(); ++d) {
          held_differs += held->devices[d].peak.total() != replay.timeline.devices[d].peak.total();
        }
        // Asked for the held peaks (the 1F1B family's answer, synthesize.cpp), the replay is
        // the held one's.
        ListReplay holding;
        holding.static_bytes = &state;
        holding.peaks = Peaks::held;
        list_schedule(m, M, pipeline.limits, split, policy, nullptr, nullptr, nullptr, nullptr,
                      nullptr, &holding);
        test::expect_same_timeline(holding.timeline, *held, what + ", held");
        // Asked for the last ops alone (a point of the memory curve), the replay is
        // with_last_ops of the whole one: the same figures, the same ops kept.
        ListReplay figures;
        figures.static_bytes = &state;
        figures.last_ops_only = true;
        list_schedule(m, M, pipeline.limits, split, policy, nullptr, nullptr, nullptr, nullptr,
                      nullptr, &figures);
        const Timeline kept = with_last_ops(*t);
        test::expect_same_timeline(figures.timeline, kept, what + ", last ops");
        EXPECT_FALSE(figures.timeline.peaks_held) << what;
      }
    }
  }
  EXPECT_EQ(compared, 240);
  EXPECT_GT(held_differs, 0);
}

TEST(ListSchedule, LastOpsRecordedAsTheyRunAreTheOnesKeptAfter) {
  // record_last_op, then keep_last_ops, keeps what keep_last_ops keeps of the whole list:
  // the last op, after the first op of the latest microbatch where the last is of an earlier
  // one (the list scheduler's own devices end on their latest microbatch, so by hand:
  // microbatches 0, 2, 1, 2, 1 keep the first 2 and the last 1; 0, 1, 2 keep the 2 alone),
  // with record_op's sums.
  for (const std::vector<int>& mbs :
       {std::vector<int>{0, 2, 1, 2, 1}, std::vector<int>{0, 1, 2}, std::vector<int>{3}}) {
    Timeline whole, figures, side;
    whole.devices.resize(1);
    figures.devices.resize(1);
    side.devices.resize(1);
    detail::LastOpsRecorder recorder(1);
    double at = 0;
    for (int mb : mbs) {
      const TimedOp op{{OpKind::forward, 0, mb}, at, at + 1.5, at + 1.75};
      at += 2;
      detail::record_op(whole, 0, op);
      detail::record_last_op(figures, 0, op);
      recorder.record(0, op);
    }
    recorder.put(side);
    test::expect_same_timeline(side, figures, "side by side, " + std::to_string(mbs.size()));
    keep_last_ops(figures);
    keep_last_ops(whole);
    const std::vector<TimedOp>& k = figures.devices[0].ops;
    ASSERT_EQ(k.size(), mbs.size() == 5 ? 2u : 1u);
    if (mbs.size() == 5) {
      EXPECT_EQ(k[0].start_s, 2.0);  // the first op of microbatch 2
    }
    test::expect_same_timeline(figures, whole, "microbatches " + std::to_string(mbs.size()));
  }
}

TEST(ListSchedule, LimitsAboveWhatWasCheckedChangeNothing) {
  // The policy search skips a candidate whose limits differ from a scored one only above
  // what that run held when it consulted them: the schedule must be the same op for op.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> cost(0.5, 3.0);
  std::uniform_int_distribution<int> limit(1, 4);
  int raised = 0, binding_changed = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const bool v = trial % 2 == 0;
    const int stages = v ? 2 * (1 + trial % 4) : 1 + trial % 5;
    std::vector<double> f;
    for (int s = 0; s < stages; ++s) f.push_back(cost(rng));
    const PipelineModel m = one_layer_per_stage(f, v, 2000, 0.01);
    std::vector<int> limits;
    for (int d = 0; d < m.num_devices(); ++d) limits.push_back(limit(rng));
    const int M = 2 + trial % 9;
    for (bool split : {false, true}) {
      const ListPolicy policy = trial % 3 == 0 ? ListPolicy::forward_first(m.layout.num_stages())
                                               : ListPolicy::backward_first(m.layout.num_stages());
      double makespan = 0;
      std::vector<int> checked;
      const Schedule s = list_schedule(m, M, limits, split, policy, &makespan, &checked);
      ASSERT_EQ(checked.size(), limits.size());
      for (int d = 0; d < m.num_devices(); ++d) {
        EXPECT_LE(checked[d], limits[d]);
        std::vector<int> more = limits;
        more[d] += 1 + trial % 3;
        double other_makespan = 0;
        const Schedule t = list_schedule(m, M, more, split, policy, &other_makespan);
        if (checked[d] < limits[d]) {
          ++raised;
          EXPECT_EQ(t.device_ops, s.device_ops) << "trial " << trial << " device " << d;
          EXPECT_EQ(other_makespan, makespan);
        } else if (t.device_ops != s.device_ops) {
          ++binding_changed;  // a limit that was reached does matter (the test has teeth)
        }
      }
    }
  }
  EXPECT_GT(raised, 20);
  EXPECT_GT(binding_changed, 5);
}

TEST(ListSchedule, RanksThatOrderEveryTieAlikeChangeNothing) {
  // The policy search skips a plain-rule candidate whose ranks order every pair in a scored
  // run's ListTies as that run's ranks did: its schedule must be that run's, op for op (and
  // its makespan and in-flight figures too). Half the pipelines have equal stage costs, where
  // devices start ops at the same times and the order between devices varies with the ranks.
  std::mt19937 rng(13);
  int alike = 0, differ = 0, skipped_differently = 0;
  for (int trial = 0; trial < 60; ++trial) {
    RandomPipeline pipe(rng, trial);
    const PipelineModel& m = pipe.model;
    const std::vector<int>& limits = pipe.limits;
    const int M = 2 + trial % 7;
    const auto random_policy = [&pipe] { return pipe.random_policy(); };
    for (bool split : {false, true}) {
      const ListPolicy ref = random_policy();
      double makespan = 0;
      std::vector<int> checked;
      ListTies ties;
      const Schedule s = list_schedule(m, M, limits, split, ref, &makespan, &checked, &ties);
      ASSERT_TRUE(ties.complete);
      for (int other = 0; other < 12; ++other) {
        const ListPolicy p = random_policy();
        double other_makespan = 0;
        std::vector<int> other_checked;
        const Schedule t = list_schedule(m, M, limits, split, p, &other_makespan, &other_checked);
        if (same_rank_order(ties, ref, p)) {
          ++alike;
          EXPECT_EQ(t.device_ops, s.device_ops) << "trial " << trial << " policy " << other;
          EXPECT_EQ(other_makespan, makespan);
          EXPECT_EQ(other_checked, checked);
        } else if (t.device_ops != s.device_ops) {
          ++differ;  // an order the ties did decide (the test has teeth)
        }
        if (p.forward_rank != ref.forward_rank || p.backward_rank != ref.backward_rank) {
          skipped_differently += same_rank_order(ties, ref, p) ? 1 : 0;
        }
      }
    }
  }
  EXPECT_GT(alike, 100);
  EXPECT_GT(differ, 100);
  EXPECT_GT(skipped_differently, 100);  // other ranks, same schedule: what the search saves
}

TEST(ListSchedule, StoppedRunsAndTheirRepeatsEndNoEarlierThanTheStop) {
  // ListStop: a run that is not stopped is the plain run op for op; a stopped one had a plain
  // makespan of at least `at`; and a run whose ranks order the stopped run's ties alike, at
  // limits equal or both above its checked counts, is no shorter either (the policy search
  // skips it). Stops at fractions of the plain makespan around 1.
  std::mt19937 rng(17);
  int stopped = 0, kept = 0, repeats = 0, repeats_shorter_elsewhere = 0;
  for (int trial = 0; trial < 24; ++trial) {
    RandomPipeline pipe(rng, trial);
    const PipelineModel& m = pipe.model;
    const std::vector<int>& limits = pipe.limits;
    const int M = 3 + trial % 6;
    const auto random_policy = [&pipe] { return pipe.random_policy(); };
    for (bool split : {false, true}) {
      const ListPolicy ref = random_policy();
      double plain = 0;
      const Schedule whole = list_schedule(m, M, limits, split, ref, &plain);
      for (double fraction : {0.5, 0.8, 0.95, 1.0, 1.0 + 1e-6, 1.5}) {
        ListStop stop;
        stop.at = plain * fraction;
        double makespan = 0;
        std::vector<int> checked;
        ListTies ties;
        const Schedule s =
            list_schedule(m, M, limits, split, ref, &makespan, &checked, &ties, &stop);
        if (!stop.stopped) {
          ++kept;
          EXPECT_EQ(s.device_ops, whole.device_ops) << "trial " << trial;
          EXPECT_EQ(makespan, plain);
          continue;
        }
        ++stopped;
        EXPECT_GE(plain, stop.at) << "trial " << trial << " at " << fraction;
        ASSERT_TRUE(ties.complete);
        for (int other = 0; other < 8; ++other) {
          const ListPolicy p = random_policy();
          std::vector<int> more = limits;
          for (std::size_t d = 0; d < more.size(); ++d)
            if (checked[d] < more[d]) more[d] += other % 3;
          double other_makespan = 0;
          list_schedule(m, M, more, split, p, &other_makespan);
          if (same_rank_order(ties, ref, p)) {
            ++repeats;
            EXPECT_GE(other_makespan, stop.at) << "trial " << trial << " policy " << other;
          } else if (other_makespan < stop.at) {
            ++repeats_shorter_elsewhere;  // ranks that differ on a tie can do better
          }
        }
      }
    }
  }
  EXPECT_GT(stopped, 40);
  EXPECT_GT(kept, 40);
  EXPECT_GT(repeats, 100);
  EXPECT_GT(repeats_shorter_elsewhere, 5);
}

// The list rule as list_schedule.hpp states it, with nothing cached: before every step, every
// device's candidates from scratch (the next forward of each of its stages while it has room,
// the next B or I and W once their predecessor ran), ready times from the execution engine,
// each device's least key (ready, rank, microbatch, later stage) and the least over devices;
// the checked counts and the tied pairs of every device at every step (ListTies' packing).
// ListScheduler computes the same incrementally: each device's best is kept between the
// steps that change it, and a device that did not run gains one candidate at a time.
struct NaiveRun {
  std::vector<std::vector<Op>> device_ops;
  double makespan = 0;
  std::vector<int> checked;
  std::vector<std::uint64_t> pairs;
};

NaiveRun naive_list_schedule(const PipelineModel& m, int M, const std::vector<int>& limits,
                             bool split, const ListPolicy& p) {
  const int S = m.layout.num_stages(), P = m.num_devices();
  const OpKind back = split ? OpKind::backward_input : OpKind::backward;
  detail::ExecutionEngine engine(m, M);
  std::vector<int> next_f(S, 0), next_b(S, 0), next_w(S, 0), open(S, 0), inflight(P, 0);
  NaiveRun out;
  out.device_ops.assign(P, {});
  out.checked.assign(P, 0);
  using Key = std::tuple<double, int, int, int, int>;
  const auto rank = [&](const Op& op) {
    return op.kind == OpKind::forward           ? p.forward_rank[op.stage]
           : op.kind == OpKind::backward_weight ? p.weight_rank[op.stage]
                                                : p.backward_rank[op.stage];
  };
  const auto slot = [](const Op& op) -> std::uint64_t {
    return static_cast<std::uint64_t>(op.stage) * 3 + (op.kind == OpKind::forward           ? 0
                                                       : op.kind == OpKind::backward_weight ? 2
                                                                                            : 1);
  };
  std::set<std::uint64_t> pairs;
  for (int step = 0; step < S * M * (split ? 3 : 2); ++step) {
    std::optional<std::pair<Key, Op>> winner;
    for (DeviceId d = 0; d < P; ++d) {
      const std::vector<StageId> stages = m.layout.stages_on(d);
      std::vector<std::pair<Key, Op>> cands;
      for (StageId s : stages) {
        const bool admits = s == stages.front();
        if (admits && next_f[s] < M) out.checked[d] = std::max(out.checked[d], inflight[d]);
        const bool window =
            p.window_limit.empty() || p.window_limit[s] <= 0 || open[s] < p.window_limit[s];
        std::vector<Op> ops;
        if (next_f[s] < M && (admits ? inflight[d] < limits[d] : window)) {
          ops.push_back({OpKind::forward, s, next_f[s]});
        }
        if (next_b[s] < next_f[s]) ops.push_back({back, s, next_b[s]});
        if (split && next_w[s] < next_b[s]) ops.push_back({OpKind::backward_weight, s, next_w[s]});
        for (const Op& op : ops) {
          const double ready = engine.ready_at(op);
          if (!std::isnan(ready)) cands.push_back({Key{ready, rank(op), op.mb, -op.stage, d}, op});
        }
      }
      if (cands.empty()) continue;
      const auto best =
          *std::min_element(cands.begin(), cands.end(),
                            [](const auto& a, const auto& b) { return a.first < b.first; });
      for (std::size_t i = 0; i < cands.size(); ++i) {
        for (std::size_t j = i + 1; j < cands.size(); ++j) {
          if (std::get<0>(cands[i].first) != std::get<0>(best.first) ||
              std::get<0>(cands[j].first) != std::get<0>(best.first)) {
            continue;
          }
          const Op& a = cands[i].second;
          const Op& b = cands[j].second;
          const bool a_first = std::pair(a.mb, -a.stage) < std::pair(b.mb, -b.stage);
          const std::uint64_t sa = slot(a), sb = slot(b);
          pairs.insert(sa < sb ? (sa << 33 | sb << 1 | (a_first ? 1 : 0))
                               : (sb << 33 | sa << 1 | (a_first ? 0 : 1)));
        }
      }
      if (!winner || best.first < winner->first) winner = best;
    }
    if (!winner) {
      ADD_FAILURE() << "deadlock at step " << step;
      return out;
    }
    const Op op = winner->second;
    const DeviceId d = m.layout.device[op.stage];
    out.makespan = std::max(out.makespan, engine.execute(op).busy_until_s);
    out.device_ops[d].push_back(op);
    const bool admits = op.stage == m.layout.stages_on(d).front();
    if (op.kind == OpKind::forward) {
      ++next_f[op.stage];
      ++open[op.stage];
      if (admits) ++inflight[d];
    } else if (op.kind == OpKind::backward_weight) {
      ++next_w[op.stage];
    } else {
      ++next_b[op.stage];
    }
    if (op.kind == OpKind::backward_weight || (op.kind != OpKind::forward && !split)) {
      --open[op.stage];
      if (admits) --inflight[d];
    }
  }
  out.pairs.assign(pairs.begin(), pairs.end());
  return out;
}

TEST(ListSchedule, TheSchedulerIsTheNaiveRulesScheduleOpForOp) {
  // Random pipelines, ranks, in-flight limits, windows on half the runs, with and without a
  // split backward: the same ops in the same order on every device, the same makespan to
  // the bit, the same checked counts and the same tied pairs as the naive rule's.
  std::mt19937 rng(17);
  int runs = 0, with_pairs = 0;
  for (int trial = 0; trial < 80; ++trial) {
    RandomPipeline pipe(rng, trial);
    const PipelineModel& m = pipe.model;
    const int M = 2 + trial % 7;
    for (bool split : {false, true}) {
      ListPolicy policy =
          trial % 5 == 0 ? ListPolicy::backward_first(m.layout.num_stages()) : pipe.random_policy();
      if (trial % 2 == 1) {
        std::uniform_int_distribution<int> window(0, 3);
        policy.window_limit.clear();
        for (int s = 0; s < m.layout.num_stages(); ++s) policy.window_limit.push_back(window(rng));
      }
      double makespan = 0;
      std::vector<int> checked;
      ListTies ties;
      const Schedule s =
          list_schedule(m, M, pipe.limits, split, policy, &makespan, &checked, &ties);
      const NaiveRun naive = naive_list_schedule(m, M, pipe.limits, split, policy);
      ++runs;
      EXPECT_EQ(s.device_ops, naive.device_ops) << "trial " << trial << " split " << split;
      EXPECT_EQ(makespan, naive.makespan) << "trial " << trial;
      EXPECT_EQ(checked, naive.checked) << "trial " << trial;
      ASSERT_TRUE(ties.complete);
      EXPECT_EQ(ties.pairs, naive.pairs) << "trial " << trial << " split " << split;
      with_pairs += naive.pairs.empty() ? 0 : 1;
    }
  }
  EXPECT_EQ(runs, 160);
  EXPECT_GT(with_pairs, 60);  // ties happen: the pairs are compared, not two empty lists
}

TEST(ListSchedule, TiesAreIncompleteUnderTheActiveRuleOrWithOpsOfNoLength) {
  const PipelineModel m = one_layer_per_stage({1.0, 1.0, 1.0, 1.0}, true, 2000, 0.01);
  ListPolicy p = ListPolicy::backward_first(m.layout.num_stages());
  ListTies ties;
  list_schedule(m, 4, {2, 2}, false, p, nullptr, nullptr, &ties);
  EXPECT_TRUE(ties.complete);
  p.active = true;
  list_schedule(m, 4, {2, 2}, false, p, nullptr, nullptr, &ties);
  EXPECT_FALSE(ties.complete);
  // An op of no length can make another device's op ready at the time it starts itself: then
  // the order between devices matters, and the pairs are not all the ranks decided.
  const PipelineModel zero = one_layer_per_stage({1.0, 0.0, 1.0, 1.0}, true, 2000, 0.0, 0);
  list_schedule(zero, 4, {2, 2}, false, ListPolicy::backward_first(4), nullptr, nullptr, &ties);
  EXPECT_FALSE(ties.complete);
}

TEST(Simulate, RejectsMissingDuplicateAndDeadlockedSchedules) {
  const PipelineModel m = one_layer_per_stage({1.0, 1.0}, false, 1e30, 0);
  const std::vector<MemoryBreakdown> zero(2);
  Schedule s = list_schedule(m, 2, {2, 1});
  Schedule missing = s;
  missing.device_ops[0].pop_back();
  EXPECT_EQ(simulate(m, missing, 2, zero).error().message, "schedule has 7 operations, expected 8");
  Schedule twice = s;
  twice.device_ops[0][1] = twice.device_ops[0][0];
  EXPECT_EQ(simulate(m, twice, 2, zero).error().message,
            "device 0: F(stage 0, microbatch 0) appears twice");
  // Device 0 insists on B0 of microbatch 0 before F0 of microbatch 0 exists: deadlock.
  Schedule stuck = s;
  std::swap(stuck.device_ops[0][0], stuck.device_ops[0].back());
  const auto r = simulate(m, stuck, 2, zero);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("schedule deadlocks: device 0 waits at"), std::string::npos);
}

TEST(Simulate, TransfersWaitForTheirLinkOneDirectionOfOneDevicePair) {
  // A V on two devices (stages 0 and 3 on device 0, 1 and 2 on device 1), F and B 1 s,
  // sends overlapping compute, and three transfers: T0 stage 0 -> 1 (0.5 s) and T1 stage
  // 0 -> 2 (5 s), both on the link from device 0 to device 1, and T2 stage 2 -> 3 (0.4 s)
  // on the link back. F0 of microbatch 0 ends at 1: T0 [1, 1.5], then T1 waits for the
  // link: [1.5, 6.5]. F0 of microbatch 1 [1, 2]: T0 [6.5, 7], T1 [7, 12]. F1 [1.5, 2.5],
  // F2 waits for T1: [6.5, 7.5], and T2 goes the other way at once: [7.5, 7.9], though
  // the link from device 0 is busy until 12. One link per transfer would give T1 1.3; one
  // per device pair both ways, T2 12.4.
  PipelineModel m = one_layer_per_stage({1.0, 1.0, 1.0, 1.0}, true, 1e30, 0.0);
  m.overlap_comm = true;
  for (StageCost& c : m.stages) c.backward_s = 1.0;
  m.transfers.clear();
  const auto transfer = [](StageId from, StageId to, double seconds) {
    Transfer t;
    t.from = from;
    t.to = to;
    t.forward_s = seconds;
    t.backward_s = seconds;
    return t;
  };
  m.transfers = {transfer(0, 1, 0.5), transfer(0, 2, 5.0), transfer(2, 3, 0.4)};
  for (StageCost& c : m.stages) c.forward_s = 1.0;
  detail::ExecutionEngine e(m, 2);
  for (const Op& op : {Op{OpKind::forward, 0, 0}, Op{OpKind::forward, 0, 1},
                       Op{OpKind::forward, 1, 0}, Op{OpKind::forward, 2, 0}}) {
    e.execute(op);
  }
  EXPECT_DOUBLE_EQ(e.arrival(0, 0, true), 1.5);
  EXPECT_DOUBLE_EQ(e.arrival(1, 0, true), 6.5);
  EXPECT_DOUBLE_EQ(e.arrival(0, 1, true), 7.0);
  EXPECT_DOUBLE_EQ(e.arrival(1, 1, true), 12.0);
  EXPECT_DOUBLE_EQ(e.arrival(2, 0, true), 7.9);
}

TEST(Simulate, ARelayedSkipIsHeldHopByHop) {
  // A chain of three one-layer stages (activations 100, 10, 20 bytes), a skip of 5 bytes
  // from the first layer to the last, relayed through stage 1; F 1 s, B 2 s, free links;
  // GPipe over two microbatches:
  //   F0.0 [0,1] F0.1 [1,2]   F1.0 [1,2] F1.1 [2,3]   F2.0 [2,3] F2.1 [3,4]
  //   B2.0 [4,6] B2.1 [6,8]   B1.0 [6,8] B1.1 [8,10]  B0.0 [8,10] B0.1 [10,12]
  // Device 1 holds microbatch m's skip from its arrival to its send (m0 [1,2], m1 [2,3]) and
  // its gradient the same way back (m0 [6,8], m1 [8,10]): 20 + 5 at [2,3). Device 0 holds
  // the gradients until B0 ends (m0 [8,10]): 200 + 5 at [8,10). Device 2 passes both on at
  // once: 40 + 0.
  std::vector<test::LayerSpec> layers{
      {1.0, 10, 100, 1000}, {1.0, 10, 10, 1000}, {1.0, 10, 20, 1000}};
  const LayerGraph g = LayerGraph::build(test::make_model(layers, {{0, 2}}, 5), 0, 1);
  PipelineModel m = build_pipeline_model(g, sequential_layout({0, 1, 2, 3}, 3),
                                         SkipRouting::forwarded, test::free_links(3), false);
  for (StageCost& c : m.stages) {
    c.forward_s = 1.0;
    c.backward_s = 2.0;
  }
  const auto t =
      simulate(m, gpipe_schedule(m, 2, false), 2, std::vector<MemoryBreakdown>(3), Peaks::held);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_DOUBLE_EQ(t->makespan_s, 12.0);
  const std::vector<std::pair<std::int64_t, std::int64_t>> want{{200, 5}, {20, 5}, {40, 0}};
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(t->devices[d].peak.activations, want[d].first) << "device " << d;
    EXPECT_EQ(t->devices[d].peak.skip_cache, want[d].second) << "device " << d;
  }
}

TEST(Simulate, SkipsSharingAHopAreHeldTogetherAndApartAfter) {
  // A chain of four one-layer stages (activations 100, 10, 0, 30 bytes), skips of 5 bytes
  // from layer 0 to layer 3 (a) and to layer 2 (b), both relayed through stage 1; F 1 s
  // (stage 2: 3 s), B 2 s, free links; GPipe over two microbatches:
  //   F0 [0,1] [1,2]    F1 [1,2] [2,3]     F2 [2,5] [5,8]      F3 [5,6] [8,9]
  //   B3 [9,11] [11,13] B2 [11,13] [13,15] B1 [13,15] [15,17]  B0 [15,17] [17,19]
  // Device 1 holds a and b from one arrival to one send: 10 bytes, m0 [1,2], m1 [2,3], so
  // 20 + 10 at [2,3) (and again at [13,15) with the gradients: the first is the peak).
  // Device 2 holds a until it sends it on (m0 [2,5], m1 [3,8]) and b until F2 starts (m1
  // [3,5)): 0 + 15 at [3,5). Device 0 holds both gradients until B0 ends: 200 + 10 at
  // [15,17). Device 3 passes everything on at once: 60 + 0.
  std::vector<test::LayerSpec> layers{
      {1.0, 10, 100, 1000}, {1.0, 10, 10, 1000}, {1.0, 10, 0, 1000}, {1.0, 10, 30, 1000}};
  const LayerGraph g = LayerGraph::build(test::make_model(layers, {{0, 3}, {0, 2}}, 5), 0, 1);
  PipelineModel m = build_pipeline_model(g, sequential_layout({0, 1, 2, 3, 4}, 4),
                                         SkipRouting::forwarded, test::free_links(4), false);
  for (StageCost& c : m.stages) {
    c.forward_s = 1.0;
    c.backward_s = 2.0;
  }
  m.stages[2].forward_s = 3.0;
  const auto t =
      simulate(m, gpipe_schedule(m, 2, false), 2, std::vector<MemoryBreakdown>(4), Peaks::held);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_DOUBLE_EQ(t->makespan_s, 19.0);
  const std::vector<std::pair<std::int64_t, std::int64_t>> want{
      {200, 10}, {20, 10}, {0, 15}, {60, 0}};
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(t->devices[d].peak.activations, want[d].first) << "device " << d;
    EXPECT_EQ(t->devices[d].peak.skip_cache, want[d].second) << "device " << d;
  }
}

TEST(ScheduleCheck, NamesEachViolation) {
  const PipelineModel m = one_layer_per_stage({1.0, 1.0}, false, 1000, 0.5);
  const std::vector<MemoryBreakdown> zero(2);
  auto t = simulate(m, list_schedule(m, 1, {1, 1}), 1, zero).value();
  // Pull device 1's forward earlier than its input can arrive (2.5 s).
  t.devices[1].ops[0].start_s = 1.0;
  ScheduleCheckRequest r{&m, &t, 1, false, zero, 1 << 20};
  auto problems = check_schedule(r);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "F(stage 1, mb 0) starts at 1.000000000 s, before F(stage 0, mb 0) ends at "
            "1.000000000 s plus 1.500000000 s of transfer");
  // Memory: 100 bytes of activations per microbatch; a 50-byte device cannot hold one.
  t = simulate(m, list_schedule(m, 1, {1, 1}), 1, zero).value();
  r.memory_capacity = 50;
  problems = check_schedule(r);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0],
            "device 0: 1 microbatches in flight hold 100 bytes with the static state at "
            "0.000000000 s, over the 50 byte capacity");
}

// Each op is found by its kind, stage and microbatch: one listed twice, one missing, one of
// a stage or microbatch that does not exist, one on another stage's device, and a B where
// the schedule splits the backward (its I and W never run) are each named once.
TEST(ScheduleCheck, NamesEachOpOutOfPlace) {
  const PipelineModel m = one_layer_per_stage({1.0, 1.0}, false, 1000, 0.5);
  const std::vector<MemoryBreakdown> zero(2);
  const Timeline valid = simulate(m, list_schedule(m, 2, {2, 2}), 2, zero).value();
  ScheduleCheckRequest r{&m, &valid, 2, false, zero, 1 << 20};
  EXPECT_TRUE(check_schedule(r).empty());
  Timeline t = valid;  // device 0: F(0, 0), F(0, 1), B(0, 0), B(0, 1)
  ASSERT_EQ(t.devices[0].ops.size(), 4u);
  t.devices[0].ops[1].op.mb = 0;     // F(0, 0) twice, F(0, 1) never
  t.devices[1].ops[0].op.stage = 0;  // stage 0's F(0, 0) on device 1, a third time
  t.devices[0].ops[3].op.mb = 2;     // microbatch 2 of 2
  r.timeline = &t;
  const std::vector<std::string> want{"device 0: F(stage 0, mb 0) runs twice",
                                      "device 0: B(stage 0, mb 2) does not exist",
                                      "device 1: F(stage 0, mb 0) belongs to device 0",
                                      "device 1: F(stage 0, mb 0) runs twice",
                                      "F(stage 0, mb 1) never runs",
                                      "F(stage 1, mb 0) never runs",
                                      "B(stage 0, mb 1) never runs"};
  EXPECT_EQ(check_schedule(r), want);
  // Split: B is none of F, I and W; each I and W never runs.
  r.timeline = &valid;
  r.split_backward = true;
  const std::vector<std::string> problems = check_schedule(r);
  EXPECT_EQ(problems.size(), 8u) << fmt::format("{}", fmt::join(problems, "\n"));
  EXPECT_EQ(problems.front(), "I(stage 0, mb 0) never runs");
  EXPECT_EQ(problems.back(), "W(stage 1, mb 1) never runs");
}

}  // namespace
}  // namespace pulse
