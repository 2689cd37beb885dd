// The frozen section in the views (docs/frozen.md): simulate's JSON report, diff and the
// HTML page, on a small pipeline plan given a frozen section by hand: one op in device 1's
// first idle gap (device 1 waits for device 0's first forward), one before the step.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pulse/compile/compile.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/tools/diff.hpp"
#include "pulse/tools/export.hpp"
#include "pulse/tools/replay.hpp"
#include "pulse/tools/simulation_report.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

Plan tiny_pipeline() {
  auto m = load_model_profile(test::profile_path("models/tiny-unet.json"));
  auto c = load_cluster_profile(test::profile_path("clusters/dgx1-v100-32gb-1n.json"));
  PlanOptions o;
  o.pp = 2;
  o.family = "v";
  const CompiledPlan p = compile_plan(m.value(), c.value(), o).value();
  auto plan = parse_plan(test::plan_text(p, m.value(), c.value()), "p.json");
  EXPECT_TRUE(plan.ok());
  return plan.value();
}

// Device 1's first op starts at t1 > 0: [0, t1) is idle. A text encoder op of half that gap
// in it, and 2 ms of VAE before the step on device 0.
Plan with_frozen(Plan p) {
  const double t1 = p.schedule[1].front().start_s;
  EXPECT_GT(t1, 0);
  PlanFrozen f;
  f.placement = "bubbles";
  f.option = "auto";
  f.components = {"vae", "text"};
  f.samples = 1;
  f.before_step_s = 0.002;
  f.bubble_s = t1 / 2;
  f.step_s = p.predicted.iteration_s + f.before_step_s;
  f.samples_per_s = p.parallelism.global_batch / f.step_s;
  f.weight_bytes = {1000, 1000};
  f.activation_bytes = {100, 100};
  f.note = "by hand";
  f.ops.push_back({"vae", 0, "before_step", 0, 0.002, 0, 1, std::nullopt, std::nullopt});
  f.ops.push_back({"text", 1, "bubble", 0, t1 / 2, 0, 1, 0.0, t1});
  p.frozen = f;
  return p;
}

TEST(FrozenViews, SimulateJsonStatesTheStepAndWhatTheCheckFinds) {
  const Plan plan = with_frozen(tiny_pipeline());
  const Replay r = replay_plan({&plan}).value();
  auto doc = nlohmann::json::parse(simulation_report_json("p.json", "{}", plan, r, {}));
  ASSERT_TRUE(doc.contains("frozen"));
  const auto& f = doc["frozen"];
  EXPECT_EQ(f["placement"], "bubbles");
  EXPECT_DOUBLE_EQ(f["step_s"].get<double>(), r.evaluation.iteration_s + 0.002);
  ASSERT_EQ(f["ops"].size(), 2u);
  EXPECT_EQ(f["ops"][1]["slot"], "bubble");
  EXPECT_FALSE(f["ops"][0].contains("gap_start_s"));
  EXPECT_TRUE(f["problems"].empty()) << f["problems"];
  // Moved onto device 1's first op: busy time, and outside its gap.
  Plan moved = plan;
  const PlanOp& first = moved.schedule[1].front();
  moved.frozen->ops[1].start_s = first.start_s;
  moved.frozen->ops[1].end_s = first.end_s;
  auto bad = nlohmann::json::parse(simulation_report_json("p.json", "{}", moved, r, {}));
  ASSERT_FALSE(bad["frozen"]["problems"].empty());
  // A plan without frozen encoders has no frozen object.
  const Plan bare = tiny_pipeline();
  EXPECT_FALSE(nlohmann::json::parse(simulation_report_json("p.json", "{}", bare, r, {}))
                   .contains("frozen"));
}

TEST(FrozenViews, SimulateJsonListsABucketsPlansRows) {
  Plan plan = tiny_pipeline();
  const Replay r = replay_plan({&plan}).value();
  PlanBuckets b;
  b.body = 1;
  b.weighted_samples_per_s = 12.5;
  b.rows.push_back(BucketRow{"small", 0, 0, 0, 100, 0.25, 4, 8, "v", 0.5, 32, 0.1, 1000, 0.6});
  b.rows.push_back(BucketRow{"large", 0, 0, 0, 400, 0.75, 2, 16, "v", 1.5, 10.6, 0.2, 2000, 1.5});
  plan.buckets = b;
  auto doc = nlohmann::json::parse(simulation_report_json("p.json", "{}", plan, r, {}));
  ASSERT_TRUE(doc.contains("buckets"));
  EXPECT_EQ(doc["buckets"]["replayed"], "large");
  EXPECT_EQ(doc["buckets"]["weighted_samples_per_s"], 12.5);
  ASSERT_EQ(doc["buckets"]["rows"].size(), 2u);
  EXPECT_EQ(doc["buckets"]["rows"][0]["microbatch_size"], 4);
  EXPECT_EQ(doc["buckets"]["rows"][1]["num_microbatches"], 16);
  EXPECT_EQ(doc["buckets"]["rows"][0]["largest_plan_iteration_s"], 0.6);
}

TEST(FrozenViews, DiffComparesPlacementAndStep) {
  const Plan bare = tiny_pipeline();
  const Plan frozen = with_frozen(bare);
  const PlanDiff d = diff_plans({&bare, &frozen});
  std::map<std::string, const DiffRow*> rows;
  for (const DiffRow& r : d.rows) {
    if (r.section == "frozen") rows[r.key] = &r;
  }
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows["placement"]->old_text, "none");
  EXPECT_EQ(rows["placement"]->new_text, "bubbles");
  // Without frozen encoders the step is the iteration; with them 2 ms more.
  EXPECT_DOUBLE_EQ(rows["step_s"]->old_value.value(), bare.predicted.iteration_s);
  EXPECT_DOUBLE_EQ(rows["step_s"]->new_value.value(), bare.predicted.iteration_s + 0.002);
  EXPECT_EQ(rows["step_s"]->change, Change::worse);
  EXPECT_EQ(rows["samples_per_s"]->change, Change::worse);
  // Neither has them: no section.
  for (const DiffRow& r : diff_plans({&bare, &bare}).rows) EXPECT_NE(r.section, "frozen");
}

TEST(FrozenViews, TheHtmlTimelineDrawsBubbleOpsWithALegend) {
  const Plan plan = with_frozen(tiny_pipeline());
  const std::string html = export_html({&plan, {}});
  std::size_t rects = 0;
  for (std::size_t at = html.find("class=\"frozen\"><title>"); at != std::string::npos;
       at = html.find("class=\"frozen\"><title>", at + 1)) {
    ++rects;
  }
  EXPECT_EQ(rects, 1u);  // the bubble op; the before-step op is not in the iteration
  EXPECT_NE(html.find("<title>frozen text: samples 0 to 0 of the next iteration"),
            std::string::npos);
  EXPECT_NE(html.find("<i class=\"frozen\"></i>frozen encoders in the bubbles"), std::string::npos);
  EXPECT_NE(html.find("frozen encoders: by hand"), std::string::npos);
  const Plan bare = tiny_pipeline();
  EXPECT_EQ(export_html({&bare, {}}).find("class=\"frozen\""), std::string::npos);
}

}  // namespace
}  // namespace pulse
