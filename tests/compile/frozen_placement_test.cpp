// Frozen encoders in the plan (docs/frozen.md, the frozen pass): on every shipped model with
// frozen components x three one-node clusters, the bubble placement is never slower than
// encoding before the step, its ops pass the independent check (tools/frozen_check.hpp:
// inside idle gaps of the timeline, no overlaps, every sample once), and bubbles do hide
// work on most pairs; plus the options and a plan's round trip.
#include <gtest/gtest.h>

#include <algorithm>

#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/tools/frozen_check.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

constexpr const char* kModels[] = {"sd2-unet-512", "sdxl-unet-1024", "flux1-dev-1024",
                                   "hunyuan-dit-g2-1024", "uvit-l2-256"};
constexpr const char* kOneNodeClusters[] = {"dgx-h100-1n", "dgx1-v100-32gb-1n", "atlas800-910a-1n"};

const PlanFrozenPlacement* weighed(const PlanFrozen& f, const std::string& name) {
  for (const PlanFrozenPlacement& p : f.placements) {
    if (p.placement == name) return &p;
  }
  return nullptr;
}

TEST(FrozenPlacement, BubblesAreNeverSlowerThanBeforeTheStep) {
  int planned = 0, hidden = 0;
  for (const char* model : kModels) {
    for (const char* cluster : kOneNodeClusters) {
      const test::Inputs in = test::shipped(model, cluster);
      PlanOptions o;
      o.frozen = "bubbles";
      o.tuner_top_k = 1;
      const auto p = compile_plan(in.model, in.cluster, o);
      const std::string label = std::string(model) + " on " + cluster;
      if (!p.ok()) {  // the denoiser alone does not fit, or the encoders fit no placement
        EXPECT_EQ(p.error().kind, ErrorKind::infeasible) << label << ": " << p.error().message;
        continue;
      }
      ++planned;
      ASSERT_TRUE(p->frozen) << label;
      const PlanFrozen& f = *p->frozen;
      EXPECT_EQ(f.placement, "bubbles") << label;
      const PlanFrozenPlacement* before = weighed(f, "before_step");
      ASSERT_TRUE(before && before->feasible) << label;
      EXPECT_LE(f.step_s, *before->step_s + 1e-9) << label;
      EXPECT_NEAR(f.step_s, p->evaluation.iteration_s + f.before_step_s, 1e-12) << label;
      if (f.bubble_s > 0) ++hidden;
      const Plan plan = build_plan(*p, in.model, in.cluster);
      const int type = in.model.device_type_index(in.cluster.device_type);
      for (const std::string& problem :
           check_frozen_plan({&plan, &p->timeline, &in.model, type, &in.cluster})) {
        ADD_FAILURE() << label << ": " << problem;
      }
    }
  }
  EXPECT_GE(planned, 12);
  EXPECT_GE(hidden, planned / 2);
}

TEST(FrozenPlacement, AutoPicksTheFasterAndCachedIsOnlyGiven) {
  const test::Inputs in = test::shipped("sdxl-unet-1024", "dgx-h100-1n");
  PlanOptions o;
  o.tuner_top_k = 1;
  const CompiledPlan p = test::compile_ok(in, o);
  ASSERT_TRUE(p.frozen);
  EXPECT_EQ(p.frozen->option, "auto");
  ASSERT_EQ(p.frozen->placements.size(), 2u);  // cached needs an offline pass: only if given
  double fastest = 1e300;
  for (const PlanFrozenPlacement& w : p.frozen->placements) {
    if (w.feasible) fastest = std::min(fastest, *w.step_s);
  }
  EXPECT_DOUBLE_EQ(p.frozen->step_s, fastest);
  o.frozen = "cached";
  const CompiledPlan cached = test::compile_ok(in, o);
  EXPECT_EQ(cached.frozen->placement, "cached");
  EXPECT_EQ(cached.frozen->before_step_s, 0);
  EXPECT_TRUE(cached.frozen->ops.empty());
  // 4 x 128 x 128 latent, 77 x 768 + 78 x 1280 text states, fp16.
  EXPECT_EQ(cached.frozen->cached_bytes_per_sample, 131072 + 118272 + 199680);
}

