// The schedule memo (include/pulse/schedule/schedule_memo.hpp, solver/schedule/answer_memo.hpp):
// a memo is its owner's alone, a key differing in any one field misses, and answers are the
// same with a memo, without one, and recalled from one. And the other way a synthesis is
// shared, a full synthesis that repeats its screen (synthesis_repeats): the work limits as
// the searches clamp them (solver/schedule/search_budget.hpp), hand-computed; wherever
// synthesis_repeats says so the full synthesis answers exactly the screen's answer, and a
// full synthesis that would search further or probe is not taken for one.

#include "pulse/schedule/schedule_memo.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "pulse/schedule/synthesize.hpp"
#include "pulse/schedule/v_families.hpp"
#include "schedule/answer_memo.hpp"
#include "schedule/search_budget.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

// A V over P devices of 2P one-layer stages (F = 1, I = 1.2, W = 0.8), a skip from the
// first layer to the last, links of finite bandwidth: transfers, skips and links to flip.
PipelineModel v_model(int P) {
  std::vector<test::LayerSpec> layers(2 * P, test::LayerSpec{1.0, 10, 100, 1000});
  std::vector<LayerId> first;
  for (int k = 0; k <= 2 * P; ++k) first.push_back(k);
  const LayerGraph g = LayerGraph::build(test::make_model(layers, {{0, 2 * P - 1}}), 0, 1);
  PipelineModel m = build_pipeline_model(g, v_layout(first, P), SkipRouting::direct,
                                         test::uniform_links(P, 1e6, 1e-4), false);
  for (StageCost& s : m.stages) {
    s.backward_s = 2.0;
    s.backward_weight_s = 0.8;
  }
  return m;
}

ScheduleRequest memo_request(const PipelineModel& m, int M, bool split) {
  ScheduleRequest r;
  r.model = &m;
  r.num_microbatches = M;
  r.static_bytes.assign(m.num_devices(), MemoryBreakdown{});
  r.memory_capacity = std::int64_t{1} << 30;
  r.split_backward = split;
  r.allreduce_s.assign(m.num_devices(), 0.5);
  return r;
}

ScheduleAnswer memo_solve(const ScheduleRequest& r) {
  auto a = synthesize_schedule(r);
  EXPECT_TRUE(a.ok()) << (a.ok() ? "" : a.error().message);
  return a.ok() ? *a : ScheduleAnswer{};
}

// Everything an answer states: the figures of ScheduleSearch, the status, every op in order.
void expect_same(const ScheduleAnswer& a, const ScheduleAnswer& b, const std::string& what) {
  EXPECT_EQ(a.method, b.method) << what;
  EXPECT_EQ(a.status, b.status) << what;
  EXPECT_EQ(a.makespan_s, b.makespan_s) << what;
  EXPECT_EQ(a.lower_bound_s, b.lower_bound_s) << what;
  EXPECT_EQ(a.heuristic_makespan_s, b.heuristic_makespan_s) << what;
  EXPECT_EQ(a.list_evaluations, b.list_evaluations) << what;
  EXPECT_EQ(a.order_evaluations, b.order_evaluations) << what;
  EXPECT_EQ(a.peak_activation_bytes, b.peak_activation_bytes) << what;
  EXPECT_EQ(a.schedule.device_ops, b.schedule.device_ops) << what;
  EXPECT_EQ(a.before_published, b.before_published) << what;
  // The timeline too, which a recall replays (the memo keeps its last ops alone).
  test::expect_same_timeline(a.timeline, b.timeline, what);
  ASSERT_EQ(a.memory_curve.size(), b.memory_curve.size()) << what;
  for (std::size_t i = 0; i < a.memory_curve.size(); ++i) {
    EXPECT_EQ(a.memory_curve[i].makespan_s, b.memory_curve[i].makespan_s) << what;
  }
}

