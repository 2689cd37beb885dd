#include "pulse/tools/replay.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/profile/scaling.hpp"
#include "pulse/schedule/list_schedule.hpp"
#include "pulse/simulate/trace.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using nlohmann::json;
using test::compile_ok;
using test::Inputs;
using test::shipped;

Plan parsed(const std::string& text) {
  auto plan = parse_plan(text, "p.json");
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
  return plan.ok() ? std::move(plan).value() : Plan{};
}

Result<Replay> replay_text(const std::string& text, const ClusterProfile* cluster = nullptr) {
  const Plan plan = parsed(text);
  return replay_plan({&plan, cluster});
}

std::vector<std::string> differences(const std::string& text,
                                     const ClusterProfile* cluster = nullptr) {
  auto r = replay_text(text, cluster);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  std::vector<std::string> out;
  if (!r.ok()) return {"no replay"};
  for (const FigureDifference& d : compare_figures(parsed(text), r->figures)) {
    out.push_back(fmt::format("{}: {} -> {}", d.path, d.plan, d.replay));
  }
  return out;
}

PlanOptions options(Strategy s, int pp, int dp) {
  PlanOptions o;
  o.strategy = s;
  o.pp = pp;
  o.dp = dp;
  o.solver_max_seconds = 0.3;
  return o;
}

TEST(Replay, EveryStrategyReplaysToItsOwnPredictedFigures) {
  // Both without a cluster (the plan's own cost model) and on the cluster it was made for:
  // multi-node data parallelism, V and chain layouts, relayed and direct skips.
  const std::pair<const char*, const char*> cases[] = {{"sd2-unet-512", "dgx1-v100-32gb-1n"},
                                                       {"uvit-l2-256", "atlas800-910a-2n"},
                                                       {"sd2-unet-768", "dgx1-v100-16gb-2n"}};
  for (const auto& [model, cluster] : cases) {
    const Inputs in = shipped(model, cluster);
    for (Strategy s : {Strategy::pulse, Strategy::v_naive, Strategy::one_f_one_b,
                       Strategy::one_f_one_b_direct, Strategy::gpipe}) {
      const int dp = in.cluster.num_devices() / 4;
      auto plan = compile_plan(in.model, in.cluster, options(s, 4, dp));
      if (!plan.ok()) continue;  // gpipe may not fit; the others are covered
      const std::string text = test::plan_text(*plan, in.model, in.cluster);
      const std::string label = fmt::format("{} {} {}", model, cluster, strategy_name(s));
      EXPECT_EQ(differences(text), std::vector<std::string>{}) << label;
      EXPECT_EQ(differences(text, &in.cluster), std::vector<std::string>{}) << label;
    }
  }
}

TEST(Replay, TunedPlansReplayExactly) {
  // The tuner's choice (whatever pp, dp and microbatch size it lands on).
  for (const char* cluster : {"dgx1-v100-32gb-4n", "atlas800-910a-1n"}) {
    const Inputs in = shipped("sd2-unet-512", cluster);
    PlanOptions o;
    o.solver_max_seconds = 0.3;
    const CompiledPlan p = compile_ok(in, o);
    const std::string text = test::plan_text(p, in.model, in.cluster);
    EXPECT_EQ(differences(text), std::vector<std::string>{}) << cluster;
    EXPECT_EQ(differences(text, &in.cluster), std::vector<std::string>{}) << cluster;
  }
}

