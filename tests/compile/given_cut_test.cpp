// plan --cuts / --partition-from: a given cut is planned as given, re-costed on the cluster,
// and a replay refuses a plan whose stages were edited after planning.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pulse/compile/compile.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/tools/replay.hpp"
#include "pulse/tools/validate.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using nlohmann::json;

std::vector<std::vector<std::string>> stage_layers(const json& doc) {
  std::vector<std::vector<std::string>> out;
  for (const json& s : doc["stages"]) out.push_back(s["layers"]);
  return out;
}

TEST(GivenCut, IsPlannedAsGivenAndPassesValidate) {
  // tiny-unet: embed enc0 enc1 enc2 mid0 mid1 dec2 dec1 dec0 head. Four stages: the V at
  // pp 2 (stages 0 and 3 on device 0, 1 and 2 on device 1) or a chain at pp 4.
  const test::Inputs in = test::shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.cuts = {"enc1", "mid0", "dec1"};
  o.solver_max_seconds = 0.3;
  const CompiledPlan p = test::compile_ok(in, o);
  const std::string text = test::plan_text(p, in.model, in.cluster);
  const json doc = json::parse(text);
  const std::vector<std::vector<std::string>> want = {
      {"embed", "enc0"}, {"enc1", "enc2"}, {"mid0", "mid1", "dec2"}, {"dec1", "dec0", "head"}};
  EXPECT_EQ(stage_layers(doc), want);
  EXPECT_EQ(doc["partition"]["method"], "given");
  EXPECT_EQ(doc["options"]["cuts"], json({"enc1", "mid0", "dec1"}));
  // Re-costed: the independent validator rebuilds every stage time from the profiles.
  auto plan = parse_plan(text, "cut.json");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const ValidateResult v = validate_plan({&*plan, &in.model, &in.cluster});
  for (const Violation& x : v.violations) ADD_FAILURE() << x.check << ": " << x.message;
}

TEST(GivenCut, IsAPipelineOrRefused) {
  // Four stages on 8 V100s: the V at pp 2 (or a chain at pp 4), never pp 1 x dp 8 with the
  // stages on one device, nor sharded data parallelism, nor a baseline's own cut.
  const test::Inputs in = test::shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.cuts = {"enc1", "mid0", "dec1"};
  o.solver_max_seconds = 0.3;
  const json doc = json::parse(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  EXPECT_EQ(doc["parallelism"]["pp"], 2);
  EXPECT_EQ(doc["partition"]["method"], "given");
  EXPECT_EQ(doc["stages"][1]["layers"][0], "enc1");
  for (const json& c : doc["search"]) EXPECT_GE(c["pp"].get<int>(), 2) << c.dump();
  const auto refused = [&](PlanOptions x) {
    auto r = compile_plan(in.model, in.cluster, x);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return std::string();
    EXPECT_EQ(r.error().kind, ErrorKind::usage);
    return r.error().message;
  };
  PlanOptions x = o;
  x.pp = 1;
  EXPECT_EQ(refused(x),
            "plan: the given cut is a pipeline of 4 stages; --pp 1 would run them all on one "
            "device (data parallelism, the cut thrown away): give --pp 2 or more, or leave --pp "
            "out");
  x.pp = 3;  // the V 6, w2 12, w3 18, a chain 3
  EXPECT_EQ(refused(x).rfind("plan: the given cut has 4 stages; at --pp 3 the families searched "
                             "have [",
                             0),
            0u);
  x = o;
  x.family = "w2";  // 4 stages only at pp 1
  EXPECT_EQ(refused(x),
            "plan: the given cut has 4 stages, which no family searched makes at a pipeline "
            "degree from 2 to 8 (cluster dgx1-v100-32gb-1n): the V has 2 x pp stages, a chain "
            "pp, k waves 2k x pp");
  x = o;
  x.dp = 8;  // one device a pipeline
  EXPECT_NE(refused(x).find("from 2 to 1 (cluster dgx1-v100-32gb-1n at --dp 8)"),
            std::string::npos);
}

TEST(GivenCut, ThePlannersOwnCutGivesItsOwnFigures) {
  const test::Inputs in = test::shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.family = "v";
  o.pp = 2;
  o.solver_max_seconds = 0.3;
  const json searched = json::parse(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  for (std::size_t s = 1; s < searched["stages"].size(); ++s) {
    o.cuts.push_back(searched["stages"][s]["layers"][0]);
  }
  const json given = json::parse(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  EXPECT_EQ(stage_layers(given), stage_layers(searched));
  EXPECT_EQ(given["stages"], searched["stages"]);
  EXPECT_EQ(given["predicted"], searched["predicted"]);
  EXPECT_EQ(given["partition"]["stages_sha256"], searched["partition"]["stages_sha256"]);
}

TEST(GivenCut, LayersMustBeTheModelsInOrder) {
  const test::Inputs in = test::shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.cuts = {"enc1", "nope"};
  auto r = compile_plan(in.model, in.cluster, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::usage);
  EXPECT_EQ(r.error().message,
            "plan: the cut names layer \"nope\", which model tiny-unet does not have");
  o.cuts = {"mid0", "enc1"};
  r = compile_plan(in.model, in.cluster, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("stage starting at layer enc1 (layer 2 of model tiny-unet) "
                                   "does not come after the previous stage's first layer "
                                   "(layer 4)"),
            std::string::npos)
      << r.error().message;
  o.cuts = {"embed"};  // the first stage starts there already: an empty stage
  EXPECT_FALSE(compile_plan(in.model, in.cluster, o).ok());
}

TEST(GivenCut, AReplayRefusesStagesEditedAfterPlanning) {
  const test::Inputs in = test::shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.pp = 2;
  o.solver_max_seconds = 0.3;
  json doc = json::parse(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  auto untouched = parse_plan(doc.dump(), "p.json");
  ASSERT_TRUE(untouched.ok());
  EXPECT_TRUE(replay_plan({&*untouched}).ok());
  // Move stage 1's first layer to the end of stage 0, keeping every stated time.
  json& layers = doc["stages"][1]["layers"];
  doc["stages"][0]["layers"].push_back(layers[0]);
  layers.erase(layers.begin());
  // The readers refuse it already: enc2 produces skip enc2->dec2, which still says stage 1
  // (check_plan_claims). The replay's own check is on the plan as read without them.
  auto read = parse_plan(doc.dump(), "p.json");
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find("producer_stage 1; its producer \"enc2\" is in stage 0"),
            std::string::npos)
      << read.error().message;
  auto edited = parse_plan(doc.dump(), "p.json", PlanCheck::shape_only);
  ASSERT_TRUE(edited.ok()) << edited.error().message;
  auto refused = replay_plan({&*edited});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::input);
  EXPECT_EQ(refused.error().message.rfind("p.json: $.partition.stages_sha256: the stages are not "
                                          "the ones planned",
                                          0),
            0u)
      << refused.error().message;
  // A caller that checked the stages itself (validate) may replay them.
  ReplayRequest trusted{&*edited};
  trusted.trust_edited_stages = true;
  EXPECT_TRUE(replay_plan(trusted).ok());
}

}  // namespace
}  // namespace pulse