TEST(ScheduleMemo, TwoMemosComputeTheSameRequestTwice) {
  const PipelineModel m = v_model(2);
  ScheduleMemo first, second;
  ScheduleRequest r = memo_request(m, 4, false);
  r.memo = &first;
  memo_solve(r);
  memo_solve(r);
  EXPECT_EQ(first.counts().answers, (ScheduleMemo::Counts{1, 1}));  // computed, then recalled
  r.memo = &second;
  memo_solve(r);
  EXPECT_EQ(second.counts().answers, (ScheduleMemo::Counts{1, 0}));  // nothing of the first's
  EXPECT_EQ(first.counts().answers, (ScheduleMemo::Counts{1, 1}));
}

TEST(ScheduleMemo, APlantedAnswerStaysInItsMemo) {
  const PipelineModel m = v_model(2);
  ScheduleMemo planted, clean;
  ScheduleRequest r = memo_request(m, 4, false);
  ScheduleAnswer wrong = memo_solve(r);  // a schedule a recall can replay
  wrong.method = "planted";
  wrong.makespan_s = 1e-3;
  r.memo = &planted;
  detail::remember_answer(r, wrong);
  EXPECT_EQ(memo_solve(r).method, "planted");  // the memo is consulted...
  r.memo = &clean;
  const ScheduleAnswer a = memo_solve(r);  // ...and only its owner's
  EXPECT_NE(a.method, "planted");
  r.memo = nullptr;
  expect_same(a, memo_solve(r), "without a memo");
}

TEST(ScheduleMemo, KeepsAnswersWithTheirTimelinesLastOpsAlone) {
  // The memo holds the schedule and, of its timeline, what keep_last_ops keeps (a whole one
  // is 170 MB an answer at pp 512 over 2048 layers). A recall replays the timeline, to the
  // bit; asked for the last ops alone (the tuner), it hands the kept one over, no replay.
  const PipelineModel m = v_model(2);
  ScheduleMemo memo;
  ScheduleRequest r = memo_request(m, 6, false);
  r.memo = &memo;
  const ScheduleAnswer computed = memo_solve(r);
  ASSERT_FALSE(computed.timeline.devices.empty());
  Timeline reduced = computed.timeline;
  keep_last_ops(reduced);
  const auto kept = detail::recall_answer(r);
  ASSERT_TRUE(kept);
  test::expect_same_timeline(kept->timeline, reduced, "kept");
  EXPECT_EQ(kept->schedule.device_ops, computed.schedule.device_ops);
  expect_same(computed, memo_solve(r), "recalled");
  bool released = false;
  const auto last = synthesize_schedule(r, AnswerTimeline::last_ops, &released);
  ASSERT_TRUE(last.ok()) << last.error().message;
  EXPECT_TRUE(released);
  test::expect_same_timeline(last->timeline, reduced, "recalled, last ops");
  EXPECT_EQ(last->schedule.device_ops, computed.schedule.device_ops);
  EXPECT_EQ(last->makespan_s, computed.makespan_s);
  EXPECT_EQ(memo.counts().answers, (ScheduleMemo::Counts{1, 3}));
  // A new answer is whole, whatever is asked.
  ScheduleMemo other;
  r.memo = &other;
  const auto fresh = synthesize_schedule(r, AnswerTimeline::last_ops, &released);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  EXPECT_FALSE(released);
  expect_same(computed, *fresh, "new, last ops asked");
}