TEST(Replay, SplitBackwardAndOverlappedSendsReplayExactly) {
  {  // I and W ops: their times come from backward_weight_s.
    const Inputs in = shipped("sd2-unet-512", "dgx1-v100-32gb-1n");
    CompiledPlan p = compile_ok(in, options(Strategy::pulse, 4, 2));
    p.schedule = list_schedule(p.model, p.num_microbatches, p.inflight_limit, true);
    p.timeline = simulate(p.model, p.schedule, p.num_microbatches, p.static_bytes).value();
    const Evaluation e =
        evaluate(p.model, p.timeline, p.ranks, p.global_batch, p.options.memory, in.cluster);
    p.evaluation = e;
    const std::string text = test::plan_text(p, in.model, in.cluster);
    EXPECT_EQ(differences(text), std::vector<std::string>{});
  }
  {  // A cluster whose devices compute while they send.
    const Inputs in = shipped("small-unet-cpu", "emulated-veth-100mbit");
    ASSERT_TRUE(in.cluster.overlap_comm);
    const CompiledPlan p = compile_ok(in, options(Strategy::pulse, 2, 1));
    const std::string text = test::plan_text(p, in.model, in.cluster);
    EXPECT_EQ(differences(text), std::vector<std::string>{});
    EXPECT_EQ(differences(text, &in.cluster), std::vector<std::string>{});
  }
}

// A chain of two one-layer stages (forward 1 s, backward 2 s, 100 activation bytes per
// sample), 1F1B with 2 microbatches on 2 devices, dp 1; every transfer set to `t` seconds.
json hand_plan(double t, bool overlap) {
  const ModelProfile model = test::make_model({{1.0, 1000, 100, 1000}, {1.0, 1000, 100, 1000}}, {});
  const ClusterProfile cluster = test::make_cluster(2, 1, std::int64_t{1} << 30);
  PlanOptions o = options(Strategy::one_f_one_b, 2, 1);
  o.microbatch_size = 1;
  o.global_batch = 2;
  const auto p = compile_plan(model, cluster, o);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  json doc = json::parse(test::plan_text(*p, model, cluster));
  for (json& x : doc["transfers"]) x["forward_s"] = x["backward_s"] = t;
  doc["cost_model"]["overlap_comm"] = overlap;
  doc["partition"].erase("stages_sha256");          // a hand-made plan: its stages are what it says
  for (const char* input : {"model", "cluster"}) {  // in-memory profiles have no file
    doc["inputs"][input]["sha256"] = std::string(64, '0');
    doc["inputs"][input]["provenance"] = "made in replay_test.cpp";
  }
  auto op = [](const char* kind, int stage, int mb) {
    return json{{"op", kind}, {"stage", stage}, {"mb", mb}, {"start_s", 0}, {"end_s", 0}};
  };
  doc["schedule"] = json::array(
      {{{"device", 0}, {"ops", {op("F", 0, 0), op("F", 0, 1), op("B", 0, 0), op("B", 0, 1)}}},
       {{"device", 1}, {"ops", {op("F", 1, 0), op("B", 1, 0), op("F", 1, 1), op("B", 1, 1)}}}});
  return doc;
}

TEST(Replay, HandEditedPlanGivesTheHandComputedIteration) {
  // Blocking sends of t seconds:
  //   d0: F0.0 [0,1] send [1,1+t]  F0.1 [1+t,2+t] send [2+t,2+2t]
  //   d1: F1.0 [1+t,2+t]  B1.0 [2+t,4+t] send [4+t,4+2t]
  //       F1.1 [4+2t,5+2t]  B1.1 [5+2t,7+2t] send [7+2t,7+3t]
  //   d0: B0.0 [4+2t,6+2t]  B0.1 [7+3t,9+3t]                      makespan 9 + 3t
  // Each device computes 6 s and blocks 2t in sends: bubble (2(9+3t) - 12 - 4t) / 2(9+3t).
  for (const double t : {0.5, 1.5}) {
    auto r = replay_text(hand_plan(t, false).dump());
    ASSERT_TRUE(r.ok()) << r.error().message;
    const Replay& f = *r;
    const double makespan = 9 + 3 * t;
    EXPECT_DOUBLE_EQ(f.timeline.makespan_s, makespan) << t;
    EXPECT_DOUBLE_EQ(f.evaluation.iteration_s, makespan) << t;  // dp 1: no all-reduce
    EXPECT_DOUBLE_EQ(f.evaluation.samples_per_s, 2 / makespan);
    EXPECT_DOUBLE_EQ(f.evaluation.bubble_ratio, (2 * makespan - 12 - 4 * t) / (2 * makespan)) << t;
    for (const DeviceTimeline& d : f.timeline.devices) {
      EXPECT_DOUBLE_EQ(d.compute_s, 6.0);
      EXPECT_DOUBLE_EQ(d.send_s, 2 * t);
    }
    // Device 0 holds both microbatches' activations from F0.1 until B0.0 ends; device 1
    // one at a time.
    EXPECT_EQ(f.timeline.devices[0].max_inflight, 2);
    EXPECT_EQ(f.timeline.devices[1].max_inflight, 1);
    EXPECT_EQ(f.timeline.devices[0].peak.activations, 200);
    EXPECT_EQ(f.timeline.devices[1].peak.activations, 100);
  }
  // t = 0.5 by the numbers: makespan 10.5, bubble 7 / 21 = 1/3.
  auto r = replay_text(hand_plan(0.5, false).dump());
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->timeline.makespan_s, 10.5);
  EXPECT_NEAR(r->evaluation.bubble_ratio, 1.0 / 3.0, 1e-15);
}

