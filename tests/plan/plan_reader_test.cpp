#include "pulse/plan/plan.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using nlohmann::json;

struct Planned {
  CompiledPlan compiled;
  json doc;
};

// tiny-unet on one DGX-1 at pp 2: 4 stages, dp 4, 16 microbatches.
Planned tiny_planned(Strategy strategy = Strategy::pulse) {
  auto m = load_model_profile(test::profile_path("models/tiny-unet.json"));
  auto c = load_cluster_profile(test::profile_path("clusters/dgx1-v100-32gb-1n.json"));
  PlanOptions o;
  o.pp = 2;
  o.strategy = strategy;
  if (strategy == Strategy::pulse) o.family = "v";  // the V, whose stages are checked below
  auto p = compile_plan(m.value(), c.value(), o);
  return {p.value(), json::parse(test::plan_text(p.value(), m.value(), c.value()))};
}

Plan parse_ok(const json& doc) {
  auto p = parse_plan(doc.dump(), "p.json");
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.value();
}

std::string parse_error(const json& doc) {
  auto p = parse_plan(doc.dump(), "p.json");
  EXPECT_FALSE(p.ok());
  return p.ok() ? "" : p.error().message;
}

TEST(PlanReader, ReadsWhatThePlannerWrote) {
  const Planned t = tiny_planned();
  const Plan p = parse_ok(t.doc);
  EXPECT_EQ(p.file, "p.json");
  EXPECT_EQ(p.generator.name, "pulse-plan");
  EXPECT_EQ(p.inputs.model.file, "tiny-unet.json");
  EXPECT_EQ(p.inputs.cluster.name, "dgx1-v100-32gb-1n");
  EXPECT_EQ(p.strategy(), "pulse");
  const CompiledPlan& c = t.compiled;
  EXPECT_EQ(p.pp(), 2);
  EXPECT_EQ(p.parallelism.dp, c.dp);
  EXPECT_EQ(p.parallelism.microbatch_size, c.microbatch_size);
  EXPECT_EQ(p.parallelism.num_microbatches, c.num_microbatches);
  EXPECT_EQ(p.parallelism.global_batch, c.global_batch);
  EXPECT_EQ(p.parallelism.device_type, "V100-SXM2");
  ASSERT_EQ(p.num_stages(), 4);
  EXPECT_TRUE(p.is_v());
  EXPECT_EQ(p.stages[1].layers, (std::vector<std::string>{"enc2", "mid0"}));
  EXPECT_EQ(p.stages[3].device, 0);
  EXPECT_EQ(p.stages[3].side, "decoder");
  EXPECT_EQ(p.layer_stages().size(), 10u);
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_EQ(p.devices[0].stages, (std::vector<StageId>{0, 3}));
  EXPECT_EQ(p.devices[0].cached_skips.size(), 3u);
  ASSERT_EQ(p.skips.size(), 4u);
  EXPECT_EQ(p.skips[3].name, "enc2->dec2");
  EXPECT_EQ(p.skips[3].route, "local");
  EXPECT_EQ(p.skips[3].producer_device, 1);
  EXPECT_EQ(p.transfers.size(), t.compiled.model.transfers.size());
  EXPECT_EQ(p.transfers[0].forward.activation, t.compiled.model.transfers[0].forward.activation);
  // 4 stages x M microbatches x (F, B), in the planner's order with its times.
  EXPECT_EQ(p.num_ops(), static_cast<std::size_t>(4 * c.num_microbatches * 2));
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(p.schedule[d].size(), t.compiled.timeline.devices[d].ops.size());
    for (std::size_t i = 0; i < p.schedule[d].size(); ++i) {
      const TimedOp& want = t.compiled.timeline.devices[d].ops[i];
      EXPECT_EQ(p.schedule[d][i].op, want.op);
      EXPECT_NEAR(p.schedule[d][i].start_s, want.start_s, 1e-9);
      EXPECT_NEAR(p.schedule[d][i].end_s, want.end_s, 1e-9);
    }
  }
  EXPECT_FALSE(p.split_backward());
  EXPECT_EQ(p.comm.skip_bytes_per_iteration, 0);
  EXPECT_NEAR(p.predicted.samples_per_s, t.compiled.evaluation.samples_per_s, 1e-6);
  EXPECT_EQ(p.predicted.peak_memory_bytes.size(), 2u);
  ASSERT_TRUE(p.predicted.devices && p.predicted.devices->front().memory);
  EXPECT_EQ(p.predicted.devices->front().memory->total(), p.predicted.peak_memory_bytes[0]);
  EXPECT_EQ(p.rank_map.world_size, 2 * c.dp);
  ASSERT_EQ(p.rank_map.pipeline_groups.size(), static_cast<std::size_t>(c.dp));
  for (int r = 0; r < c.dp; ++r) {
    EXPECT_EQ(p.rank_map.pipeline_groups[r], c.ranks[r]);
    EXPECT_EQ(p.rank_map.data_parallel_groups[1][r], c.ranks[r][1]);
  }
  EXPECT_EQ(p.options.memory.optimizer_bytes_per_param, 12);
}