TEST(ScheduleMemo, AnswersAreTheSameWithoutAMemoAndRecalled) {
  // A chain of blocking sends (the policy and order searches), and a V with a split
  // backward (the ladder: its staircase, the published schedules' pool and V-auto's
  // candidates go through the memo), each at two budgets and with the memory curve.
  const PipelineModel v = v_model(2);
  for (const bool split : {false, true}) {
    ScheduleMemo memo;
    for (const std::int64_t budget : {std::int64_t{0}, std::int64_t{300}}) {
      ScheduleRequest r = memo_request(v, 6, split);
      r.activation_budget = budget;
      r.memory_curve_points = 2;
      const ScheduleAnswer none = memo_solve(r);
      r.memo = &memo;
      const std::string what =
          "split " + std::to_string(split) + ", budget " + std::to_string(budget);
      expect_same(none, memo_solve(r), what + ", computed");
      expect_same(none, memo_solve(r), what + ", recalled");
    }
    const ScheduleMemo::AllCounts c = memo.counts();
    EXPECT_EQ(c.answers, (ScheduleMemo::Counts{2, 2}));
    // The policy searches consult the memo's outcomes (list_outcomes.hpp). Here the only
    // candidates an earlier search scored are each synthesis's first, which its own
    // heuristic run serves (policy_search.hpp, FirstRun); list_outcomes_test has searches
    // that recall the others.
    if (!split) {
      EXPECT_GE(c.list_outcomes.computed, 1);
    }
    if (split) {
      // The staircase does not depend on the budget: the second budget finds the first's.
      EXPECT_GE(c.ladders.recalled, 1);
      EXPECT_GE(c.seeds.computed, 1);
      EXPECT_GE(c.v_auto_pools.computed, 1);
    }
  }
}

TEST(ScheduleMemo, PublishedOrdersKeptByTheirFiguresServeEveryBudget) {
  // The published V orders' replays are kept once per model, M and split (answer_memo.hpp,
  // OrderReplay): a synthesis at another budget weighs them by their figures, generating an
  // order only where it adopts it, and answers exactly as without a memo.
  const PipelineModel v = v_model(3);
  const std::int64_t unit = bytes_per_microbatch_at_most(v)[0];
  ScheduleMemo memo;
  int adopted_from_figures = 0;
  const std::vector<std::int64_t> budgets{0, 12 * unit, 6 * unit, 4 * unit, 3 * unit, 2 * unit};
  for (std::size_t i = 0; i < budgets.size(); ++i) {
    ScheduleRequest r = memo_request(v, 12, false);
    r.activation_budget = budgets[i];
    r.weighs_searched = false;
    // A short search (one list schedule, no order search), which the orders beat.
    r.max_evaluations = 1;
    r.max_order_evaluations = 0;
    const ScheduleAnswer none = memo_solve(r);
    r.memo = &memo;
    expect_same(none, memo_solve(r), "budget " + std::to_string(budgets[i]));
    const bool published =
        none.method == published_schedule_name(PublishedSchedule::dualpipev) ||
        none.method == published_schedule_name(PublishedSchedule::zbv_zero_bubble);
    if (i > 0 && published) ++adopted_from_figures;
  }
  // Replayed once, weighed by their figures at every other budget.
  EXPECT_EQ(memo.tables().order_replays.counts(),
            (ScheduleMemo::Counts{1, static_cast<int>(budgets.size()) - 1}));
  EXPECT_GT(adopted_from_figures, 0);  // the path that generates an order adopted
}

TEST(ScheduleMemo, AScreenAndAFullSynthesisShareTheirBound) {
  // The bound depends on the model, the split, M and the room, not on the searches' work.
  const PipelineModel m = v_model(2);
  ScheduleMemo memo;
  ScheduleRequest r = memo_request(m, 4, false);
  r.memo = &memo;
  r.max_evaluations = 24;
  r.max_order_evaluations = 0;
  memo_solve(r);
  r.max_evaluations = 400;
  r.max_order_evaluations = 2000;
  r.probe_smaller_budget = true;
  memo_solve(r);
  // Computed by the screen, recalled by the full synthesis; and computed at 3/4 of the
  // answer's peak, where the synthesis asks whether its probe could find anything better.
  EXPECT_EQ(memo.counts().bounds, (ScheduleMemo::Counts{2, 1}));
  EXPECT_EQ(memo.counts().answers, (ScheduleMemo::Counts{2, 0}));
}

