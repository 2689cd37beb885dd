#include "pulse/compile/compile.hpp"
#include "compile/compile_internal.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "pulse/base/limits.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/profile/scaling.hpp"
#include "pulse/simulate/schedule_check.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using nlohmann::json;

using test::compile_ok;
using test::Inputs;
using test::shipped;

void expect_valid_schedule(const CompiledPlan& p, const ClusterProfile& c) {
  ScheduleCheckRequest r{&p.model, &p.timeline,    p.num_microbatches,
                         false,    p.static_bytes, c.usable_memory()};
  const auto problems = check_schedule(r);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST(Compile, Sd2AtPp4IsAVWithEverySkipLocal) {
  const Inputs in = shipped("sd2-unet-512", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.pp = 4;
  o.family = "v";
  const CompiledPlan p = compile_ok(in, o);
  const json plan = json::parse(test::plan_text(p, in.model, in.cluster));
  EXPECT_EQ(plan["schema"], "pulse.plan/v2");
  ASSERT_EQ(plan["stages"].size(), 8u);
  std::multiset<std::string> seen;
  for (const json& s : plan["stages"]) {
    const int id = s["id"], device = s["device"];
    EXPECT_EQ(device, id < 4 ? id : 7 - id);
    for (const json& l : s["layers"]) seen.insert(l.get<std::string>());
  }
  // Every layer in exactly one stage, in execution order.
  ASSERT_EQ(seen.size(), in.model.layers.size());
  std::size_t i = 0;
  for (const json& s : plan["stages"]) {
    for (const json& l : s["layers"]) EXPECT_EQ(l, in.model.layers[i++].name);
  }
  ASSERT_EQ(plan["skips"].size(), 12u);
  for (const json& s : plan["skips"]) {
    EXPECT_TRUE(s["local"].get<bool>());
    EXPECT_EQ(s["producer_device"], s["consumer_device"]);
  }
  EXPECT_EQ(plan["comm"]["skip_bytes_per_iteration"], 0);
  EXPECT_GT(plan["comm"]["p2p_bytes_per_iteration"].get<std::int64_t>(), 0);
  expect_valid_schedule(p, in.cluster);
}

TEST(Compile, SequentialBaselinePaysForSkips) {
  const Inputs in = shipped("sd2-unet-512", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.pp = 4;
  o.strategy = Strategy::one_f_one_b;
  const CompiledPlan p = compile_ok(in, o);
  const json plan = json::parse(test::plan_text(p, in.model, in.cluster));
  EXPECT_EQ(plan["stages"].size(), 4u);
  EXPECT_GT(plan["comm"]["skip_bytes_per_iteration"].get<std::int64_t>(), 0);
  expect_valid_schedule(p, in.cluster);
}

TEST(Compile, SameInputsGiveByteIdenticalPlans) {
  const Inputs in = shipped("sd2-unet-512", "atlas800-910a-1n");
  PlanOptions o;  // searches the pipeline degree
  const std::string a = test::plan_text(compile_ok(in, o), in.model, in.cluster);
  const std::string b = test::plan_text(compile_ok(in, o), in.model, in.cluster);
  EXPECT_EQ(a, b);
}

TEST(Compile, SearchKeepsTheFastestDegree) {
  const Inputs in = shipped("tiny-unet", "dgx1-v100-32gb-1n");
  // --zero 0 given: the search's own plan (a sharded plan, as fast and smaller, would be
  // kept otherwise, with its own configurations beside these).
  PlanOptions zero;
  zero.zero_given = true;
  const CompiledPlan p = compile_ok(in, zero);
  // 8 devices: pp in {1, 2, 4, 8} divides them (pp 8 fits the ten layers only as a chain,
  // one of pulse's families); microbatch sizes 1 and 2 (the profile's): eight candidates.
  ASSERT_EQ(p.candidates.size(), 8u);
  EXPECT_TRUE(p.candidates.front().chosen);
  for (const Candidate& k : p.candidates) {
    EXPECT_TRUE(k.pp == 1 || k.pp == 2 || k.pp == 4 || k.pp == 8) << k.pp;
    if (k.feasible) {
      EXPECT_LE(k.samples_per_s, p.evaluation.samples_per_s);
    }
  }
}

TEST(Compile, ModelsWithoutSkipsOrWithCrossingSkipsStillPlan) {
  ClusterProfile cluster = test::make_cluster(4, 1, std::int64_t{1} << 30);
  std::vector<test::LayerSpec> layers(12);
  for (const auto& skips : {std::vector<std::pair<int, int>>{},
                            std::vector<std::pair<int, int>>{{0, 6}, {3, 9}, {1, 11}}}) {
    const ModelProfile m = test::make_model(layers, skips);
    PlanOptions o;
    o.pp = 3;
    auto p = compile_plan(m, cluster, o);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->model.layout.num_stages(), 6);
    expect_valid_schedule(*p, cluster);
  }
}

TEST(Compile, InfeasibleMemorySaysByHowMuchAndWhere) {
  Inputs in = shipped("tiny-unet", "dgx1-v100-32gb-1n");
  in.cluster.memory_bytes = 20 * 1000 * 1000;
  in.cluster.reserved_bytes = 0;
  PlanOptions o;
  o.pp = 2;
  const auto p = compile_plan(in.model, in.cluster, o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().kind, ErrorKind::infeasible);
  // The most frugal V puts five layers (5M parameters, 80 MB of state) on each device.
  EXPECT_NE(p.error().message.find("tiny-unet does not fit dgx1-v100-32gb-1n at pp 2"),
            std::string::npos)
      << p.error().message;
  EXPECT_NE(p.error().message.find("on pipeline device"), std::string::npos);
}

TEST(Compile, InconsistentOptionsAreUsageErrors) {
  const Inputs in = shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.pp = 4;
  o.dp = 4;
  EXPECT_EQ(compile_plan(in.model, in.cluster, o).error().message,
            "--pp 4 x --dp 4 needs 16 devices; cluster dgx1-v100-32gb-1n has 8");
  o.dp = 1;
  o.global_batch = 10;
  o.microbatch_size = 4;
  EXPECT_EQ(compile_plan(in.model, in.cluster, o).error().message,
            "global batch 10 is not divisible by dp 1 x microbatch size 4 = 4");
}

TEST(Compile, TwiceTheComputeOnLinksHalfAsFastDoublesEveryTime) {
  // Every layer and link time doubles exactly (x2 is exact in binary), so every stage,
  // transfer and all-reduce time doubles up to the nanosecond each is rounded to, the same
  // cut and schedule win, and the iteration doubles to within a few nanoseconds; bytes
  // stay as they are.
  const Inputs in = shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.pp = 2;                  // transfers between the devices, an all-reduce over dp 4
  o.solver_max_seconds = 0;  // list schedules: no wall clock in the comparison
  const CompiledPlan base = compile_ok(in, o);
  PlanOptions slow = o;
  slow.scales = {2, 0.5, ""};
  const CompiledPlan twice = compile_ok(in, slow);
  ASSERT_EQ(twice.pp, base.pp);
  ASSERT_EQ(twice.dp, base.dp);
  ASSERT_EQ(twice.microbatch_size, base.microbatch_size);
  ASSERT_EQ(twice.model.layout.first_layer, base.model.layout.first_layer);
  const double ns = 1.5e-9;  // one quantum, and the rounding of its decimal value
  for (std::size_t s = 0; s < base.model.stages.size(); ++s) {
    EXPECT_NEAR(twice.model.stages[s].forward_s, 2 * base.model.stages[s].forward_s, ns);
    EXPECT_NEAR(twice.model.stages[s].backward_s, 2 * base.model.stages[s].backward_s, ns);
  }
  ASSERT_EQ(twice.model.transfers.size(), base.model.transfers.size());
  ASSERT_FALSE(base.model.transfers.empty());
  for (std::size_t t = 0; t < base.model.transfers.size(); ++t) {
    EXPECT_NEAR(twice.model.transfers[t].forward_s, 2 * base.model.transfers[t].forward_s, ns);
  }
  ASSERT_EQ(base.dp, 4);
  for (std::size_t d = 0; d < base.evaluation.allreduce.size(); ++d) {
    EXPECT_GT(base.evaluation.allreduce[d].seconds, 0);
    EXPECT_NEAR(twice.evaluation.allreduce[d].seconds, 2 * base.evaluation.allreduce[d].seconds,
                ns);
  }
  EXPECT_NEAR(twice.evaluation.iteration_s, 2 * base.evaluation.iteration_s, 20 * ns);

  // The plan records the scales and names the unscaled files.
  const json a = json::parse(test::plan_text(base, in.model, in.cluster));
  const json b = json::parse(test::plan_text(twice, in.model, in.cluster));
  EXPECT_EQ(b["inputs"], a["inputs"]);
  EXPECT_EQ(b["options"]["compute_scale"], 2.0);
  EXPECT_EQ(b["options"]["link_scale"], 0.5);
  EXPECT_FALSE(b["options"].contains("compute_scale_from"));
  EXPECT_EQ(b["cost_model"]["compute_scale"], 2.0);
  EXPECT_EQ(b["cost_model"]["link_scale"], 0.5);
  EXPECT_EQ(b["comm"], a["comm"]);
  EXPECT_NEAR(b["predicted"]["iteration_s"].get<double>(),
              2 * a["predicted"]["iteration_s"].get<double>(), 20 * ns);
  for (const char* key : {"compute_scale", "compute_scale_from", "link_scale"}) {
    EXPECT_FALSE(a["options"].contains(key)) << key;
    EXPECT_FALSE(a["cost_model"].contains(key)) << key;
  }
}

TEST(Compile, ScalesOfOneWriteTheSamePlan) {
  const Inputs in = shipped("tiny-unet", "atlas800-910a-1n");
  PlanOptions o;
  o.pp = 2;
  const CompiledPlan p = compile_ok(in, o);
  PlanOptions same = o;
  same.scales = {1, 1, ""};
  EXPECT_EQ(test::plan_text(compile_ok(in, same), in.model, in.cluster),
            test::plan_text(p, in.model, in.cluster));
  // range-low that happens to be 1 is still recorded as asked for.
  CompiledPlan low = p;
  low.given.scales = {1, 1, "range-low"};  // the options as given, which the plan records
  const json ranged = json::parse(test::plan_text(low, in.model, in.cluster));
  EXPECT_EQ(ranged["options"]["compute_scale"], 1.0);
  EXPECT_EQ(ranged["options"]["compute_scale_from"], "range-low");
  EXPECT_FALSE(ranged["cost_model"].contains("compute_scale"));
}

TEST(Compile, ActivationBudgetIsKeptAndTheCurveIsWritten) {
  // SD2 at pp 4 with a split backward and a tenth of the V100's usable memory for
  // activations: every device keeps within it, the plan says so, and the memory curve's
  // budgets are 3/4, 1/2 (and 1/3, where a microbatch still fits) of the peak reached.
  const Inputs in = shipped("sd2-unet-512", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.pp = 4;
  o.split_backward = true;
  o.activation_budget_fraction = 0.1;
  o.frozen = "cached";  // the denoiser in the whole headroom (docs/frozen.md)
  const CompiledPlan p = compile_ok(in, o);
  // A tenth of what a device may fill: the usable memory x the default headroom, rounded down.
  const double may_fill =
      std::floor(kDefaultHeadroom * static_cast<double>(in.cluster.usable_memory()));
  const std::int64_t budget = static_cast<std::int64_t>(0.1 * may_fill);
  for (const DeviceTimeline& d : p.timeline.devices) EXPECT_LE(d.resident_peak, budget);
  const json plan = json::parse(test::plan_text(p, in.model, in.cluster));
  EXPECT_EQ(plan["options"]["activation_budget_fraction"], 0.1);
  EXPECT_EQ(plan["solver"]["activation_budget_bytes"], budget);
  const std::int64_t peak = plan["solver"]["peak_activation_bytes"];
  EXPECT_LE(peak, budget);
  const json& curve = plan["solver"]["memory_curve"];
  ASSERT_GE(curve.size(), 2u);
  EXPECT_EQ(curve[0]["activation_budget_bytes"], peak * 3 / 4);
  EXPECT_EQ(curve[1]["activation_budget_bytes"], peak / 2);
  EXPECT_GE(curve[1]["makespan_s"].get<double>(), plan["solver"]["makespan_s"].get<double>());
  // The same inputs, the same bytes.
  EXPECT_EQ(test::plan_text(compile_ok(in, o), in.model, in.cluster),
            test::plan_text(p, in.model, in.cluster));
}

// --- The request's limits (pulse/base/limits.hpp) ------------------------------------

// Each field within its limit, the request is refused when its sums could not be counted:
// 4 layers of 1 TiB per sample at a global batch of 2^20 could hold or send about 2^65 bytes.
// At a batch of 8 the same model is only refused for not fitting the devices.
TEST(CompileLimits, BytesBeyondSixtyFourBitsAreRefusedBeforeAnyPass) {
  const std::int64_t tib = std::int64_t{1} << 40;
  const ModelProfile m = test::make_model({{0.001, 1000, tib, tib},
                                           {0.001, 1000, tib, tib},
                                           {0.001, 1000, tib, tib},
                                           {0.001, 1000, tib, tib}},
                                          {{0, 3}}, tib);
  const ClusterProfile c = test::make_cluster(4, 1, std::int64_t{32} << 30);
  PlanOptions o;
  o.global_batch = 1 << 20;
  auto r = compile_plan(m, c, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  EXPECT_NE(r.error().message.find("above the 1.15e+18 pulse-plan counts in 64-bit integers"),
            std::string::npos)
      << r.error().message;
  o.global_batch = 8;
  r = compile_plan(m, c, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::infeasible) << r.error().message;
}

// A link of 1 B/s is a valid profile, but 100 MB of skips per sample over it for a batch of
// 2^20 would take about 1e14 s an iteration: refused, the figures named.
TEST(CompileLimits, TimesBeyondTheLimitAreRefused) {
  const ModelProfile m = test::make_model(
      {{0.001, 1000, 1000, 100}, {0.001, 1000, 1000, 100}, {0.001, 1000, 1000, 100}}, {{0, 2}},
      100000000);
  const ClusterProfile c = test::make_cluster(2, 1, std::int64_t{32} << 30, 1.0, 0);
  PlanOptions o;
  o.global_batch = 1 << 20;
  auto r = compile_plan(m, c, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  EXPECT_NE(r.error().message.find("above the 1e+09 s pulse-plan plans for"), std::string::npos)
      << r.error().message;
}

// Plans state times in whole nanoseconds: a model whose every layer is under 1 ns forward
// would round every stage to 0 s (an iteration of 0 s, infinite samples/s). Refused, naming
// the slowest layer; with that layer at exactly 1 ns the model plans, on every pipeline
// degree, to a positive iteration time. The slowest layer's bound is its per-sample time at
// the smallest profiled size, here 2 ns at 4 samples (0.5 ns at size 1).
TEST(CompileLimits, SubNanosecondModelIsRefused) {
  ModelProfile m = test::make_model({{4e-10, 1000, 1000, 100},
                                     {9e-10, 1000, 1000, 100},
                                     {3e-10, 1000, 1000, 100},
                                     {2e-10, 1000, 1000, 100}},
                                    {{0, 3}});
  const ClusterProfile c = test::make_cluster(4, 1, std::int64_t{32} << 30);
  auto r = compile_plan(m, c, PlanOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  EXPECT_EQ(r.error().message,
            "synthetic.json: no layer of model synthetic takes 1 ns forward on T (the slowest, "
            "\"L1\", may take as little as 9e-10 s); plans state times in whole nanoseconds, so "
            "every stage would take 0 s. Are the times in seconds?");
  m.layers[1].forward_s = {{1e-9}};
  for (int pp : {1, 2}) {
    PlanOptions o;
    o.pp = pp;
    const CompiledPlan p = compile_ok({m, c}, o);
    EXPECT_GT(p.timeline.makespan_s, 0) << "pp " << pp;
    EXPECT_TRUE(std::isfinite(p.evaluation.samples_per_s)) << "pp " << pp;
    EXPECT_TRUE(std::isfinite(p.solver.gap)) << "pp " << pp;
    for (const FamilyOutcome& f : p.families) {
      EXPECT_TRUE(!f.feasible || std::isfinite(*f.samples_per_s)) << "pp " << pp << " " << f.family;
    }
  }
  m.microbatch_sizes = {4};
  m.layers[1].forward_s = {{2e-9}};
  r = compile_plan(m, c, PlanOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("may take as little as 5e-10 s"), std::string::npos)
      << r.error().message;
}

// More microbatches per pipeline than the limit: a fixed configuration is refused with
// what to change; one fewer sample per replica step would be planned.
TEST(CompileLimits, MicrobatchesPerPipeline) {
  const Inputs in = shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.pp = 2;
  o.dp = 1;
  o.microbatch_size = 1;
  o.global_batch = kMaxMicrobatches + 1;
  auto r = compile_plan(in.model, in.cluster, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::usage);
  EXPECT_EQ(r.error().message,
            "global batch 4097 at dp 1 x microbatch size 1 is 4097 microbatches per pipeline, "
            "above pulse-plan's limit of 4096 (use a larger microbatch size or a smaller global "
            "batch)");
  o.pp = kMaxPipelineDegree + 1;
  r = compile_plan(in.model, in.cluster, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "plan: --pp 1025 is above pulse-plan's limit of 1024");
  o.pp = 2;
  o.global_batch = kMaxGlobalBatch + 1;
  r = compile_plan(in.model, in.cluster, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "plan: --global-batch 16777217 is above pulse-plan's limit of 16777216 samples");
}

// A plan states at most kMaxOps schedule ops: a configuration beyond that for every family
// searched is refused before any pass runs (the chain's pp stages are the fewest), and a
// family beyond it before it is placed (the V's 2 pp), with what to change. Just within,
// the configuration stands. (pp 1024 over 2048 layers at 4096 microbatches was planned for
// 192 s, then refused by the plan's reader.)
TEST(CompileLimits, ScheduleOpsPerPlan) {
  const ModelProfile model = test::make_model(std::vector<test::LayerSpec>(1200), {});
  const ClusterProfile cluster = test::make_cluster(8, 75, std::int64_t{1} << 34);
  PlanOptions o;
  o.global_batch = 4096;
  detail::CompileCache cache;
  const detail::CompileInputs in{&model, &cluster, &o, model.device_type_index(cluster.device_type),
                                 &cache};
  // pp 600 x 4096 microbatches x (F, B): 4,915,200 ops on the chain's 600 stages.
  const auto over = detail::resolve_config(in, 600, 1, 1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().kind, ErrorKind::usage);
  EXPECT_EQ(over.error().message,
            "4096 microbatches over 600 stages (pp 600) are 4915200 schedule ops, above the "
            "4194304 a plan states (use a larger microbatch size or a smaller global batch)");
  // 512 stages x 4096 x 2 is the limit itself.
  const auto at_limit = detail::resolve_config(in, 512, 1, 1);
  ASSERT_TRUE(at_limit.ok()) << at_limit.error().message;
  EXPECT_EQ(detail::schedule_ops(o, 512, at_limit->num_microbatches), kMaxOps);
  // The V at pp 512 has 1024 stages: twice the limit, refused before it is placed.
  const Family* v = nullptr;
  for (const Family& f : families(Strategy::pulse)) {
    if (std::string_view(f.name) == "v") v = &f;
  }
  ASSERT_NE(v, nullptr);
  PassClock clock;
  const auto& placed = detail::placed_family(in, *at_limit, *v, clock);
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.error().message,
            "v at pp 512 has 1024 stages: 4096 microbatches are 8388608 schedule ops, above the "
            "4194304 a plan states");
}

}  // namespace
}  // namespace pulse
