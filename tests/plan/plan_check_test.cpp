#include "pulse/plan/plan_check.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pulse/compile/plan_builder.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using nlohmann::json;

// tiny-unet on one DGX-1, the V at pp 2: stages 0..3 on devices 0 1 1 0, dp 4, 4
// microbatches; device 0 runs F(0, 0), F(0, 1), F(3, 0), B(3, 0), ...
const json& tiny_plan() {
  static const json doc = json::parse(test::tiny_v_plan_text());
  return doc;
}

std::string plan_error_of(const json& doc) {
  auto p = parse_plan(doc.dump(), "p.json");
  EXPECT_FALSE(p.ok());
  if (p.ok()) return "";
  EXPECT_EQ(p.error().kind, ErrorKind::input);
  return p.error().message;
}

// What `check` (check_plan_structure or check_plan_claims) finds in the plan read without
// the reader's own checks, one "check: path: message" line each.
std::vector<std::string> problems(
    const json& doc, std::vector<PlanProblem> (*check)(const Plan&) = check_plan_structure) {
  auto p = parse_plan(doc.dump(), "p.json", PlanCheck::shape_only);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  std::vector<std::string> out;
  if (!p.ok()) return out;
  for (const PlanProblem& x : check(*p)) {
    out.push_back(fmt::format("{}: {}: {}", x.check, x.path.str(), x.message));
  }
  return out;
}

TEST(PlanLimits, TheFixtureIsWhole) {
  ASSERT_EQ(tiny_plan()["parallelism"]["num_microbatches"], 4);
  ASSERT_EQ(tiny_plan()["parallelism"]["dp"], 4);
  EXPECT_EQ(problems(tiny_plan()), std::vector<std::string>{});
}

TEST(PlanLimits, DegreesOverTheLimitsAreRefusedBeforeTheRestIsRead) {
  // Each would allocate gigabytes (pp) or run for hours (microbatches); refused with only
  // the degree's own message (no echo from the indices it bounds).
  json doc = tiny_plan();
  doc["parallelism"]["pp"] = std::numeric_limits<int>::max();
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.parallelism.pp: expected at most 1024 (the pipeline degree limit), got "
            "2147483647");
  doc = tiny_plan();
  doc["parallelism"]["num_microbatches"] = 2000000000;
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.parallelism.num_microbatches: expected at most 4096 (the microbatch "
            "limit), got 2000000000");
  doc = tiny_plan();
  doc["parallelism"]["num_stages"] = 100000;
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.parallelism.num_stages: expected at most 16384 (the stage limit), got "
            "100000");
  doc = tiny_plan();
  doc["parallelism"]["dp"] = 2000000;
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.parallelism.dp: expected at most 1048576 (the rank limit), got 2000000");
}

TEST(PlanLimits, ProductsOfDegreesHaveTheirLimits) {
  json doc = tiny_plan();
  doc["parallelism"]["pp"] = 1024;
  doc["parallelism"]["dp"] = 2048;
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.parallelism: pp 1024 x dp 2048 is 2097152 ranks; expected at most 1048576 "
            "(the rank limit)");
  doc = tiny_plan();
  doc["parallelism"]["num_stages"] = 1024;
  doc["parallelism"]["num_microbatches"] = 4096;
  // 2 x 1024 x 4096 = 2^23 > 2^22.
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.parallelism: num_stages 1024 x num_microbatches 4096 x 2 (F and B) is "
            "8388608 ops; expected at most 4194304 (the op limit)");
}

TEST(PlanLimits, TimesBytesRanksAndFactors) {
  json doc = tiny_plan();
  doc["schedule"][0]["ops"][1]["end_s"] = 1e300;
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.schedule[0].ops[1].end_s: expected at most 1000000 (the time limit, 11.6 "
            "days), got 1e+300");
  doc = tiny_plan();
  doc["predicted"]["iteration_s"] = 1e18;
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.predicted.iteration_s: expected at most 1000000 (the time limit, 11.6 "
            "days), got 1e+18");
  doc = tiny_plan();
  doc["skips"][0]["bytes_per_sample"] = std::int64_t{9000000000000000000};
  doc["predicted"]["peak_memory_bytes"][1] = std::int64_t{1} << 60;
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.skips[0].bytes_per_sample: expected at most 9007199254740992 (the byte "
            "count limit, 2^53), got 9e+18\n"
            "p.json: $.predicted.peak_memory_bytes[1]: expected at most 9007199254740992 (the "
            "byte count limit, 2^53), got 1.152921504606847e+18");
  doc = tiny_plan();
  doc["rank_map"]["pipeline_groups"][0][0] = 1 << 20;
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.rank_map.pipeline_groups[0][0]: expected a rank below 1048576 (the rank "
            "limit), got 1048576");
  doc = tiny_plan();
  doc["cost_model"]["link_scale"] = 1e6;
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.cost_model.link_scale: expected at most 1000 (the what-if factor limit, "
            "1/1000 to 1000), got 1000000");
}