TEST(ScheduleMemo, AFullSynthesisAndItsSmallerBudgetShareTheStaircase) {
  // The second search at 3/4 of the answer's peak (synthesize.cpp's probe) runs without a
  // probe of its own; the ladder's staircase does not depend on that, so the probe recalls
  // the staircase the synthesis computed. (Here the bound at 3/4 of the peak does not rule
  // the probe out: it runs.)
  const PipelineModel m = v_model(2);
  ScheduleMemo memo;
  ScheduleRequest r = memo_request(m, 6, true);
  r.probe_smaller_budget = true;
  const ScheduleAnswer none = memo_solve(r);
  r.memo = &memo;
  expect_same(none, memo_solve(r), "with a memo");
  EXPECT_EQ(memo.counts().ladders, (ScheduleMemo::Counts{1, 1}));
}

using Flip = std::function<void(ScheduleRequest&, PipelineModel&)>;

// Changes the model's link from device 0 to 1. The table is shared with the key the memo
// kept, so this also checks that a change to one copy leaves the other as it was.
template <class Change>
void relink(PipelineModel& m, Change change) {
  LinkClass link = m.links.at(0, 1);
  change(link);
  m.links.set(0, 1, link);
}

// One flip per field of the request and of the pipeline model (and of what it holds).
std::vector<std::pair<std::string, Flip>> request_flips() {
  return {
      {"family", [](auto& r, auto&) { r.family = ScheduleFamily::gpipe; }},
      {"num_microbatches", [](auto& r, auto&) { ++r.num_microbatches; }},
      {"static_bytes", [](auto& r, auto&) { ++r.static_bytes[1].optimizer; }},
      {"memory_capacity", [](auto& r, auto&) { ++r.memory_capacity; }},
      {"activation_budget", [](auto& r, auto&) { r.activation_budget = 1000; }},
      {"memory_curve_points", [](auto& r, auto&) { r.memory_curve_points = 1; }},
      {"allreduce_s", [](auto& r, auto&) { r.allreduce_s[1] += 1e-9; }},
      {"split_backward", [](auto& r, auto&) { r.split_backward = !r.split_backward; }},
      {"max_nodes", [](auto& r, auto&) { ++r.max_nodes; }},
      {"max_seconds", [](auto& r, auto&) { r.max_seconds += 1; }},
      {"exact_max_ops", [](auto& r, auto&) { ++r.exact_max_ops; }},
      {"max_evaluations", [](auto& r, auto&) { ++r.max_evaluations; }},
      {"max_order_evaluations", [](auto& r, auto&) { ++r.max_order_evaluations; }},
      {"seed", [](auto& r, auto&) { ++r.seed; }},
      {"probe_smaller_budget", [](auto& r, auto&) { r.probe_smaller_budget = true; }},
      {"layout.first_layer", [](auto&, auto& m) { ++m.layout.first_layer.back(); }},
      {"layout.device", [](auto&, auto& m) { m.layout.device[0] = 1; }},
      {"layout.num_devices", [](auto&, auto& m) { ++m.layout.num_devices; }},
      {"routing", [](auto&, auto& m) { m.routing = SkipRouting::forwarded; }},
      {"overlap_comm", [](auto&, auto& m) { m.overlap_comm = true; }},
      {"stages.forward_s", [](auto&, auto& m) { m.stages[2].forward_s += 1e-9; }},
      {"stages.backward_s", [](auto&, auto& m) { m.stages[2].backward_s += 1e-9; }},
      {"stages.backward_weight_s", [](auto&, auto& m) { m.stages[2].backward_weight_s = 0; }},
      {"stages.params", [](auto&, auto& m) { ++m.stages[2].params; }},
      {"stages.activation_bytes", [](auto&, auto& m) { ++m.stages[2].activation_bytes; }},
      {"stages.recompute_workspace_bytes",
       [](auto&, auto& m) { ++m.stages[2].recompute_workspace_bytes; }},
      {"stages.largest_layer_params", [](auto&, auto& m) { ++m.stages[2].largest_layer_params; }},
      {"transfers.from", [](auto&, auto& m) { ++m.transfers[0].from; }},
      {"transfers.to", [](auto&, auto& m) { ++m.transfers[0].to; }},
      {"transfers.main_path",
       [](auto&, auto& m) { m.transfers[0].main_path = !m.transfers[0].main_path; }},
      {"transfers.forward", [](auto&, auto& m) { ++m.transfers[0].forward.activation; }},
      {"transfers.forward.skip", [](auto&, auto& m) { ++m.transfers[0].forward.skip; }},
      {"transfers.forward.carried", [](auto&, auto& m) { ++m.transfers[0].forward.carried; }},
      {"transfers.backward", [](auto&, auto& m) { ++m.transfers[0].backward.activation; }},
      {"transfers.forward_messages", [](auto&, auto& m) { ++m.transfers[0].forward_messages; }},
      {"transfers.backward_messages", [](auto&, auto& m) { ++m.transfers[0].backward_messages; }},
      {"transfers.forward_s", [](auto&, auto& m) { m.transfers[0].forward_s += 1e-9; }},
      {"transfers.backward_s", [](auto&, auto& m) { m.transfers[0].backward_s += 1e-9; }},
      {"transfers.skips", [](auto&, auto& m) { m.transfers[0].skips.push_back(0); }},
      {"transfers.carried", [](auto&, auto& m) { m.transfers[0].carried.push_back(0); }},
      {"skips.skip", [](auto&, auto& m) { ++m.skips[0].skip; }},
      {"skips.producer_stage", [](auto&, auto& m) { ++m.skips[0].producer_stage; }},
      {"skips.consumer_stage", [](auto&, auto& m) { --m.skips[0].consumer_stage; }},
      {"skips.local", [](auto&, auto& m) { m.skips[0].local = !m.skips[0].local; }},
      {"skips.bytes", [](auto&, auto& m) { ++m.skips[0].bytes; }},
      {"links.name", [](auto&, auto& m) { relink(m, [](LinkClass& l) { l.name = "other"; }); }},
      {"links.bandwidth",
       [](auto&, auto& m) { relink(m, [](LinkClass& l) { l.bandwidth_bytes_per_s *= 2; }); }},
      {"links.latency", [](auto&, auto& m) { relink(m, [](LinkClass& l) { l.latency_s *= 2; }); }},
  };
}