TEST(Replay, ScaledCostsGiveTheHandComputedIteration) {
  // The same plan with forward f, backward b and transfers t: the timeline above gives
  // makespan 3f + 3t + 3b. Replayed with compute x3 and links twice as fast: f = 3, b = 6,
  // t = 0.5 / 2 = 0.25, makespan 27.75; each device computes 18 s and sends 0.5 s, so the
  // bubble is (55.5 - 36 - 1) / 55.5 = 1/3.
  const Plan plan = parsed(hand_plan(0.5, false).dump());
  auto r = replay_plan({&plan, nullptr, 3.0, 2.0});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->timeline.makespan_s, 27.75);
  EXPECT_DOUBLE_EQ(r->evaluation.iteration_s, 27.75);
  EXPECT_NEAR(r->evaluation.bubble_ratio, 1.0 / 3.0, 1e-15);
  for (const DeviceTimeline& d : r->timeline.devices) {
    EXPECT_DOUBLE_EQ(d.compute_s, 18.0);
    EXPECT_DOUBLE_EQ(d.send_s, 0.5);
  }
  // The figures say what they assume, and the makespan is the replay's.
  ASSERT_TRUE(r->figures.cost_model.has_value());
  EXPECT_EQ(r->figures.cost_model->compute_scale, 3.0);
  EXPECT_EQ(r->figures.cost_model->link_scale, 2.0);
  EXPECT_EQ(r->figures.schedule_info.makespan_s, 27.75);
  EXPECT_DOUBLE_EQ(r->figures.predicted.iteration_s, 27.75);
  // The plan's own scales multiply with the request's.
  Plan scaled = plan;
  scaled.cost_model->compute_scale = 0.5;
  auto twice = replay_plan({&scaled, nullptr, 4.0, 1.0});
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->figures.cost_model->compute_scale, 2.0);
  EXPECT_FALSE(twice->figures.cost_model->link_scale.has_value());
  // The request is checked first.
  for (const double bad : {0.0, -1.0, std::numeric_limits<double>::infinity()}) {
    auto r2 = replay_plan({&plan, nullptr, 1.0, bad});
    ASSERT_FALSE(r2.ok()) << bad;
    EXPECT_EQ(r2.error().kind, ErrorKind::usage);
    EXPECT_NE(r2.error().message.find("link_scale must be positive and finite"), std::string::npos);
  }
}