TEST(PlanLimits, WhatTheToolsDeriveFromByteCountsHasTheByteLimitToo) {
  // Each count is within 2^53; their products are not, and used to overflow an int64 in the
  // replay (bytes_per_sample x microbatch_size) and the figures (traffic x M x dp).
  json doc = tiny_plan();
  doc["skips"][0]["bytes_per_sample"] = std::int64_t{1} << 53;
  doc["parallelism"]["microbatch_size"] = 1 << 20;
  EXPECT_EQ(plan_error_of(doc).substr(0, plan_error_of(doc).find('\n')),
            "p.json: $.skips[0].bytes_per_sample: bytes_per_sample x microbatch_size 1048576 come "
            "to 9.445e+21 bytes; expected at most 9007199254740992 (the byte count limit, 2^53)");
  doc = tiny_plan();
  for (json& t : doc["transfers"]) t["forward_bytes_per_microbatch"]["activation"] = 1LL << 52;
  // 4 microbatches x dp 4 x at least 2^52 bytes: 2^56.
  const std::string e = plan_error_of(doc);
  EXPECT_EQ(e.rfind("p.json: $.transfers: an iteration's point-to-point bytes (every transfer "
                    "both ways x num_microbatches 4 x dp 4) come to ",
                    0),
            0u)
      << e;
  doc = tiny_plan();
  doc["stages"][0]["params"] = std::int64_t{1} << 53;
  EXPECT_EQ(plan_error_of(doc).rfind("p.json: $.stages: the weights, gradients and optimizer state "
                                     "of every stage (params x the bytes per parameter of "
                                     "$.chosen.memory, or of $.options.memory in a v1 plan) "
                                     "come to ",
                                     0),
            0u);
}

TEST(PlanStructure, OpsMissingTwiceMisplacedOrOfTheWrongKind) {
  json doc = tiny_plan();
  json& d0 = doc["schedule"][0]["ops"];
  json& d1 = doc["schedule"][1]["ops"];
  ASSERT_EQ(d0[2], (json{{"op", "F"},
                         {"stage", 3},
                         {"mb", 0},
                         {"start_s", d0[2]["start_s"]},
                         {"end_s", d0[2]["end_s"]}}));
  ASSERT_EQ(d1[1]["stage"], 2);
  d0.erase(2);          // F(3, 0) missing
  d1.push_back(d1[0]);  // F(1, 0) twice
  d1.push_back(d0[0]);  // F(0, 0) moved to device 1, which does not run stage 0
  d0.erase(0);
  d1[1]["op"] = "W";  // a W in a schedule without a split; and so F(2, 0) is missing
  json& late = d0[2];
  late["end_s"] = late["start_s"].get<double>() - 1e-3;
  const std::size_t n1 = d1.size();
  EXPECT_EQ(
      problems(doc),
      (std::vector<std::string>{
          fmt::format("schedule: $.schedule[0].ops[2].end_s: {}(stage {}, mb {}) ends at "
                      "{:.9f} s, before it starts at {:.9f} s",
                      late["op"].get<std::string>(), late["stage"].get<int>(),
                      late["mb"].get<int>(), late["end_s"].get<double>(),
                      late["start_s"].get<double>()),
          "schedule: $.schedule[1].ops[1].op: expected F or B (the schedule does not split "
          "backward), got W",
          fmt::format("schedule: $.schedule[1].ops[{}]: F(stage 1, mb 0) is listed twice", n1 - 2),
          fmt::format("schedule: $.schedule[1].ops[{}]: F(stage 0, mb 0) is listed on device "
                      "1, but stage 0 runs on device 0",
                      n1 - 1),
          "schedule: $.schedule[1].ops: F(stage 2, mb 0) is missing (every stage runs F and "
          "B for every microbatch)",
          "schedule: $.schedule[0].ops: F(stage 3, mb 0) is missing (every stage runs F and "
          "B for every microbatch)"}));
}