TEST(ScheduleMemo, ARequestDifferingInAnyOneFieldMissesTheAnswer) {
  const PipelineModel m = v_model(2);
  ASSERT_FALSE(m.transfers.empty());
  ASSERT_FALSE(m.skips.empty());
  ScheduleMemo memo;
  ScheduleRequest kept = memo_request(m, 4, false);
  kept.memo = &memo;
  ScheduleAnswer answer;
  answer.method = "kept";
  detail::remember_answer(kept, answer);
  {
    // The same request (another copy of the model) hits: the model is compared by value.
    PipelineModel copy = m;
    ScheduleRequest same = kept;
    same.model = &copy;
    ASSERT_TRUE(detail::recall_answer(same));
  }
  for (const auto& [name, flip] : request_flips()) {
    PipelineModel copy = m;
    ScheduleRequest r = kept;
    r.model = &copy;
    flip(r, copy);
    EXPECT_FALSE(detail::recall_answer(r)) << name;
  }
}

TEST(ScheduleMemo, TheOtherKeysMissWhenAnyOneFieldDiffers) {
  const PipelineModel m = v_model(2);
  PipelineModel other = m;
  other.stages[1].forward_s += 1e-9;
  const detail::RoomKey room{m, true, 4, {100, 200}};
  const std::vector<std::pair<std::string, detail::RoomKey>> rooms = {
      {"model", {other, true, 4, {100, 200}}},
      {"split_backward", {m, false, 4, {100, 200}}},
      {"num_microbatches", {m, true, 5, {100, 200}}},
      {"room", {m, true, 4, {100, 201}}},
  };
  detail::MemoTable<detail::RoomKey, double> bounds;
  bounds.keep(room, 1.0);
  EXPECT_TRUE(bounds.recall(detail::RoomKey{m, true, 4, {100, 200}}));
  for (const auto& [name, key] : rooms) EXPECT_FALSE(bounds.recall(key)) << name;

  ScheduleRequest open = memo_request(m, 4, true);
  const detail::LadderKey ladder{detail::schedule_key(open), true};
  ScheduleRequest more = open;
  ++more.max_evaluations;
  detail::MemoTable<detail::LadderKey, int> ladders;
  ladders.keep(ladder, 1);
  EXPECT_TRUE(ladders.recall(detail::LadderKey{detail::schedule_key(open), true}));
  EXPECT_FALSE(ladders.recall(detail::LadderKey{detail::schedule_key(more), true})) << "open";
  EXPECT_FALSE(ladders.recall(detail::LadderKey{detail::schedule_key(open), false})) << "wide_list";

  detail::MemoTable<detail::VAutoKey, int> pools;
  pools.keep({4, 8, 6}, 1);
  EXPECT_TRUE(pools.recall({4, 8, 6}));
  EXPECT_FALSE(pools.recall({5, 8, 6})) << "pp";
  EXPECT_FALSE(pools.recall({4, 9, 6})) << "num_microbatches";
  EXPECT_FALSE(pools.recall({4, 8, 7})) << "budget";
  EXPECT_EQ(pools.counts(), (ScheduleMemo::Counts{3, 1}));
}