TEST(Replay, AScaledPlanReplaysExactlyWithAndWithoutItsCluster) {
  // plan --compute-scale 1.5 --link-scale 0.5: the plan's transfers were timed on links
  // half as fast; simulate --cluster must time them the same way (cost_model.link_scale).
  const Inputs in = shipped("tiny-unet", "dgx1-v100-32gb-2n");
  PlanOptions slow = options(Strategy::pulse, 2, 8);
  slow.scales = {1.5, 0.5, ""};
  const CompiledPlan p = compile_ok(in, slow);
  const std::string text = write_plan(build_plan(p, in.model, in.cluster));
  EXPECT_EQ(differences(text), std::vector<std::string>{});
  EXPECT_EQ(differences(text, &in.cluster), std::vector<std::string>{});
  // Without the recorded link scale the shipped cluster's links are twice as fast.
  json doc = json::parse(text);
  doc["cost_model"].erase("link_scale");
  EXPECT_NE(differences(doc.dump(), &in.cluster), std::vector<std::string>{});
}

TEST(Replay, OverlappedSendsByHand) {
  // overlap_comm: the sender computes on while the link carries the message.
  //   d0: F0.0 [0,1] (link [1,1.5])  F0.1 [1,2] (link [2,2.5])
  //   d1: F1.0 [1.5,2.5]  B1.0 [2.5,4.5] (link [4.5,5])  F1.1 [4.5,5.5]  B1.1 [5.5,7.5]
  //       (link [7.5,8])
  //   d0: B0.0 [5,7]  B0.1 [8,10]                                makespan 10
  // No time blocked in sends; each device idles 10 - 6 = 4: bubble 8 / 20.
  auto r = replay_text(hand_plan(0.5, true).dump());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->timeline.makespan_s, 10.0);
  EXPECT_DOUBLE_EQ(r->evaluation.bubble_ratio, 0.4);
  for (const DeviceTimeline& d : r->timeline.devices) EXPECT_DOUBLE_EQ(d.send_s, 0.0);
}

TEST(Replay, AnEditIsReportedAsADifference) {
  const std::string text = hand_plan(0.5, false).dump();
  json doc = json::parse(text);
  auto r = replay_text(text);
  ASSERT_TRUE(r.ok());
  // The doc's predicted block is the planner's (transfers of ~0 s on a 10 GB/s link); the
  // edit made them 0.5 s, so the replay differs exactly where time is involved.
  std::vector<std::string> paths;
  for (const FigureDifference& d : compare_figures(parsed(text), r->figures)) {
    paths.push_back(d.path);
  }
  EXPECT_NE(std::find(paths.begin(), paths.end(), "$.predicted.iteration_s"), paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "$.predicted.pipeline_makespan_s"), paths.end());
  // Bytes were not edited: no comm figure differs.
  for (const std::string& p : paths) EXPECT_EQ(p.rfind("$.comm", 0), std::string::npos) << p;
}

TEST(Replay, AnotherClusterOfTheSameDeviceTypeChangesOnlyWhatItChanges) {
  // 16 GB and 32 GB DGX-1s have the same links: a plan made for one replays on the other
  // with the same times and bytes; only the capacity differs.
  const Inputs in = shipped("sd2-unet-512", "dgx1-v100-32gb-2n");
  const Inputs small = shipped("sd2-unet-512", "dgx1-v100-16gb-2n");
  const CompiledPlan p = compile_ok(in, options(Strategy::pulse, 4, 4));
  const std::string text = test::plan_text(p, in.model, in.cluster);
  const std::vector<std::string> diffs = differences(text, &small.cluster);
  ASSERT_EQ(diffs.size(), 4u);
  for (const std::string& d : diffs) EXPECT_NE(d.find("capacity_bytes"), std::string::npos) << d;

  // On slower links (every class at a tenth of the bandwidth) the P2P bytes stay, the time
  // grows.
  ClusterProfile slow = in.cluster;
  for (LinkClass& l : slow.link_classes) l.bandwidth_bytes_per_s /= 10;
  auto r = replay_text(text, &slow);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->evaluation.iteration_s, p.evaluation.iteration_s);
  EXPECT_EQ(r->model.bytes_per_microbatch().total(), p.model.bytes_per_microbatch().total());
}