TEST(PlanStructure, ScheduleEntriesOnePerDeviceInOrder) {
  json doc = tiny_plan();
  std::swap(doc["schedule"][0], doc["schedule"][1]);
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.schedule[0].device: expected 0 (schedule entries are listed in device "
            "order), got 1\n"
            "p.json: $.schedule[1].device: expected 1 (schedule entries are listed in device "
            "order), got 0");
  doc = tiny_plan();
  doc["schedule"].erase(1);
  const std::string e = plan_error_of(doc);
  EXPECT_EQ(e.substr(0, e.find('\n')),
            "p.json: $.schedule: expected 2 entries, one per pipeline device ($.parallelism.pp), "
            "got 1");
}

TEST(PlanStructure, AnEmptyScheduleListsTenMissingOpsAndCountsTheRest) {
  json doc = tiny_plan();
  for (json& d : doc["schedule"]) d["ops"] = json::array();
  const std::vector<std::string> got = problems(doc);
  ASSERT_EQ(got.size(), kMaxProblemsShown + 1);
  // 4 stages x 4 microbatches x (F, B) = 32 ops.
  EXPECT_EQ(got.back(), "schedule: $.schedule: ... and 22 more");
  auto p = parse_plan(doc.dump(), "p.json", PlanCheck::shape_only);
  std::size_t total = 0;
  for (const PlanProblem& x : check_plan_structure(*p)) total += x.count;
  EXPECT_EQ(total, 32u);
}

TEST(PlanStructure, RankMapEveryRankOnceAndGroupsAsRanksSay) {
  json doc = tiny_plan();
  json& m = doc["rank_map"];
  // Rank 3 (dp 0, device 1) renamed rank 0, everywhere: the map is consistent but for that.
  for (json& r : m["ranks"]) {
    if (r["rank"] == 3) r["rank"] = 0;
  }
  m["pipeline_groups"][0] = {0, 0};
  m["data_parallel_groups"][1][0] = 0;
  EXPECT_EQ(problems(doc),
            std::vector<std::string>{"rank_map: $.rank_map.ranks[3].rank: rank 0 is listed twice"});
  doc = tiny_plan();
  doc["rank_map"]["ranks"][1]["dp_index"] = 7;
  doc["rank_map"]["world_size"] = 9;
  doc["rank_map"]["data_parallel_groups"].erase(1);
  EXPECT_EQ(problems(doc),
            (std::vector<std::string>{
                "rank_map: $.rank_map.world_size: world_size 9 is not pp 2 x dp 4",
                "rank_map: $.rank_map.ranks[1]: rank 1 has dp_index 7 and pipeline_device 0, "
                "outside dp 4 x pp 2",
                "rank_map: $.rank_map.pipeline_groups[1]: pipeline_groups[1] is [1, 2]; ranks[] "
                "gives [-1, 2]",
                "rank_map: $.rank_map.data_parallel_groups: data_parallel_groups has 1 groups, "
                "expected 2"}));
}

TEST(PlanStructure, PredictedFiguresOnePerDevice) {
  json doc = tiny_plan();
  doc["predicted"]["peak_memory_bytes"].erase(1);
  doc["predicted"]["devices"][1]["device"] = 0;
  EXPECT_EQ(problems(doc),
            (std::vector<std::string>{
                "memory: $.predicted.peak_memory_bytes: predicted.peak_memory_bytes has 1 "
                "entries, pp is 2",
                "memory: $.predicted.devices[1].device: device 0 is listed twice"}));
}

TEST(PlanStructure, TheReaderRefusesWhatTheCheckFinds) {
  json doc = tiny_plan();
  doc["schedule"][1]["ops"].erase(0);
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.schedule[1].ops: F(stage 1, mb 0) is missing (every stage runs F and B "
            "for every microbatch)");
}

// --- The plan's claims about itself (check_plan_claims) ------------------------------

std::vector<std::string> claims(const json& doc) {
  return problems(doc, check_plan_claims);
}

