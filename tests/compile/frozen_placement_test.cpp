// Frozen encoders in the plan (docs/frozen.md, the frozen pass): on every shipped model with
// frozen components x three one-node clusters, the bubble placement is never slower than
// encoding before the step, its ops pass the independent check (tools/frozen_check.hpp:
// inside idle gaps of the timeline, no overlaps, every sample once), and bubbles do hide
// work on most pairs; plus the options and a plan's round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>

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

// Under ASan + UBSan (about seven times slower) each model is planned on one of the three
// clusters, in turn: 5 of the 15 pairs, 4 of which fit. The Release suite plans all 15.
constexpr bool kEveryFrozenPair = !test::kSanitizedBuild;

const PlanFrozenPlacement* weighed(const PlanFrozen& f, const std::string& name) {
  for (const PlanFrozenPlacement& p : f.placements) {
    if (p.placement == name) return &p;
  }
  return nullptr;
}

TEST(FrozenPlacement, BubblesAreNeverSlowerThanBeforeTheStep) {
  int planned = 0, hidden = 0;
  constexpr std::size_t kClusterCount = std::size(kOneNodeClusters);
  for (std::size_t m = 0; m < std::size(kModels); ++m) {
    const char* model = kModels[m];
    for (std::size_t c = 0; c < kClusterCount; ++c) {
      if (!kEveryFrozenPair && c != m % kClusterCount) continue;
      const char* cluster = kOneNodeClusters[c];
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
  EXPECT_GE(planned, kEveryFrozenPair ? 12 : 4);
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

// The search weighs the step, frozen work included (docs/frozen.md). Two layers of 1 ms
// forward, 2 ms backward, on two devices, global batch 4, microbatch 1, no activation
// traffic (outputs of 0 bytes, latency 0), 10^7 parameters whose fp16 gradients (2 x 10^7
// bytes) a ring of two all-reduces in 2 x (10^7 bytes / 10^10 B/s) = 2 ms:
//   pp 1 x dp 2: 2 microbatches x 6 ms = 12 ms, + the all-reduce 2 ms     = 14 ms
//   pp 2 x dp 1: 4 microbatches x 3 ms per device = 12 ms of work; device 1 starts at 1 ms
//                and device 0's last backward (2 ms) follows device 1's   = 15 ms
// So without frozen work pp 1 wins. A text encoder of 1 ms per sample: pp 1 has no idle time,
// so each device encodes its pipeline's 2 samples before the step: 14 + 2 = 16 ms. pp 2 has
// 2 x 15 - 24 = 6 ms idle in whole milliseconds (device 1's first 1 ms, device 0's wait for
// its first backward, ...): its 4 samples fit the gaps, and its step stays 15 ms. pp 2 wins.
TEST(FrozenPlacement, TheSearchWeighsTheStepWithItsFrozenWork) {
  std::vector<test::LayerSpec> layers(2, test::LayerSpec{0.001, 5'000'000, 1000, 0});
  ModelProfile model = test::make_model(layers, {});
  FrozenComponent text;
  text.name = "text";
  text.kind = "text_encoder";
  text.params = 500;
  text.weight_bytes = 1000;
  text.forward_s = {{0.001}};
  text.activation_bytes_per_sample = 1000;
  text.output_bytes_per_sample = 0;
  model.frozen = {text};
  const ClusterProfile cluster = test::make_cluster(2, 1, std::int64_t{80} << 30, 1e10, 0.0);
  PlanOptions o;
  o.global_batch = 4;
  o.microbatch_size = 1;
  o.frozen = "cached";  // the denoiser alone: the iteration decides
  const auto cached = compile_plan(model, cluster, o);
  ASSERT_TRUE(cached.ok()) << cached.error().message;
  EXPECT_EQ(cached->pp, 1);
  EXPECT_NEAR(cached->evaluation.iteration_s, 0.014, 1e-9);
  o.frozen = "auto";
  const auto step = compile_plan(model, cluster, o);
  ASSERT_TRUE(step.ok()) << step.error().message;
  EXPECT_EQ(step->pp, 2);
  EXPECT_NEAR(step->evaluation.iteration_s, 0.015, 1e-9);
  ASSERT_TRUE(step->frozen);
  EXPECT_EQ(step->frozen->placement, "bubbles");
  EXPECT_NEAR(step->frozen->step_s, 0.015, 1e-9);
  EXPECT_NEAR(step->frozen->bubble_s, 0.004, 1e-9);
  // pp 1 is not scheduled: no step of it is shorter than its devices' work, 12 ms of compute
  // and 2 ms of encoding, plus the 2 ms all-reduce that follows its last op (frozen_step_bound),
  // 16 ms, above the 15 ms of pp 2.
  bool saw_pp1 = false;
  for (const Candidate& c : step->candidates) {
    if (c.pp != 1) continue;
    saw_pp1 = true;
    EXPECT_FALSE(c.feasible);
    ASSERT_TRUE(c.reason);
    EXPECT_NE(c.reason->find("lower bound on time, 16.00 ms, is no better than a plan already "
                             "found, 15.00 ms"),
              std::string::npos)
        << *c.reason;
  }
  EXPECT_TRUE(saw_pp1);
  // The bound is met: planned alone, pp 1's step is those 16 ms.
  o.pp = 1;
  const auto pp1 = compile_plan(model, cluster, o);
  ASSERT_TRUE(pp1.ok()) << pp1.error().message;
  EXPECT_NEAR(pp1->evaluation.iteration_s, 0.014, 1e-9);
  ASSERT_TRUE(pp1->frozen);
  EXPECT_NEAR(pp1->frozen->step_s, 0.016, 1e-9);
  o.pp.reset();
  ASSERT_TRUE(step->pipeline_or_not);
  EXPECT_EQ(step->pipeline_or_not->verdict, "pipeline");
  EXPECT_NE(step->pipeline_or_not->note.find("per step"), std::string::npos)
      << step->pipeline_or_not->note;
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