TEST(FrozenPlacement, ShardedRowsPayTheirEncodingBeforeTheStep) {
  const test::Inputs in = test::shipped("sdxl-unet-1024", "dgx-h100-1n");
  PlanOptions o;
  o.tuner_top_k = 1;
  const CompiledPlan p = test::compile_ok(in, o);
  ASSERT_TRUE(p.pipeline_or_not);
  int costed = 0;
  for (const ShardedAnswer& a : p.pipeline_or_not->sharded) {
    if (!a.feasible || !a.step_s) continue;
    ++costed;
    EXPECT_GT(*a.frozen_s, 0);
    EXPECT_NEAR(*a.step_s, *a.iteration_s + *a.frozen_s, 1e-12);
  }
  EXPECT_GT(costed, 0);
}

TEST(FrozenPlacement, APlanWithFrozenOpsRoundTrips) {
  const test::Inputs in = test::shipped("sdxl-unet-1024", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.tuner_top_k = 1;
  o.frozen = "bubbles";
  const CompiledPlan p = test::compile_ok(in, o);
  const Plan plan = build_plan(p, in.model, in.cluster);
  ASSERT_TRUE(plan.frozen);
  ASSERT_FALSE(plan.frozen->ops.empty());
  const auto encoded = encode_plan(plan);
  ASSERT_TRUE(encoded.ok()) << encoded.error().message;
  const std::string& text = *encoded;
  auto back = parse_plan(text, "p.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_TRUE(back->frozen);
  EXPECT_EQ(back->frozen->ops.size(), plan.frozen->ops.size());
  EXPECT_EQ(*encode_plan(*back), text);
}

TEST(FrozenPlacement, TheCheckCatchesAnOpInBusyTimeAndASampleTwice) {
  const test::Inputs in = test::shipped("sdxl-unet-1024", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.tuner_top_k = 1;
  o.frozen = "bubbles";
  const CompiledPlan p = test::compile_ok(in, o);
  Plan plan = build_plan(p, in.model, in.cluster);
  ASSERT_TRUE(plan.frozen);
  auto bubble = std::find_if(plan.frozen->ops.begin(), plan.frozen->ops.end(),
                             [](const FrozenOp& op) { return op.slot == "bubble"; });
  ASSERT_NE(bubble, plan.frozen->ops.end());
  // Moved onto the device's first schedule op: busy time, and outside its gap.
  const PlanOp& first = plan.schedule[bubble->device].front();
  const double length = bubble->end_s - bubble->start_s;
  bubble->start_s = first.start_s;
  bubble->end_s = first.start_s + length;
  const auto moved = check_frozen_plan({&plan, &p.timeline});
  ASSERT_FALSE(moved.empty());
  EXPECT_NE(moved.front().find("outside its gap"), std::string::npos) << moved.front();
  plan = build_plan(p, in.model, in.cluster);
  plan.frozen->ops.push_back(plan.frozen->ops.front());  // a sample encoded twice
  bool twice = false;
  for (const std::string& m : check_frozen_plan({&plan, &p.timeline})) {
    twice = twice || m.find("2 times, not once") != std::string::npos;
  }
  EXPECT_TRUE(twice);
}

TEST(FrozenPlacement, ARefusalUnderTheEncodersHeadroomSaysWhereItCameFrom) {
  // Flux's encoders (T5-XXL's 9.5 GB among them) resident on every V100 leave the step a
  // headroom the user never gave: the refusal names it and the way out, --frozen cached;
  // planned so, with the whole usable memory, the step fits.
  const test::Inputs in = test::shipped("flux1-dev-1024", "dgx1-v100-32gb-1n");
  PlanOptions o;
  const auto refused = compile_plan(in.model, in.cluster, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::infeasible);
  EXPECT_NE(refused.error().message.find("(the frozen encoders, --frozen auto, stay resident "
                                         "beside the step and leave it --headroom 0.6"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("--frozen cached plans the step without them"),
            std::string::npos);
  o.frozen = "cached";
  o.headroom = 1.0;
  EXPECT_TRUE(compile_plan(in.model, in.cluster, o).ok());
}

}  // namespace
}  // namespace pulse