// tiny-unet on two DGX-1 nodes at pp 2 x dp 8: ranks 0-7 on node 0, 8-15 on node 1.
const json& two_node_plan() {
  static const json doc = [] {
    const test::Inputs in = test::shipped("tiny-unet", "dgx1-v100-32gb-2n");
    PlanOptions o;
    o.pp = 2;
    o.dp = 8;
    o.global_batch = 16;
    o.microbatch_size = 1;
    return json::parse(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  }();
  return doc;
}

TEST(PlanClaims, PlansTheToolWroteHaveNone) {
  EXPECT_EQ(claims(tiny_plan()), std::vector<std::string>{});
  EXPECT_EQ(claims(two_node_plan()), std::vector<std::string>{});
}

TEST(PlanClaims, EachContradictionIsNamedWhereItIs) {
  {
    json doc = tiny_plan();
    doc["parallelism"]["global_batch"] = 15;
    EXPECT_EQ(claims(doc), std::vector<std::string>{
                               "degrees: $.parallelism.global_batch: global_batch 15 is not dp 4 "
                               "x microbatch_size 1 x num_microbatches 4 = 16"});
  }
  {
    json doc = tiny_plan();
    json& layers = doc["stages"][1]["layers"];
    layers.insert(layers.begin(), doc["stages"][0]["layers"][0]);
    EXPECT_EQ(claims(doc), std::vector<std::string>{
                               "layers: $.stages[1].layers[0]: layer \"embed\" is in stage 0 and "
                               "again in stage 1"});
  }
  {
    json doc = tiny_plan();
    json& skip = doc["skips"][0];  // embed->head: stage 0 to stage 3, both on device 0
    ASSERT_EQ(skip["name"], "embed->head");
    skip["consumer_device"] = 1;
    skip["local"] = false;
    EXPECT_EQ(claims(doc),
              (std::vector<std::string>{
                  "skips: $.skips[0].consumer_device: skip \"embed->head\" says consumer_device "
                  "1; its consumer_stage 3 runs on device 0",
                  "skips: $.skips[0].local: skip \"embed->head\" says local false; it runs from "
                  "stage 0 (device 0) to stage 3 (device 0)"}));
  }
  {
    json doc = tiny_plan();
    json& ops = doc["schedule"][0]["ops"];  // F(0, 0), F(0, 1), F(3, 0), B(3, 0), ...
    ASSERT_EQ(ops[2]["op"], "F");
    ASSERT_EQ(ops[3]["op"], "B");
    ASSERT_EQ(ops[2]["stage"], 3);
    ASSERT_EQ(ops[3]["stage"], 3);
    std::swap(ops[2], ops[3]);
    EXPECT_EQ(claims(doc), std::vector<std::string>{
                               "schedule: $.schedule[0].ops[3]: F(stage 3, mb 0) is listed after "
                               "B(stage 3, mb 0), which needs it first"});
  }
}

// small-unet-cpu carries a time embedding with the main activation (the shipped CPU profile).
const json& carried_plan() {
  static const json doc = [] {
    const test::Inputs in = test::shipped("small-unet-cpu", "cpu-localhost");
    PlanOptions o;
    o.pp = 2;
    return json::parse(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  }();
  return doc;
}

TEST(PlanClaims, FiguresPrecisionAndCarriedTensorsAgree) {
  EXPECT_EQ(claims(carried_plan()), std::vector<std::string>{});
  {  // samples_per_s is global_batch / iteration_s: diff and its gates read the one
    json doc = tiny_plan();
    const double iteration = doc["predicted"]["iteration_s"];
    doc["predicted"]["samples_per_s"] = 2 * 16 / iteration;
    EXPECT_EQ(claims(doc),
              std::vector<std::string>{fmt::format(
                  "predicted: $.predicted.samples_per_s: samples_per_s {:.6f} is not global_batch "
                  "16 / iteration_s {:.9f} = {:.6f}",
                  2 * 16 / iteration, iteration, 16 / iteration)});
    // Both scaled together agree (the rounding of each as written is allowed).
    doc["predicted"]["iteration_s"] = std::round(iteration / 3 * 1e9) / 1e9;
    doc["predicted"]["samples_per_s"] = std::round(3 * 16 / iteration * 1e6) / 1e6;
    EXPECT_EQ(claims(doc), std::vector<std::string>{});
    // An iteration under the 1 ns the plans state times to makes 300-digit rates.
    doc["predicted"]["iteration_s"] = 1e-300;
    doc["predicted"]["samples_per_s"] = 1.6e301;
    EXPECT_EQ(claims(doc), std::vector<std::string>{
                               "predicted: $.predicted.iteration_s: expected at least the plans' "
                               "1 ns resolution, got 1e-300 s"});
  }
  {
    json doc = tiny_plan();
    doc["options"]["memory"]["precision"] = "bf16";
    EXPECT_EQ(claims(doc), std::vector<std::string>{
                               "options: $.options.memory.precision: precision \"bf16\" holds 2 "
                               "+ 2 + 4 bytes per parameter (weights, gradients, optimizer "
                               "state), not the 2 + 2 + 12 stated beside it"});
  }
  {
    json doc = carried_plan();
    std::size_t at = 0;
    while (at < doc["transfers"].size() && !doc["transfers"][at].contains("carried")) ++at;
    ASSERT_LT(at, doc["transfers"].size());
    doc["transfers"][at]["carried"].push_back("no_such_tensor");
    const std::size_t k = doc["transfers"][at]["carried"].size() - 1;
    EXPECT_EQ(claims(doc), std::vector<std::string>{fmt::format(
                               "transfers: $.transfers[{}].carried[{}]: \"no_such_tensor\" is "
                               "not a carried tensor of this plan ($.carried[].name)",
                               at, k)});
  }
}

TEST(PlanClaims, ALayerMovedLeavesItsSkipsStagesBehind) {
  // The V at pp 2 over tiny-unet: enc1, the last layer of stage 0 here, produces skip
  // enc1->dec1. Moved to the head of stage 1 (the digest recomputed or deleted with it,
  // as a user who read plan.cpp would), the skip still says producer_stage 0.
  json doc = tiny_plan();
  json& first = doc["stages"][0]["layers"];
  ASSERT_EQ(first.back(), "enc1");
  doc["stages"][1]["layers"].insert(doc["stages"][1]["layers"].begin(), first.back());
  first.erase(first.size() - 1);
  doc["partition"].erase("stages_sha256");
  std::size_t k = 0;
  while (doc["skips"][k]["producer"] != "enc1") ++k;
  EXPECT_EQ(claims(doc), std::vector<std::string>{fmt::format(
                             "skips: $.skips[{}].producer_stage: skip \"enc1->dec1\" says "
                             "producer_stage 0; its producer \"enc1\" is in stage 1 "
                             "($.stages[1].layers)",
                             k)});
  doc["stages"][1]["layers"][0] = "enc1_renamed";
  EXPECT_EQ(claims(doc), std::vector<std::string>{fmt::format(
                             "skips: $.skips[{}].producer_stage: skip \"enc1->dec1\" says "
                             "producer_stage 0; its producer \"enc1\" is in no stage",
                             k)});
}

TEST(PlanClaims, RanksAreNumberedNodeByNode) {
  const json& plan = two_node_plan();
  const json& ranks = plan["rank_map"]["ranks"];
  auto index_of = [&](int rank) {
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i]["rank"] == rank) return i;
    }
    ADD_FAILURE() << "no rank " << rank;
    return std::size_t{0};
  };
  auto first_off_node_0 = [&](const json& doc) {
    for (const json& r : doc["rank_map"]["ranks"]) {
      if (r["node"] != 0) return r["rank"].get<int>();
    }
    return -1;
  };
  {  // rank 3 moved to node 1: 8 devices a node (from the first rank on node 1) say node 0
    json doc = plan;
    const std::size_t i = index_of(3);
    doc["rank_map"]["ranks"][i]["node"] = 1;
    const int ref = first_off_node_0(doc);
    const std::vector<std::string> got = claims(doc);
    if (ref == 3) {
      EXPECT_EQ(got, std::vector<std::string>{fmt::format(
                         "rank_map: $.rank_map.ranks[{}]: rank 3 is said to be node 1 local "
                         "device 3: no count of devices per node numbers it so (rank = node x "
                         "devices per node + local device)",
                         i)});
    } else {
      const json& r = ranks[index_of(ref)];
      EXPECT_EQ(got, std::vector<std::string>{fmt::format(
                         "rank_map: $.rank_map.ranks[{}]: rank 3 is said to be node 1 local "
                         "device 3; with 8 devices per node (rank {} is node {} local device {}) "
                         "it is node 0 local device 3",
                         i, ref, r["node"].get<int>(), r["local_device"].get<int>())});
    }
  }
  {  // a local device beyond the node
    json doc = plan;
    const std::size_t i = index_of(0);
    doc["rank_map"]["ranks"][i]["local_device"] = 8;
    const std::vector<std::string> got = claims(doc);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].rfind(fmt::format("rank_map: $.rank_map.ranks[{}]: rank 0 is said to be "
                                       "node 0 local device 8; with 8 devices per node",
                                       i),
                           0),
              0u)
        << got[0];
  }
  {  // one node: every rank is its own local device
    json doc = tiny_plan();
    doc["rank_map"]["ranks"][1]["local_device"] = 0;
    const int rank = doc["rank_map"]["ranks"][1]["rank"];
    EXPECT_EQ(claims(doc), std::vector<std::string>{fmt::format(
                               "rank_map: $.rank_map.ranks[1]: rank {} is said to be node 0 "
                               "local device 0; with every rank on node 0, rank {} is local "
                               "device {}",
                               rank, rank, rank)});
  }
}

