// --recompute auto (src/compile/alternatives.cpp, a level of alternatives per mode): each mode
// planned as --recompute MODE plans it, or not planned when its lower bound on time cannot
// beat the plan kept; the fastest kept, every answer stated.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "pulse/compile/compile.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using test::compile_ok;
using test::Inputs;
using test::shipped;

// The plan without the two keys that list the modes, and the mode as given (auto, or the
// mode itself): what was planned is `chosen`, which stays.
nlohmann::json without_modes(const CompiledPlan& p, const Inputs& in) {
  nlohmann::json j = nlohmann::json::parse(test::plan_text(p, in.model, in.cluster));
  j.erase("recompute_search");
  j.erase("alternatives");
  j["options"].erase("recompute");
  return j;
}

TEST(RecomputeAuto, KeepsTheFastestModeAsEachModePlansIt) {
  // SDXL at 1024 px on 16 GB V100s at pp 4: without recomputation the devices are full,
  // so a mode that frees memory can win; which one is decided by the figures below.
  const Inputs in = shipped("sdxl-unet-1024", "dgx1-v100-16gb-1n");
  PlanOptions o;
  o.pp = 4;
  o.recompute = "auto";
  o.frozen = "cached";  // the denoiser in the whole headroom (docs/frozen.md)
  const CompiledPlan p = compile_ok(in, o);
  ASSERT_TRUE(p.recompute_search);
  const RecomputeSearch& s = *p.recompute_search;
  ASSERT_EQ(s.modes.size(), 3u);
  double best = 0;
  std::string fastest;
  int not_planned = 0;
  for (const RecomputeAnswer& a : s.modes) {
    PlanOptions one = o;
    one.recompute = a.mode;
    const CompiledPlan q = compile_ok(in, one);
    EXPECT_GT(a.layers, a.mode == "none" ? -1 : 0) << a.mode;
    if (!a.feasible) {
      // Not planned: it could not have won, and planned alone it does not.
      EXPECT_EQ(a.reason->rfind("not planned: its lower bound on time, ", 0), 0u) << *a.reason;
      EXPECT_LT(q.evaluation.samples_per_s, p.evaluation.samples_per_s) << a.mode;
      ++not_planned;
      continue;
    }
    EXPECT_EQ(*a.iteration_s, q.evaluation.iteration_s) << a.mode;
    EXPECT_EQ(*a.microbatch_size, q.microbatch_size) << a.mode;
    if (*a.samples_per_s > best) best = *a.samples_per_s, fastest = a.mode;
  }
  EXPECT_EQ(s.chosen, fastest);
  EXPECT_NE(s.chosen, "none");  // the case exercises a plan that recomputes
  // Within the default headroom (0.95 of the usable memory) full wins, 4.611 s against
  // selective's 5.184 s; none's bound under its memory, 9.867 s, is above both: not planned.
  EXPECT_EQ(not_planned, 1);
  EXPECT_EQ(s.chosen, "full");
  EXPECT_EQ(p.options.recompute, s.chosen);
  EXPECT_EQ(p.evaluation.samples_per_s, best);
  EXPECT_EQ(s.note.rfind(s.chosen + ": pp 4, microbatch ", 0), 0u) << s.note;
  // The plan is the chosen mode's, as --recompute MODE writes it, but for the modes' lists.
  PlanOptions chosen = o;
  chosen.recompute = s.chosen;
  EXPECT_EQ(without_modes(p, in), without_modes(compile_ok(in, chosen), in));
}

TEST(RecomputeAuto, ModesThatCannotWinAreNotPlanned) {
  // tiny-unet on eight V100s: data parallel, compute-bound; recomputing adds a forward to
  // what it recomputes and saves memory nothing needs. Selective's and full's bounds (their
  // compute alone) are above none's plan, so neither is planned, and planned alone each is
  // slower than the plan kept.
  const Inputs in = shipped("tiny-unet", "dgx1-v100-16gb-1n");
  PlanOptions o;
  o.recompute = "auto";
  const CompiledPlan p = compile_ok(in, o);
  ASSERT_TRUE(p.recompute_search);
  EXPECT_EQ(p.recompute_search->chosen, "none");
  for (const RecomputeAnswer& a : p.recompute_search->modes) {
    if (a.mode == "none") continue;
    EXPECT_FALSE(a.feasible) << a.mode;
    PlanOptions one = o;
    one.recompute = a.mode;
    EXPECT_LT(compile_ok(in, one).evaluation.samples_per_s, p.evaluation.samples_per_s) << a.mode;
  }
  EXPECT_EQ(p.recompute_search->note,
            "none: pp 1, microbatch 2, 0.652 s per iteration; no other mode planned (modes[] says "
            "why)");
  PlanOptions none = o;
  none.recompute = "none";
  EXPECT_EQ(without_modes(p, in), without_modes(compile_ok(in, none), in));
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
  EXPECT_TRUE(m[0].feasible);
  // Full recomputes every layer of a compute-bound pipeline: its bound is above none's plan.
  EXPECT_EQ(m[2].layers, 10);
  EXPECT_FALSE(m[2].feasible);
  EXPECT_EQ(m[2].reason->rfind("not planned: its lower bound on time, ", 0), 0u) << *m[2].reason;
}

}  // namespace
}  // namespace pulse
