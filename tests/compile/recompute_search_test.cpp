// --recompute auto (src/compile/recompute_search.cpp): each mode planned as --recompute MODE
// plans it, the fastest kept, every answer stated.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "pulse/compile/compile.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using test::compile_ok;
using test::Inputs;
using test::shipped;

TEST(RecomputeAuto, KeepsTheFastestModeAsEachModePlansIt) {
  // SDXL at 1024 px on 16 GB V100s at pp 4: without recomputation the devices are full,
  // so a mode that frees memory can win; which one is decided by the figures below.
  const Inputs in = shipped("sdxl-unet-1024", "dgx1-v100-16gb-1n");
  PlanOptions o;
  o.pp = 4;
  o.recompute = "auto";
  const CompiledPlan p = compile_ok(in, o);
  ASSERT_TRUE(p.recompute_search);
  const RecomputeSearch& s = *p.recompute_search;
  ASSERT_EQ(s.modes.size(), 3u);
  double best = 0;
  std::string fastest;
  for (const RecomputeAnswer& a : s.modes) {
    PlanOptions one = o;
    one.recompute = a.mode;
    const CompiledPlan q = compile_ok(in, one);
    ASSERT_TRUE(a.feasible) << a.mode;
    EXPECT_EQ(*a.iteration_s, q.evaluation.iteration_s) << a.mode;
    EXPECT_EQ(*a.microbatch_size, q.microbatch_size) << a.mode;
    EXPECT_GT(a.layers, a.mode == "none" ? -1 : 0) << a.mode;
    if (*a.samples_per_s > best) best = *a.samples_per_s, fastest = a.mode;
  }
  EXPECT_EQ(s.chosen, fastest);
  EXPECT_NE(s.chosen, "none");  // the case exercises a plan that recomputes
  EXPECT_EQ(p.options.recompute, s.chosen);
  EXPECT_EQ(p.evaluation.samples_per_s, best);
  EXPECT_EQ(s.note.rfind(s.chosen + ": pp 4, microbatch ", 0), 0u) << s.note;
}

TEST(RecomputeAuto, AModeThatSelectsNoLayerIsNotPlanned) {
  // tiny-unet with its attention layers renamed: selective would plan the same model as
  // none.
  Inputs in = shipped("tiny-unet", "dgx1-v100-32gb-1n");
  for (Layer& l : in.model.layers) {
    if (l.kind == "attention") l.kind = "conv";
  }
  PlanOptions o;
  o.pp = 2;
  o.recompute = "auto";
  const CompiledPlan p = compile_ok(in, o);
  ASSERT_TRUE(p.recompute_search);
  const std::vector<RecomputeAnswer>& m = p.recompute_search->modes;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].mode, "selective");
  EXPECT_FALSE(m[1].feasible);
  EXPECT_EQ(m[1].layers, 0);
  EXPECT_EQ(m[1].reason, "recomputes no layer of this model");
  EXPECT_TRUE(m[0].feasible && m[2].feasible);
}

}  // namespace
}  // namespace pulse