TEST(PlanClaims, EveryCommandButValidateRefusesThem) {
  json doc = tiny_plan();
  doc["parallelism"]["global_batch"] = 15;
  EXPECT_EQ(plan_error_of(doc),
            "p.json: $.parallelism.global_batch: global_batch 15 is not dp 4 x microbatch_size 1 "
            "x num_microbatches 4 = 16");
  EXPECT_TRUE(parse_plan(doc.dump(), "p.json", PlanCheck::shape_only).ok());
}

TEST(EncodePlan, NoNumberThatIsNotFiniteIsWritten) {
  auto p = parse_plan(tiny_plan().dump(), "plan.json");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(encode_plan(*p).ok());
  EXPECT_EQ(*encode_plan(*p), write_plan(*p));
  Plan bad = *p;
  bad.predicted.samples_per_s = std::numeric_limits<double>::infinity();
  const auto inf = encode_plan(bad);
  ASSERT_FALSE(inf.ok());
  EXPECT_EQ(inf.error().kind, ErrorKind::internal);
  EXPECT_EQ(inf.error().message,
            "the plan made has inf at $.predicted.samples_per_s; a plan holds finite numbers "
            "only, so none is written");
  bad = *p;
  bad.schedule[0].back().end_s = 2e6;
  const auto late = encode_plan(bad);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().kind, ErrorKind::input);
  EXPECT_EQ(late.error().message,
            "the plan made is beyond what a plan may state:\n"
            "plan.json: $.schedule[0].ops[15].end_s: expected at most 1000000 (the time limit, "
            "11.6 days), got 2000000");
}