TEST(PlanReader, V2StatesTheOptionsAsGivenAndWhatWasChosenApart) {
  const Planned t = tiny_planned();
  EXPECT_EQ(t.doc["schema"], "pulse.plan/v2");
  // Neither --zero nor --recompute given: the options say so; chosen says what was planned.
  EXPECT_TRUE(t.doc["options"]["memory"]["zero_stage"].is_null());
  EXPECT_EQ(t.doc["chosen"]["memory"]["zero_stage"], 0);
  EXPECT_EQ(t.doc["chosen"]["recompute"], "none");
  EXPECT_EQ(t.doc["chosen"]["memory"]["precision"], "mixed");
  json doc = t.doc;
  doc["chosen"]["memory"]["zero_stage"] = 2;
  doc["chosen"]["recompute"] = "selective";
  doc["chosen"]["memory"]["optimizer_bytes_per_param"] = 4;
  doc["chosen"]["memory"]["precision"] = "bf16";  // pure bf16: 2 + 2 + 4 bytes, as stated
  doc["options"]["recompute"] = "auto";
  const Plan p = parse_ok(doc);
  EXPECT_EQ(p.schema, "pulse.plan/v2");
  EXPECT_FALSE(p.options.memory.zero_stage);
  EXPECT_EQ(p.memory().zero_stage, 2);  // what the tools plan with: chosen
  EXPECT_EQ(p.memory().optimizer_bytes_per_param, 4);
  EXPECT_EQ(p.recompute(), "selective");
  EXPECT_EQ(p.options.recompute, "auto");
}

TEST(PlanReader, V1OptionsAreWhatWasPlanned) {
  json doc = tiny_planned().doc;
  doc["schema"] = "pulse.plan/v1";
  doc.erase("chosen");
  doc["options"]["memory"]["zero_stage"] = 1;
  doc["options"]["memory"]["optimizer_bytes_per_param"] = 4;
  doc["options"]["memory"]["precision"] = "bf16";  // pure bf16: 2 + 2 + 4 bytes, as stated
  doc["options"]["recompute"] = "full";
  const Plan p = parse_ok(doc);
  EXPECT_EQ(p.schema, "pulse.plan/v1");
  EXPECT_FALSE(p.chosen);
  EXPECT_EQ(p.memory().zero_stage, 1);
  EXPECT_EQ(p.memory().optimizer_bytes_per_param, 4);
  EXPECT_EQ(p.recompute(), "full");
  // Written back as it was read: a v1 plan stays v1, with no chosen section.
  EXPECT_EQ(json::parse(write_plan(p)), doc);
  doc["options"]["memory"].erase("zero_stage");  // absent in v1: 0
  EXPECT_EQ(parse_ok(doc).memory().zero_stage, 0);
}

// The ops are parsed as records (json_records.hpp) where every op has the same keys; an op
// with one more key makes the whole plan parse as it is. Both read the same plan.
TEST(PlanReader, OpsAsRecordsReadAsThePlainParseDoes) {
  const json doc = tiny_planned().doc;
  json plain = doc;
  plain["schedule"][1]["ops"][2]["note"] = "a key the reader ignores";
  const Plan from_records = parse_ok(doc), from_plain = parse_ok(plain);
  EXPECT_EQ(from_records.num_ops(), from_plain.num_ops());
  EXPECT_EQ(write_plan(from_records), write_plan(from_plain));
  EXPECT_EQ(json::parse(write_plan(from_records)), doc);
}

TEST(PlanReader, SequentialPlansAreChains) {
  const Plan p = parse_ok(tiny_planned(Strategy::one_f_one_b).doc);
  EXPECT_FALSE(p.is_v());
  EXPECT_EQ(p.num_stages(), 2);
  EXPECT_EQ(p.stages[1].side, "chain");
  EXPECT_EQ(p.skips[0].route, "forwarded");
}

TEST(PlanReader, ToleratesKeysItDoesNotKnow) {
  json doc = tiny_planned().doc;
  doc["annotations"] = {{"reviewer", "someone"}, {"gap", 0.0}};
  doc["stages"][0]["note"] = "hand-tuned";
  doc["schedule"][0]["ops"][0]["comment"] = "first";
  EXPECT_EQ(parse_ok(doc).num_stages(), 4);
}

