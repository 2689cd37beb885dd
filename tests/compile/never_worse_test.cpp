// Pulse is never slower than a baseline it prints beside it: on seeded random UNet-like
// models (tests/support/random_unet.hpp), at the same degrees, the pulse plan's predicted
// samples per second is at least every baseline strategy's, each baseline planned on its
// own (a separate compile_plan, as `--strategy NAME` would); and the comparison pulse
// writes into its plan reports those same answers.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "pulse/compile/compile.hpp"
#include "support/random_unet.hpp"

namespace pulse {
namespace {

PlanOptions fixed_options(const test::RandomUnet& r, Strategy s) {
  PlanOptions o;
  o.strategy = s;
  o.pp = r.pp;
  o.dp = 1;
  o.microbatch_size = 1;
  o.global_batch = r.global_batch;
  // Deterministic work limits only, so a baseline planned twice gives the same answer.
  o.solver_max_seconds = 600;
  o.solver_max_nodes = 200;
  return o;
}

constexpr Strategy kBaselines[] = {Strategy::v_naive, Strategy::one_f_one_b,
                                   Strategy::one_f_one_b_direct, Strategy::gpipe};

TEST(NeverWorse, PulseIsAtLeastEveryBaselineOnRandomUnets) {
  int wins = 0, models = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const test::RandomUnet r = test::random_unet(seed, 48);
    const auto pulse = compile_plan(r.model, r.cluster, fixed_options(r, Strategy::pulse));
    ASSERT_TRUE(pulse.ok()) << "seed " << seed << ": " << pulse.error().message;
    ++models;
    double best_baseline = 0;
    for (Strategy s : kBaselines) {
      const auto b = compile_plan(r.model, r.cluster, fixed_options(r, s));
      const auto recorded = std::find_if(
          pulse->baselines.begin(), pulse->baselines.end(),
          [&](const BaselineAnswer& a) { return a.strategy == strategy_name(s); });
      ASSERT_NE(recorded, pulse->baselines.end()) << strategy_name(s);
      EXPECT_EQ(recorded->feasible, b.ok()) << "seed " << seed << " " << strategy_name(s);
      if (!b.ok()) continue;
      EXPECT_EQ(recorded->samples_per_s, b->evaluation.samples_per_s)
          << "seed " << seed << " " << strategy_name(s) << ": pulse's record of it";
      EXPECT_GE(pulse->evaluation.samples_per_s, b->evaluation.samples_per_s)
          << "seed " << seed << ": pulse (" << pulse->family->name << ") is slower than "
          << strategy_name(s);
      best_baseline = std::max(best_baseline, b->evaluation.samples_per_s);
    }
    if (pulse->evaluation.samples_per_s > best_baseline * (1 + 1e-9)) ++wins;
  }
  EXPECT_EQ(models, 200);
  // Not a bound, a sign of life: pulse's own families beat every baseline on some models.
  EXPECT_GT(wins, 0);
}

}  // namespace
}  // namespace pulse