// check_encodable names a time that is not finite in the ops too, as the writer would
// have, before reading anything back.
TEST(EncodePlan, AnOpTimeThatIsNotFiniteIsNamed) {
  auto p = parse_plan(tiny_plan().dump(), "plan.json");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(check_encodable(*p).ok());
  Plan bad = *p;
  bad.schedule[1][3].start_s = std::numeric_limits<double>::quiet_NaN();
  const Status s = check_encodable(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::internal);
  EXPECT_EQ(s.error().message,
            "the plan made has nan at $.schedule[1].ops[3].start_s; a plan holds finite numbers "
            "only, so none is written");
  EXPECT_EQ(encode_plan(bad).error().message, s.error().message);
}

// stream_plan hands over encode_plan's text in pieces of about 1 MiB: a plan of 40,000 ops
// (about 6 MB of text) comes in several, and they add up to the text, byte for byte.
TEST(EncodePlan, TheStreamIsTheTextInPieces) {
  auto p = parse_plan(tiny_plan().dump(), "plan.json");
  ASSERT_TRUE(p.ok());
  Plan big = *p;
  while (big.num_ops() < 40000) {
    for (auto& ops : big.schedule) ops.insert(ops.end(), ops.begin(), ops.end());
  }
  const std::string whole = write_plan(big);
  std::vector<std::size_t> sizes;
  std::string streamed;
  ASSERT_TRUE(stream_plan(big, [&](std::string_view piece) {
                streamed += piece;
                sizes.push_back(piece.size());
                return true;
              }).ok());
  EXPECT_EQ(streamed, whole);
  ASSERT_GE(sizes.size(), 4u);
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    EXPECT_GE(sizes[i], std::size_t{1} << 20);
    EXPECT_LT(sizes[i], (std::size_t{1} << 20) + 4096);  // one op past the mark at most
  }
  // A sink that refuses is handed nothing more.
  int calls = 0;
  const auto refuse = [&](std::string_view) {
    ++calls;
    return false;
  };
  EXPECT_TRUE(stream_plan(big, refuse).ok());
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace pulse
