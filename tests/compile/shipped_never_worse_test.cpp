// Never worse than itself, over the shipped profiles (issue 29, item 5): on every shipped
// model with every hardware family's one-node cluster that plans it, at the default batch,
// the pulse plan is at least as fast as
//   (a) every point of its own memory curve (solver.memory_curve),
//   (b) every configuration its search records as feasible (search[]),
//   (c) every baseline it records (partition.versus) and every sharded data-parallel answer
//       (pipeline_or_not.sharded[]);
// and, where the issue found the unbudgeted search missing a faster schedule (SD2 at 512
// px, pp 4 on a DGX-1), at least as fast as `--activation-budget` at each curve point.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "pulse/compile/compile.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

constexpr const char* kClusters[] = {
    "dgx1-v100-32gb-1n", "dgx1-v100-16gb-1n", "atlas800-910a-1n", "atlas800t-a2-910b-1n",
    "dgx-a100-1n",       "dgx-h100-1n",       "dgx-h200-1n"};

std::vector<std::string> shipped_models() {
  std::vector<std::string> out;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(PULSE_SOURCE_DIR) + "/profiles/models")) {
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Times in a plan are on the nanosecond; a figure derived from them may differ in its last
// bits.
constexpr double kSlack = 1e-9;

void expect_never_worse(const CompiledPlan& p, const std::string& label) {
  const double mine = p.evaluation.samples_per_s;
  for (const MemoryCurvePoint& c : p.solver.memory_curve) {
    EXPECT_LE(p.timeline.makespan_s, c.makespan_s * (1 + kSlack))
        << label << ": the curve's point at " << c.activation_budget_bytes << " bytes";
  }
  for (const Candidate& k : p.candidates) {
    if (!k.feasible) continue;
    EXPECT_GE(mine * (1 + kSlack), *k.samples_per_s)
        << label << ": search pp " << k.pp << " x dp " << k.dp << ", microbatch "
        << k.microbatch_size;
  }
  for (const BaselineAnswer& b : p.baselines) {
    if (b.feasible) {
      EXPECT_GE(mine * (1 + kSlack), *b.samples_per_s) << label << ": " << b.strategy;
    }
  }
  if (p.pipeline_or_not) {
    for (const ShardedAnswer& a : p.pipeline_or_not->sharded) {
      if (a.feasible) {
        EXPECT_GE(mine * (1 + kSlack), *a.samples_per_s) << label << ": ZeRO-" << a.zero_stage;
      }
    }
  }
}

// Under ASan + UBSan the planner runs about seven times slower and the 77 plans would
// take over 20 minutes of CI: there each model is planned on one cluster, the families in
// turn. The whole product, the multi-node clusters too, is scripts/never_worse_sweep.py.
constexpr bool kEveryPair = !test::kSanitizedBuild;

TEST(ShippedNeverWorse, EveryModelOnEveryHardwareFamily) {
  int planned = 0;
  const std::vector<std::string> models = shipped_models();
  constexpr std::size_t kFamilies = std::size(kClusters);
  for (std::size_t m = 0; m < models.size(); ++m) {
    const std::string& model = models[m];
    for (std::size_t c = 0; c < kFamilies; ++c) {
      if (!kEveryPair && c != m % kFamilies) continue;
      const char* cluster = kClusters[c];
      const test::Inputs in = test::shipped(model, cluster);
      if (in.model.device_type_index(in.cluster.device_type) < 0) continue;  // not profiled
      PlanOptions o;
      o.solver_max_seconds = 600;  // deterministic work limits only
      // The denoiser against the baselines: the encoders' outputs cached, their weights off
      // the devices (resident, they leave Flux no room on a V100 or 910A node).
      o.frozen = "cached";
      const auto p = compile_plan(in.model, in.cluster, o);
      if (!p.ok()) continue;  // does not fit: nothing to compare
      ++planned;
      expect_never_worse(*p, model + " on " + cluster);
    }
  }
  // Sampled, 8 of the 12 shipped models plan on their family's cluster (two profile only the
  // CPU; two others do not fit, or have no times for, the cluster they are given in turn).
  EXPECT_GE(planned, kEveryPair ? 41 : 8);
}

TEST(ShippedNeverWorse, NoBudgetIsAtLeastEveryBudgetOnItsCurve) {
  // The case: 0.6650 s with --activation-budget at 3/4 of the peak, 0.6782 s without.
  const test::Inputs in = test::shipped("sd2-unet-512", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.pp = 4;
  o.solver_max_seconds = 600;
  // The denoiser's iteration, as the issue measured it: with the encoders in the step the
  // search weighs iteration plus frozen work, and picks another plan (docs/frozen.md).
  o.frozen = "cached";
  const CompiledPlan p = test::compile_ok(in, o);
  ASSERT_FALSE(p.solver.memory_curve.empty());
  for (const MemoryCurvePoint& c : p.solver.memory_curve) {
    PlanOptions budgeted = o;
    budgeted.activation_budget_bytes = c.activation_budget_bytes;
    const auto b = compile_plan(in.model, in.cluster, budgeted);
    if (!b.ok()) continue;
    EXPECT_GE(p.evaluation.samples_per_s * (1 + kSlack), b->evaluation.samples_per_s)
        << "--activation-budget " << c.activation_budget_bytes;
  }
  EXPECT_LE(p.evaluation.iteration_s, 0.6650 + 1e-4);
}

}  // namespace
}  // namespace pulse
