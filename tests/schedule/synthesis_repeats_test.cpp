// When a full synthesis repeats its screen (synthesis_repeats, synthesize.hpp): the work
// limits as the searches clamp them (solver/schedule/search_budget.hpp), hand-computed; and
// wherever synthesis_repeats says so, the full synthesis answers exactly the screen's
// answer, while a full synthesis that would search further or probe is not taken for one.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pulse/schedule/synthesize.hpp"
#include "pulse/schedule/v_families.hpp"
#include "schedule/search_budget.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

// A V over P devices of 2P one-layer stages (F = 1, B = 2, W = 0.8 when split), a skip
// from the first layer to the last.
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

ScheduleRequest request_of(const PipelineModel& m, int M, bool split) {
  ScheduleRequest r;
  r.model = &m;
  r.num_microbatches = M;
  r.static_bytes.assign(m.num_devices(), MemoryBreakdown{});
  r.memory_capacity = std::int64_t{1} << 30;
  r.split_backward = split;
  r.allreduce_s.assign(m.num_devices(), 0.5);
  return r;
}

TEST(SearchBudget, ClampsAsTheSearchesDo) {
  const PipelineModel m = v_model(4);  // 8 stages
  ScheduleRequest r = request_of(m, 4096, true);
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
  Pair p{request_of(m, M, false), request_of(m, M, false)};
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

void expect_same(const ScheduleAnswer& a, const ScheduleAnswer& b, const std::string& what) {
  EXPECT_EQ(a.method, b.method) << what;
  EXPECT_EQ(a.status, b.status) << what;
  EXPECT_EQ(a.makespan_s, b.makespan_s) << what;
  EXPECT_EQ(a.lower_bound_s, b.lower_bound_s) << what;
  EXPECT_EQ(a.list_evaluations, b.list_evaluations) << what;
  EXPECT_EQ(a.peak_activation_bytes, b.peak_activation_bytes) << what;
  EXPECT_EQ(a.schedule.device_ops, b.schedule.device_ops) << what;
  EXPECT_EQ(a.before_published, b.before_published) << what;
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