// --- When a full synthesis repeats its screen (synthesis_repeats, synthesize.hpp) ---------

TEST(SearchBudget, ClampsAsTheSearchesDo) {
  const PipelineModel m = v_model(4);  // 8 stages
  ScheduleRequest r = memo_request(m, 4096, true);
  // 8 stages x 3 ops (F, I, W) x 4096 microbatches = 98,304 ops a replay.
  EXPECT_EQ(detail::ops_per_replay(r), 98'304);
  // min(400, max(120, 400,000 / 98,304 = 4), 8,000,000 / 98,304 = 81) = 81.
  EXPECT_EQ(detail::list_budget(r), 81);
  // min(2000, 1,000,000 / 98,304 = 10) = 10.
  EXPECT_EQ(detail::order_budget(r), 10);
  // Without the split: 8 x 2 x 4096 = 65,536 ops; min(400, max(120, 6), 122) = 120 and
  // min(2000, 15) = 15.
  r.split_backward = false;
  EXPECT_EQ(detail::list_budget(r), 120);
  EXPECT_EQ(detail::order_budget(r), 15);
  // A screen's 24 is below every clamp; a budget of 200 clamps to the same 120.
  r.max_evaluations = 24;
  EXPECT_EQ(detail::list_budget(r), 24);
  r.max_evaluations = 200;
  const ScheduleRequest s = detail::searched_request(r);
  EXPECT_EQ(s.max_evaluations, 120);
  EXPECT_EQ(s.max_order_evaluations, 15);
  EXPECT_EQ(s.exact_max_ops, 0);  // 65,536 ops > 72: the integer program never runs
  // The ladder (split backward on a two-stage V) shares the limits as given: left alone.
  r.split_backward = true;
  EXPECT_EQ(detail::searched_request(r).max_evaluations, 200);
  // A fixed family runs no search: no limits at all.
  r.family = ScheduleFamily::one_f_one_b;
  r.probe_smaller_budget = true;
  const ScheduleRequest fixed = detail::searched_request(r);
  EXPECT_EQ(fixed.max_evaluations, 0);
  EXPECT_EQ(fixed.max_order_evaluations, 0);
  EXPECT_FALSE(fixed.probe_smaller_budget);
}

// The compiler's pair: a screen (probe off) and a full effort (probe on) whose list limit
// clamps to the screen's (8 stages x 2 x 128 = 2048 ops: min(400, max(120, 195), 3906) =
// 195, and the screen's 300 clamps to 195 too); the order search off in both, the
// integer program's 72 ops below the instance's.
struct Pair {
  ScheduleRequest screen, full;
};
Pair pair_of(const PipelineModel& m, int M, std::int64_t budget, bool weighs) {
  Pair p{memo_request(m, M, false), memo_request(m, M, false)};
  for (ScheduleRequest* r : {&p.screen, &p.full}) {
    r->activation_budget = budget;
    r->weighs_searched = weighs;
    r->max_order_evaluations = 0;
  }
  p.screen.max_evaluations = 300;
  p.screen.exact_max_ops = 0;
  p.full.probe_smaller_budget = true;
  return p;
}

TEST(SynthesisRepeats, OnlyWhereTheFullSynthesisAnswersTheScreen) {
  const PipelineModel m = v_model(4);
  const std::int64_t unit = bytes_per_microbatch_at_most(m)[0];
  int repeats = 0, probes = 0;
  for (const bool weighs : {false, true}) {
    for (const std::int64_t budget : {std::int64_t{0}, 12 * unit, 6 * unit, 3 * unit}) {
      const Pair p = pair_of(m, 128, budget, weighs);
      const std::string what = "budget " + std::to_string(budget) + (weighs ? " weighed" : "");
      auto screened = synthesize_schedule(p.screen);
      auto full = synthesize_schedule(p.full);
      ASSERT_TRUE(screened.ok() && full.ok()) << what;
      ASSERT_TRUE(screened->before_published.has_value()) << what;
      if (synthesis_repeats(p.full, p.screen, *screened)) {
        ++repeats;
        expect_same(*full, *screened, what);
      } else {
        ++probes;
        // Negative control: the same pair without the probe repeats (the limits clamp
        // alike), so the probe decided it.
        ScheduleRequest no_probe = p.full;
        no_probe.probe_smaller_budget = false;
        EXPECT_TRUE(synthesis_repeats(no_probe, p.screen, *screened)) << what;
      }
    }
  }
  // Both ways occur over these cases, or the test checks one side only.
  EXPECT_GT(repeats, 0);
  EXPECT_GT(probes, 0);
}

TEST(SynthesisRepeats, NotWhereTheFullEffortSearchesFurther) {
  const PipelineModel m = v_model(4);
  Pair p = pair_of(m, 128, 0, false);
  p.full.probe_smaller_budget = false;
  auto screened = synthesize_schedule(p.screen);
  ASSERT_TRUE(screened.ok());
  EXPECT_TRUE(synthesis_repeats(p.full, p.screen, *screened));
  // A screen of 100 list schedules is below the clamp of 195: the full effort tries more.
  Pair fewer = p;
  fewer.screen.max_evaluations = 100;
  auto few = synthesize_schedule(fewer.screen);
  ASSERT_TRUE(few.ok());
  EXPECT_FALSE(synthesis_repeats(fewer.full, fewer.screen, *few));
  // The order search on in the full effort (min(2000, 1,000,000 / 2048 = 488) replays).
  Pair ordered = p;
  ordered.full.max_order_evaluations = 2000;
  EXPECT_FALSE(synthesis_repeats(ordered.full, ordered.screen, *screened));
  // A memory curve, a stopped screen, or another request.
  Pair curve = p;
  curve.full.memory_curve_points = 3;
  EXPECT_FALSE(synthesis_repeats(curve.full, curve.screen, *screened));
  ScheduleAnswer stopped = *screened;
  stopped.status = SolveStatus::time_limit;
  EXPECT_FALSE(synthesis_repeats(p.full, p.screen, stopped));
  Pair other = p;
  other.full.activation_budget = 1;
  EXPECT_FALSE(synthesis_repeats(other.full, other.screen, *screened));
}

}  // namespace
}  // namespace pulse