TEST(Replay, AClusterNamingThePlansDeviceByAnAliasIsThatDevice) {
  // A plan for the H100 ("H100-SXM"); the same cluster naming its device as its spec's
  // alias, or as PyTorch names it: the planner takes its times for one device, so does the
  // replay. Another device is refused, naming the plan's.
  const Inputs in = shipped("tiny-unet", "dgx-h100-1n");
  const std::string text =
      test::plan_text(compile_ok(in, options(Strategy::pulse, 2, 4)), in.model, in.cluster);
  for (const char* alias : {"H100-SXM5-80GB", "NVIDIA H100 80GB HBM3"}) {
    ClusterProfile renamed = in.cluster;
    renamed.device_type = alias;
    EXPECT_EQ(differences(text, &renamed), std::vector<std::string>{}) << alias;
  }
  ClusterProfile other = in.cluster;
  other.device_type = "A100-SXM";
  other.device_spec.reset();
  auto r = replay_text(text, &other);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("p.json: $.parallelism.device_type: the plan's stage times "
                                    "are for H100-SXM",
                                    0),
            0u)
      << r.error().message;
}

TEST(Replay, TraceOfAReplayHasOneCompleteEventPerOp) {
  const Inputs in = shipped("sd2-unet-512", "dgx1-v100-32gb-1n");
  const CompiledPlan p = compile_ok(in, options(Strategy::pulse, 4, 2));
  auto r = replay_text(test::plan_text(p, in.model, in.cluster));
  ASSERT_TRUE(r.ok());
  const json trace = json::parse(
      chrome_trace(r->model, r->timeline, r->evaluation.allreduce, r->figures.parallelism.dp));
  std::size_t compute = 0, ops = 0;
  for (const auto& d : p.schedule.device_ops) ops += d.size();
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "compute") ++compute;
  }
  EXPECT_EQ(compute, ops);
}

TEST(Replay, WhatIsSentIsReceived) {
  // Every message of the replay goes to the device that consumes it, once per microbatch
  // and direction, and the bytes each device receives are the bytes the plan says flow
  // into its stages (forward) or back out of them (gradients).
  const Inputs in = shipped("sd2-unet-512", "dgx1-v100-32gb-1n");
  for (Strategy s : {Strategy::pulse, Strategy::one_f_one_b}) {
    const CompiledPlan p = compile_ok(in, options(s, 4, 2));
    auto r = replay_text(test::plan_text(p, in.model, in.cluster));
    ASSERT_TRUE(r.ok());
    const PipelineModel& m = r->model;
    const int M = r->figures.parallelism.num_microbatches;
    std::vector<std::int64_t> received(m.num_devices(), 0), expected(m.num_devices(), 0);
    std::map<std::tuple<std::size_t, int, bool>, int> seen;
    for (const DeviceTimeline& d : r->timeline.devices) {
      for (const TimedSend& x : d.sends) {
        const Transfer& t = m.transfers[x.transfer];
        EXPECT_EQ(x.to, m.layout.device[x.forward ? t.to : t.from]);
        EXPECT_GE(x.end_s, x.start_s);
        received[x.to] += (x.forward ? t.forward : t.backward).total();
        ++seen[{x.transfer, x.mb, x.forward}];
      }
    }
    for (const Transfer& t : m.transfers) {
      expected[m.layout.device[t.to]] += t.forward.total() * M;
      expected[m.layout.device[t.from]] += t.backward.total() * M;
    }
    EXPECT_EQ(received, expected) << strategy_name(s);
    EXPECT_EQ(seen.size(), 2 * m.transfers.size() * M);
    for (const auto& [key, count] : seen) EXPECT_EQ(count, 1);
  }
}

std::string error_of(const json& doc, const ClusterProfile* cluster = nullptr) {
  auto r = replay_text(doc.dump(), cluster);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  return r.error().message;
}

