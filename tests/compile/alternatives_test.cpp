// Level 0 as one table (src/compile/alternatives.hpp): every row of the record is what its
// options plan alone, the plan is the fastest row it may adopt, the verdicts are views of
// the rows, and a job's schedule memo is its own.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using test::compile_ok;
using test::Inputs;
using test::shipped;

const AlternativeAnswer& own_row(const CompiledPlan& p) {
  const auto it = std::find_if(p.alternatives.begin(), p.alternatives.end(),
                               [](const AlternativeAnswer& a) { return a.axis == "own"; });
  EXPECT_NE(it, p.alternatives.end());
  return *it;
}

std::vector<const AlternativeAnswer*> rows(const CompiledPlan& p, const std::string& axis) {
  std::vector<const AlternativeAnswer*> out;
  for (const AlternativeAnswer& a : p.alternatives) {
    if (a.axis == axis) out.push_back(&a);
  }
  return out;
}

// The options a row plans, as a job of its own plans them in its own search.
PlanOptions alone(const AlternativeAnswer& a) {
  PlanOptions o;
  if (a.axis == "strategy") o.strategy = *parse_strategy(a.label);
  if (a.axis == "sharding") o.pp = 1;
  o.memory.zero_stage = a.zero_stage;
  return o;
}

TEST(Alternatives, EveryRowIsWhatItsOptionsPlanAlone) {
  // U-ViT L/2 on eight 16 GB V100s: pulse's V at pp 4 beats every baseline and sharded data
  // parallelism (figures in the plan's alternatives[]).
  const Inputs in = shipped("uvit-l2-256", "dgx1-v100-16gb-1n");
  const CompiledPlan p = compile_ok(in, PlanOptions{});
  ASSERT_EQ(p.alternatives.size(), 7u);  // own, four baselines, ZeRO-2 and ZeRO-3
  EXPECT_EQ(rows(p, "strategy").size(), 4u);
  EXPECT_EQ(rows(p, "sharding").size(), 2u);
  int chosen = 0;
  for (const AlternativeAnswer& a : p.alternatives) {
    const CompiledPlan q = compile_ok(in, alone(a));
    const AlternativeAnswer& b = own_row(q);
    EXPECT_EQ(a.feasible, b.feasible) << a.label;
    EXPECT_EQ(a.iteration_s, b.iteration_s) << a.label;
    EXPECT_EQ(a.pp, b.pp) << a.label;
    EXPECT_EQ(a.dp, b.dp) << a.label;
    EXPECT_EQ(a.microbatch_size, b.microbatch_size) << a.label;
    EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes) << a.label;
    EXPECT_EQ(a.p2p_bytes_per_iteration, b.p2p_bytes_per_iteration) << a.label;
    EXPECT_TRUE(a.adoptable) << a.label;
    if (a.feasible) {
      EXPECT_LE(*a.samples_per_s, p.evaluation.samples_per_s) << a.label;
    }
    if (!a.chosen) continue;
    ++chosen;
    EXPECT_EQ(*a.iteration_s, p.evaluation.iteration_s);
    EXPECT_EQ(*a.pp, p.pp);
  }
  EXPECT_EQ(chosen, 1);
  EXPECT_TRUE(own_row(p).chosen);
  EXPECT_EQ(own_row(p).pp, 4);
  // The verdicts are views of the rows.
  ASSERT_EQ(p.baselines.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    const AlternativeAnswer& a = *rows(p, "strategy")[i];
    EXPECT_EQ(p.baselines[i].strategy, a.label);
    EXPECT_EQ(p.baselines[i].samples_per_s, a.samples_per_s);
    EXPECT_EQ(p.baselines[i].configuration, a.configuration);
  }
  ASSERT_TRUE(p.pipeline_or_not);
  ASSERT_EQ(p.pipeline_or_not->sharded.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const AlternativeAnswer& a = *rows(p, "sharding")[i];
    EXPECT_EQ(p.pipeline_or_not->sharded[i].zero_stage, a.zero_stage);
    EXPECT_EQ(p.pipeline_or_not->sharded[i].iteration_s, a.iteration_s);
    EXPECT_EQ(p.pipeline_or_not->sharded[i].peak_memory_bytes, a.peak_memory_bytes);
  }
  EXPECT_EQ(p.pipeline_or_not->verdict, "pipeline");
}

TEST(Alternatives, AShardedPlanAdoptedStatesItsStageAndKeepsThePipelinesSearch) {
  // Hunyuan-DiT at 1024 px on eight A100s: ZeRO-2 over every device is the fastest.
  const Inputs in = shipped("hunyuan-dit-g2-1024", "dgx-a100-1n");
  const CompiledPlan p = compile_ok(in, PlanOptions{});
  const auto chosen = std::find_if(p.alternatives.begin(), p.alternatives.end(),
                                   [](const AlternativeAnswer& a) { return a.chosen; });
  ASSERT_NE(chosen, p.alternatives.end());
  EXPECT_EQ(chosen->axis, "sharding");
  EXPECT_EQ(p.options.memory.zero_stage, chosen->zero_stage);
  EXPECT_EQ(p.pp, 1);
  EXPECT_FALSE(own_row(p).chosen);
  // The search of the pipelined plan it replaced is there beside its own.
  EXPECT_TRUE(std::any_of(p.candidates.begin(), p.candidates.end(),
                          [](const Candidate& c) { return c.pp > 1 && c.feasible; }));
  EXPECT_EQ(p.pipeline_or_not->verdict, "sharded data parallel");
}