TEST(PlanReader, SplitBackwardFromTheOpsWhenTheFlagIsAbsent) {
  json doc = tiny_planned().doc;
  doc["schedule_info"].erase("split_backward");
  // Every B becomes an I and a W, each half of the B's time.
  for (json& device : doc["schedule"]) {
    json split = json::array();
    for (const json& op : device["ops"]) {
      if (op["op"] != "B") {
        split.push_back(op);
        continue;
      }
      const double mid = (op["start_s"].get<double>() + op["end_s"].get<double>()) / 2;
      json i = op, w = op;
      i["op"] = "I";
      i["end_s"] = mid;
      w["op"] = "W";
      w["start_s"] = mid;
      split.push_back(i);
      split.push_back(w);
    }
    device["ops"] = split;
  }
  const Plan p = parse_ok(doc);
  EXPECT_TRUE(p.split_backward());
  EXPECT_EQ(p.schedule[0].back().op.kind, OpKind::backward_weight);
  EXPECT_EQ(p.num_ops(), static_cast<std::size_t>(4 * p.parallelism.num_microbatches * 3));
}

TEST(PlanReader, ReportsEveryProblemWithItsPath) {
  json doc = tiny_planned().doc;
  doc["parallelism"].erase("global_batch");
  doc["stages"][1]["layers"] = json::array();
  doc["skips"][0]["producer_stage"] = "zero";
  doc["schedule"][0]["ops"][2]["op"] = "X";
  const int M = doc["parallelism"]["num_microbatches"];
  doc["schedule"][0]["ops"][3]["mb"] = M;
  doc["inputs"]["model"]["sha256"] = "ABC";
  doc["predicted"]["peak_memory_bytes"][0] = -1;
  const std::string e = parse_error(doc);
  EXPECT_EQ(e,
            "p.json: $.inputs.model.sha256: expected 64 lowercase hex digits, got a string "
            "\"ABC\"\n"
            "p.json: $.parallelism: missing required key \"global_batch\"\n"
            "p.json: $.stages[1].layers: expected at least one layer\n"
            "p.json: $.skips[0].producer_stage: expected a stage id from 0 to 3, got a string "
            "\"zero\"\n"
            "p.json: $.schedule[0].ops[2].op: expected \"F\", \"B\", \"I\" or \"W\", got \"X\"\n"
            "p.json: $.schedule[0].ops[3].mb: expected a microbatch from 0 to " +
                std::to_string(M - 1) + ", got " + std::to_string(M) +
                "\n"
                "p.json: $.predicted.peak_memory_bytes[0]: expected an integer >= 0, got -1");
}

TEST(PlanReader, StageCountMustMatchTheDegrees) {
  json doc = tiny_planned().doc;
  doc["parallelism"]["num_stages"] = 3;
  EXPECT_EQ(parse_error(doc),
            "p.json: $.stages: expected 3 stages ($.parallelism.num_stages), got 4");
}

TEST(PlanReader, NotAPlan) {
  EXPECT_EQ(parse_plan("[1, 2]", "p.json").error().message,
            "p.json: $: expected a plan object, got an array of 2");
  EXPECT_EQ(parse_plan(R"({"schema": "pulse.model/v1"})", "m.json").error().message,
            "m.json: $.schema: this is a model profile (\"pulse.model/v1\"), expected a plan "
            "(\"pulse.plan/v2\")");
  EXPECT_EQ(parse_plan(R"({"schema": "pulse.plan/v9"})", "p.json").error().message,
            "p.json: $.schema: expected \"pulse.plan/v2\" or \"pulse.plan/v1\" (the versions "
            "this pulse-plan reads), got a string \"pulse.plan/v9\"");
  EXPECT_EQ(parse_plan("{\"schema\": ", "p.json").error().message.rfind("p.json:1:12: ", 0), 0u);
  EXPECT_EQ(load_plan("/nonexistent/p.json").error().kind, ErrorKind::input);
}

TEST(PlanReader, MissingSectionsAreNamed) {
  const std::string e = parse_error(json{{"schema", "pulse.plan/v1"}});
  EXPECT_EQ(e.substr(0, e.find('\n')), "p.json: $: missing required key \"generator\"");
  EXPECT_NE(e.find("p.json: $: missing required key \"schedule\""), std::string::npos);
  EXPECT_NE(e.find("p.json: $: missing required key \"rank_map\""), std::string::npos);
}

}  // namespace
}  // namespace pulse