// Stage and transfer times of 0 s (a hand edit: no model pulse-plan plans has them, each
// has a layer of 1 ns or more) would replay to a pipeline of 0 s, 0/0 bubble and infinite
// samples/s: refused, with or without a scale. A pipeline of 1 ns replays.
TEST(Replay, APipelineOfZeroSecondsIsRefused) {
  json doc = hand_plan(0, false);
  for (json& s : doc["stages"]) s["forward_s"] = s["backward_s"] = s["backward_weight_s"] = 0.0;
  const std::string e = error_of(doc);
  EXPECT_EQ(e,
            "p.json: $.stages: every stage and transfer time is 0 s at the plans' 1 ns "
            "resolution: a pipeline of 0 s has no throughput or bubble (pulse-plan plans no "
            "such model)");
  doc["stages"][0]["forward_s"] = 1e-9;
  auto r = replay_text(doc.dump());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->timeline.makespan_s, 0);
  EXPECT_TRUE(std::isfinite(r->evaluation.samples_per_s));
  EXPECT_TRUE(std::isfinite(r->evaluation.bubble_ratio));
}

TEST(Replay, ErrorsNameTheFileAndWhatIsMissing) {
  const json good = hand_plan(0.5, false);
  {
    json doc = good;
    doc.erase("cost_model");
    const std::string e = error_of(doc);
    EXPECT_NE(e.find("p.json: $.cost_model"), std::string::npos) << e;
    EXPECT_NE(e.find("--cluster"), std::string::npos) << e;
  }
  {
    json doc = good;
    doc["stages"][1].erase("forward_s");
    EXPECT_NE(error_of(doc).find("$.stages[1]: expected forward_s and backward_s"),
              std::string::npos);
  }
  {
    json doc = good;
    doc["transfers"][0].erase("backward_s");
    EXPECT_NE(error_of(doc).find("$.transfers[0]: expected forward_s and backward_s"),
              std::string::npos);
  }
  {
    json doc = good;  // every B an I and a W, whose times need the stages' W share
    doc["schedule_info"]["split_backward"] = true;
    for (json& device : doc["schedule"]) {
      json split = json::array();
      for (json op : device["ops"]) {
        if (op["op"] == "B") {
          op["op"] = "I";
          split.push_back(op);
          op["op"] = "W";
        }
        split.push_back(op);
      }
      device["ops"] = split;
    }
    doc["stages"][0].erase("backward_weight_s");
    EXPECT_NE(error_of(doc).find("$.stages[0].backward_weight_s: missing"), std::string::npos);
  }
  {  // B1.0 listed before F1.0 on its own device can never start: refused as it is read.
    json doc = good;
    std::swap(doc["schedule"][1]["ops"][0], doc["schedule"][1]["ops"][1]);
    auto plan = parse_plan(doc.dump(), "p.json");
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.error().message,
              "p.json: $.schedule[1].ops[1]: F(stage 1, mb 0) is listed after B(stage 1, mb 0), "
              "which needs it first");
  }
  {  // Each device's order is possible alone, not together: device 1 waits for F0.1, which
     // device 0 lists after B0.0, which waits for B1.0 behind F1.1. The replay deadlocks.
    json doc = good;
    auto op = [](const char* kind, int stage, int mb) {
      return json{{"op", kind}, {"stage", stage}, {"mb", mb}, {"start_s", 0}, {"end_s", 0}};
    };
    doc["schedule"][0]["ops"] = {op("F", 0, 0), op("B", 0, 0), op("F", 0, 1), op("B", 0, 1)};
    doc["schedule"][1]["ops"] = {op("F", 1, 1), op("F", 1, 0), op("B", 1, 0), op("B", 1, 1)};
    const std::string e = error_of(doc);
    EXPECT_NE(e.find("p.json: $.schedule: cannot replay"), std::string::npos) << e;
    EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  }
  {
    const Inputs other = shipped("sd2-unet-512", "atlas800-910a-1n");
    json doc = good;
    const std::string e = error_of(doc, &other.cluster);
    EXPECT_NE(e.find("$.parallelism.device_type"), std::string::npos) << e;
    EXPECT_NE(e.find("plan again"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace pulse