TEST(Alternatives, TheOptionsSayWhatMayBeAdopted) {
  const Inputs in = shipped("uvit-l2-256", "dgx1-v100-16gb-1n");
  PlanOptions family;
  family.family = "v";  // a family asked for: pulse's answer, while it has one
  const CompiledPlan f = compile_ok(in, family);
  for (const AlternativeAnswer* a : rows(f, "strategy")) EXPECT_FALSE(a->adoptable) << a->label;
  for (const AlternativeAnswer* a : rows(f, "sharding")) EXPECT_FALSE(a->adoptable) << a->label;
  EXPECT_TRUE(own_row(f).chosen);

  PlanOptions pp;
  pp.pp = 2;  // pp given: no plan without a pipeline
  const CompiledPlan q = compile_ok(in, pp);
  for (const AlternativeAnswer* a : rows(q, "strategy")) EXPECT_TRUE(a->adoptable) << a->label;
  for (const AlternativeAnswer* a : rows(q, "sharding")) EXPECT_FALSE(a->adoptable) << a->label;
  EXPECT_EQ(q.pp, 2);

  // A family the model cannot fill (w3 at pp 2 wants 12 stages of tiny-unet's 10 layers):
  // the baselines are the answer, and the fastest is kept.
  const Inputs tiny = shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions w3;
  w3.family = "w3";
  w3.pp = 2;
  const CompiledPlan b = compile_ok(tiny, w3);
  EXPECT_FALSE(own_row(b).feasible);
  double fastest = 0;
  for (const AlternativeAnswer* a : rows(b, "strategy")) {
    EXPECT_TRUE(a->adoptable) << a->label;
    if (a->feasible) fastest = std::max(fastest, *a->samples_per_s);
  }
  EXPECT_EQ(b.evaluation.samples_per_s, fastest);
  EXPECT_NE(b.family->name, "w3");
}

TEST(Alternatives, TwoJobsInOneProcessKeepTheirOwnMemo) {
  // Each job computes every synthesis it needs, whatever ran before it in the process: the
  // same job again finds nothing of the first's (a memo shared by the process would hand it
  // the first's last answers), and after another job it counts what it did the first time
  // (state shared by the jobs would add the other's lookups, or leave nothing to compute).
  const Inputs in = shipped("uvit-l2-256", "dgx1-v100-16gb-1n");
  PlanOptions a;
  a.pp = 2;
  a.microbatch_size = 4;
  a.strategy = Strategy::v_naive;
  PlanOptions b = a;
  b.microbatch_size = 2;
  const CompiledPlan first = compile_ok(in, a);
  const CompiledPlan again = compile_ok(in, a);
  const CompiledPlan other = compile_ok(in, b);
  const CompiledPlan after = compile_ok(in, a);
  EXPECT_GT(first.memo_counts.answers.computed, 0);
  EXPECT_GT(other.memo_counts.answers.computed, 0);
  EXPECT_EQ(again.memo_counts, first.memo_counts);
  EXPECT_EQ(after.memo_counts, first.memo_counts);
  EXPECT_EQ(after.evaluation.iteration_s, first.evaluation.iteration_s);
}

TEST(Alternatives, ALayoutBoundedAboveTheKeptPlanIsSaidSoAndNamesIt) {
  // The example DiT at 8 samples on 8 CPU devices: ring 2 over data parallel 4 wins, and
  // every other layout, "none" included, is left unplanned by its lower bound. The rows
  // name the kept plan by its layout (they said "the plan of none", its recompute mode),
  // and the verdict says a bound ruled the others out, not that none of them fits.
  const test::Inputs in = test::shipped("small-dit-cpu", "cpu-localhost");
  PlanOptions o;
  o.global_batch = 8;
  ASSERT_TRUE(o.memory.set_precision("fp32"));
  const CompiledPlan p = test::compile_ok(in, o);
  ASSERT_EQ(p.options.sequence.label(), "ring 2");
  int bounded = 0;
  for (const AlternativeAnswer& a : p.alternatives) {
    if (!a.reason || !a.reason->starts_with("not planned: its lower bound")) continue;
    EXPECT_NE(a.reason->find("above the plan of ring 2 ("), std::string::npos) << *a.reason;
    ++bounded;
  }
  EXPECT_GE(bounded, 1);
  ASSERT_TRUE(p.pipeline_or_not && p.pipeline_or_not->layout_note);
  EXPECT_NE(p.pipeline_or_not->layout_note->find(
                "no plan without sequence parallelism can beat it, a lower bound says"),
            std::string::npos)
      << *p.pipeline_or_not->layout_note;
  // Every view names the plan with its layout (it read "data parallel x 4, ZeRO-3, ...").
  EXPECT_EQ(build_plan(p, in.model, in.cluster).layout(),
            "data parallel x 4 x ring 2, ZeRO-3, precision fp32, no pipeline");
}

}  // namespace
}  // namespace pulse
