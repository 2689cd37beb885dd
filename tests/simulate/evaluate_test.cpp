#include "pulse/simulate/evaluate.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/simulate/trace.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using nlohmann::json;

// Two equal layers, one per stage, on a chain: forward 1 s, backward 2 s, 1000-byte outputs.
ModelProfile two_layers() {
  return test::make_model({{1.0, 1000, 100, 1000}, {1.0, 1000, 100, 1000}}, {});
}

// The plan OneFOneBIterationAndBubbleByHand works out: 1F1B, pp 2, dp 2, M = 4, links of
// 1000 B/s and 0.5 s latency.
Result<CompiledPlan> one_f_one_b_by_hand() {
  const ClusterProfile cluster = test::make_cluster(2, 2, std::int64_t{1} << 30, 1000.0, 0.5);
  PlanOptions o;
  o.strategy = Strategy::one_f_one_b;
  o.pp = 2;
  o.dp = 2;
  o.global_batch = 8;
  return compile_plan(two_layers(), cluster, o);
}

TEST(Evaluate, OneFOneBIterationAndBubbleByHand) {
  // 1F1B, pp 2, dp 2, M = 4 microbatches per pipeline, links of 1000 B/s and 0.5 s latency:
  // each activation or gradient message takes 0.5 + 1000/1000 = 1.5 s and blocks the sender.
  // Device 0 may hold 2 microbatches in flight, device 1 one (1F1B's P - s):
  //   d0: F0.0 [0,1]+send [1,2.5]  F0.1 [2.5,3.5]+send [3.5,5]  (full; waits for a gradient)
  //   d1: F1.0 [2.5,3.5]  B1.0 [3.5,5.5]+send [5.5,7]
  //   d0: B0.0 [7,9]  F0.2 [9,10]+send [10,11.5]
  //   d1: F1.1 [7,8]  B1.1 [8,10]+send [10,11.5]  F1.2 [11.5,12.5]  B1.2 [12.5,14.5]+send [14.5,16]
  //   d0: B0.1 [11.5,13.5]  F0.3 [13.5,14.5]+send [14.5,16]  B0.2 [16,18]
  //   d1: F1.3 [16,17]  B1.3 [17,19]+send [19,20.5]
  //   d0: B0.3 [20.5,22.5]                                         makespan 22.5
  // Each device computes 4 x 3 = 12 s and sends 4 x 1.5 = 6 s, so it idles 22.5 - 18 = 4.5:
  // bubble 9 / 45 = 0.2.
  // All-reduce: 1000 params x 2 bytes of fp16 gradients = 2000 bytes per device, ring over
  // 2 replicas on the inter-node class (bandwidth / 4, latency x 4):
  //   2(D-1) = 2 steps of 2000/2 bytes at 250 B/s plus 2 s latency each: 2 x (2 + 4) = 12 s,
  // after device 0's last op at 22.5 and device 1's at 20.5: iteration 34.5 s.
  const auto plan = one_f_one_b_by_hand();
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const Timeline& t = plan->timeline;
  EXPECT_DOUBLE_EQ(t.devices[1].ops[0].start_s, 2.5);  // F1.0 waits for the 1.5 s message
  EXPECT_DOUBLE_EQ(t.devices[0].ops[0].busy_until_s, 2.5);
  EXPECT_DOUBLE_EQ(t.makespan_s, 22.5);
  EXPECT_DOUBLE_EQ(plan->evaluation.iteration_s, 34.5);
  EXPECT_DOUBLE_EQ(plan->evaluation.bubble_ratio, 0.2);
  for (const AllReduce& a : plan->evaluation.allreduce) {
    EXPECT_EQ(a.bytes, 2000);
    EXPECT_DOUBLE_EQ(a.seconds, 12.0);
  }
  // Iteration: the later of the makespan and each device's all-reduce after its last op.
  double iteration = t.makespan_s;
  for (const AllReduce& a : plan->evaluation.allreduce)
    iteration = std::max(iteration, a.start_s + a.seconds);
  EXPECT_DOUBLE_EQ(plan->evaluation.iteration_s, iteration);
  // Bubble: idle share of device time. Each device computes 4 x 3 = 12 s and sends
  // 4 x 1.5 = 6 s; the rest of the makespan is idle.
  const double idle = 2 * t.makespan_s - 2 * 12.0 - 2 * 6.0;
  EXPECT_DOUBLE_EQ(plan->evaluation.bubble_ratio, idle / (2 * t.makespan_s));
  EXPECT_DOUBLE_EQ(plan->evaluation.samples_per_s, 8 / plan->evaluation.iteration_s);
}

// A timeline with all but each device's last op released (keep_last_ops: the tuner's cached
// plans, the searches' answer through the probe) is weighed as before: the same iteration
// (device 0 ends at 22.5, device 1 at 20.5, then the 12 s all-reduce: 34.5), the same
// figures, one op left a device.
TEST(Evaluate, ATimelineKeepingItsLastOpsIsWeighedAsBefore) {
  const auto plan = one_f_one_b_by_hand();
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  Timeline kept = plan->timeline;
  keep_last_ops(kept);
  const std::vector<double> allreduce = {12.0, 12.0};
  ASSERT_EQ(kept.devices.size(), 2u);
  for (std::size_t d = 0; d < 2; ++d) {
    const DeviceTimeline& whole = plan->timeline.devices[d];
    ASSERT_EQ(kept.devices[d].ops.size(), 1u);
    EXPECT_EQ(kept.devices[d].ops[0].busy_until_s, whole.ops.back().busy_until_s);
    EXPECT_EQ(kept.devices[d].resident_peak, whole.resident_peak);
    EXPECT_EQ(kept.devices[d].compute_s, whole.compute_s);
  }
  EXPECT_DOUBLE_EQ(kept.devices[1].ops[0].busy_until_s, 20.5);
  const Evaluation before = evaluate(plan->model, plan->timeline, allreduce, 8, MemoryModel{});
  const Evaluation after = evaluate(plan->model, kept, allreduce, 8, MemoryModel{});
  EXPECT_DOUBLE_EQ(after.iteration_s, 34.5);
  EXPECT_EQ(after.iteration_s, before.iteration_s);
  EXPECT_EQ(after.bubble_ratio, before.bubble_ratio);
}

// evaluate counts the microbatches from the ops, and ZeRO-2's bytes depend on the count
// ((M G + W) / 2 a device: 5000 at M = 4, below). Where a device's last op is of an earlier
// microbatch (here its first and last ops trade places), keep_last_ops keeps an op of its
// latest too: with the last op alone the count would be 1 and the bytes (G + W) / 2 = 2000.
TEST(Evaluate, ATimelineKeepingItsLastOpsCountsEveryMicrobatch) {
  const auto plan = one_f_one_b_by_hand();
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  Timeline whole = plan->timeline;
  for (DeviceTimeline& d : whole.devices) std::swap(d.ops.front().op, d.ops.back().op);
  ASSERT_EQ(whole.devices[0].ops.back().op.mb, 0);
  Timeline kept = whole;
  keep_last_ops(kept);
  EXPECT_EQ(with_last_ops(whole).devices[0].ops.size(), 2u);
  MemoryModel zero2;
  zero2.zero_stage = 2;
  const std::vector<double> allreduce = {12.0, 12.0};
  const Evaluation before = evaluate(plan->model, whole, allreduce, 8, zero2);
  const Evaluation after = evaluate(plan->model, kept, allreduce, 8, zero2);
  const Evaluation copied = evaluate(plan->model, with_last_ops(whole), allreduce, 8, zero2);
  for (std::size_t d = 0; d < 2; ++d) {
    ASSERT_EQ(kept.devices[d].ops.size(), 2u);
    EXPECT_EQ(kept.devices[d].ops.back().op, whole.devices[d].ops.back().op);
    EXPECT_EQ(before.allreduce[d].bytes, 5000);
    EXPECT_EQ(after.allreduce[d].bytes, 5000);
    EXPECT_EQ(copied.allreduce[d].bytes, 5000);
  }
  EXPECT_EQ(after.iteration_s, before.iteration_s);
  EXPECT_EQ(copied.iteration_s, before.iteration_s);
}

TEST(Evaluate, ShardedDataParallelTrafficByHand) {
  // The plan above (1F1B, pp 2, dp 2, M = 4, makespan 22.5; device 0 ends at 22.5, device 1
  // at 20.5) under ZeRO-2 and ZeRO-3. Per device G = W = 1000 params x 2 bytes = 2000; the
  // all-reduce over the 2 replicas takes 12 s (above), a reduce-scatter or all-gather 6 s.
  //   ZeRO-2: after the last op RS + AG = 12 s; beside the backward (M-1) RS = 18 s against
  //     M x 2 s = 8 s: 10 s more. 22 s; iteration 22.5 + 22 = 44.5. Bytes (M G + W) / 2 = 5000.
  //   ZeRO-3: after, 12 s; beside forward and backward (M-1) RS + (2M-1) AG = 18 + 42 = 60 s
  //     against M x 3 s = 12 s: 48 s more. 60 s; iteration 82.5. Bytes M (2W + G) / 2 = 12000.
  ClusterProfile cluster = test::make_cluster(2, 2, std::int64_t{1} << 30, 1000.0, 0.5);
  const struct {
    int zero;
    double seconds, iteration;
    std::int64_t bytes;
  } cases[] = {{2, 22.0, 44.5, 5000}, {3, 60.0, 82.5, 12000}};
  for (const auto& c : cases) {
    PlanOptions o;
    o.strategy = Strategy::one_f_one_b;
    o.pp = 2;
    o.dp = 2;
    o.global_batch = 8;
    o.memory.zero_stage = c.zero;
    const auto plan = compile_plan(two_layers(), cluster, o);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_DOUBLE_EQ(plan->timeline.makespan_s, 22.5) << c.zero;
    EXPECT_DOUBLE_EQ(plan->evaluation.iteration_s, c.iteration) << c.zero;
    for (const AllReduce& a : plan->evaluation.allreduce) {
      EXPECT_EQ(a.bytes, c.bytes) << c.zero;
      EXPECT_DOUBLE_EQ(a.seconds, c.seconds) << c.zero;
    }
    // Sharded state: ZeRO-2 halves gradients and optimizer state over the 2 replicas, ZeRO-3
    // the weights too (and gathers the 1000-parameter layer twice: 4000 bytes of workspace).
    const MemoryBreakdown& m = plan->static_bytes[0];
    EXPECT_EQ(m.gradients, 1000) << c.zero;
    EXPECT_EQ(m.optimizer, 6000) << c.zero;
    EXPECT_EQ(m.weights, c.zero == 3 ? 1000 : 2000);
    EXPECT_EQ(m.workspace, c.zero == 3 ? 4000 : 0);
  }
}

TEST(Evaluate, RingAndHierarchicalAllReduce) {
  // 2 nodes x 2 devices; intra 1000 B/s, inter 250 B/s; latency 0 for clean arithmetic.
  ClusterProfile c = test::make_cluster(2, 2, 1 << 30, 1000.0, 0.0);
  const std::vector<RankId> all = {0, 1, 2, 3};
  // Ring over 4: 6 steps of 4000/4 = 1000 bytes, paced by the 250 B/s inter-node link: 24 s.
  EXPECT_DOUBLE_EQ(allreduce_seconds(4000, all, c), 24.0);
  // Hierarchical: in each node a 2-ring (2 steps of 2000 bytes at 1000 B/s = 4 s), then the
  // 2000-byte shards across the 2 nodes (2 steps of 1000 bytes at 250 B/s = 8 s): 12 s.
  c.allreduce = "hierarchical";
  EXPECT_DOUBLE_EQ(allreduce_seconds(4000, all, c), 12.0);
  // Inside one node the two are the same ring.
  EXPECT_DOUBLE_EQ(allreduce_seconds(4000, {0, 1}, c), 4.0);
  EXPECT_DOUBLE_EQ(allreduce_seconds(4000, {0}, c), 0.0);
}

TEST(Evaluate, SentBytesAreTheBytesThePlanCounts) {
  // Every send the engine performs carries its transfer's bytes; their sum over one
  // pipeline times the replicas is the plan's P2P total, for each strategy.
  auto model = load_model_profile(test::profile_path("models/sd2-unet-512.json")).value();
  auto cluster =
      load_cluster_profile(test::profile_path("clusters/dgx1-v100-32gb-1n.json")).value();
  for (Strategy s : {Strategy::pulse, Strategy::v_naive, Strategy::one_f_one_b,
                     Strategy::one_f_one_b_direct, Strategy::gpipe}) {
    PlanOptions o;
    o.strategy = s;
    o.pp = 4;
    o.dp = 2;
    o.global_batch = 32;
    o.solver_max_seconds = 0.2;
    const auto plan = compile_plan(model, cluster, o);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    const auto timeline = timeline_with_sends(*plan);
    ASSERT_TRUE(timeline.ok()) << timeline.error().message;
    std::int64_t sent = 0;
    int sends = 0;
    for (const DeviceTimeline& d : timeline->devices) {
      for (const TimedSend& x : d.sends) {
        const Transfer& t = plan->model.transfers[x.transfer];
        sent += (x.forward ? t.forward : t.backward).total();
        ++sends;
      }
    }
    // Each transfer is sent once per microbatch each way.
    EXPECT_EQ(sends, 2 * static_cast<int>(plan->model.transfers.size()) * plan->num_microbatches);
    const json j = json::parse(test::plan_text(*plan, model, cluster));
    EXPECT_EQ(sent * plan->dp, j["comm"]["p2p_bytes_per_iteration"].get<std::int64_t>())
        << strategy_name(s);
  }
}

TEST(Evaluate, ReplaysKeepTheirSendsOnlyWhenAsked) {
  // The planner's replays keep no sends (half a large plan's memory went to them); a replay
  // that records them has every other figure to the bit, and one send per transfer,
  // microbatch and direction.
  auto model = load_model_profile(test::profile_path("models/sd2-unet-512.json")).value();
  auto cluster =
      load_cluster_profile(test::profile_path("clusters/dgx1-v100-32gb-1n.json")).value();
  for (Strategy s : {Strategy::pulse, Strategy::one_f_one_b}) {
    PlanOptions o;
    o.strategy = s;
    o.pp = 4;
    o.global_batch = 16;
    o.solver_max_seconds = 0.2;
    const auto plan = compile_plan(model, cluster, o);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    for (const DeviceTimeline& d : plan->timeline.devices) EXPECT_TRUE(d.sends.empty());
    const int M = plan->num_microbatches;
    const auto dropped =
        simulate(plan->model, plan->schedule, M, plan->static_bytes, Peaks::held, Sends::dropped);
    const auto recorded =
        simulate(plan->model, plan->schedule, M, plan->static_bytes, Peaks::held, Sends::recorded);
    ASSERT_TRUE(dropped.ok() && recorded.ok());
    test::expect_same_timeline(*dropped, *recorded, strategy_name(s));
    std::size_t sends = 0;
    for (std::size_t d = 0; d < dropped->devices.size(); ++d) {
      EXPECT_TRUE(dropped->devices[d].sends.empty());
      sends += recorded->devices[d].sends.size();
    }
    EXPECT_EQ(sends, 2 * plan->model.transfers.size() * static_cast<std::size_t>(M))
        << strategy_name(s);
    const auto with = timeline_with_sends(*plan);
    ASSERT_TRUE(with.ok());
    for (std::size_t d = 0; d < with->devices.size(); ++d) {
      EXPECT_EQ(with->devices[d].sends.size(), recorded->devices[d].sends.size());
      EXPECT_EQ(with->devices[d].ops.size(), plan->timeline.devices[d].ops.size());
    }
  }
}

TEST(Evaluate, TraceHasOneCompleteEventPerOp) {
  auto model = load_model_profile(test::profile_path("models/sd2-unet-512.json")).value();
  auto cluster =
      load_cluster_profile(test::profile_path("clusters/dgx1-v100-32gb-1n.json")).value();
  PlanOptions o;
  o.pp = 4;
  o.solver_max_seconds = 0.2;
  const auto plan = compile_plan(model, cluster, o);
  ASSERT_TRUE(plan.ok());
  const json trace =
      json::parse(chrome_trace(plan->model, plan->timeline, plan->evaluation.allreduce, plan->dp));
  std::size_t ops = 0, compute_events = 0;
  for (const DeviceTimeline& d : plan->timeline.devices) ops += d.ops.size();
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "compute") {
      ++compute_events;
      EXPECT_GT(e["dur"].get<double>(), 0.0);
      EXPECT_TRUE(e["args"].contains("stage") && e["args"].contains("mb"));
    }
  }
  EXPECT_EQ(compute_events, ops);
}

TEST(Strategies, EachKeepsItsDefiningProperty) {
  auto model = load_model_profile(test::profile_path("models/sd2-unet-512.json")).value();
  auto cluster = load_cluster_profile(test::profile_path("clusters/atlas800-910a-1n.json")).value();
  auto skip_bytes = [&](Strategy s) {
    PlanOptions o;
    o.strategy = s;
    o.pp = 4;
    o.dp = 2;
    o.global_batch = 32;
    o.solver_max_seconds = 0.2;
    auto plan = compile_plan(model, cluster, o);
    EXPECT_TRUE(plan.ok()) << plan.error().message;
    return plan->model.bytes_per_microbatch().skip;
  };
  EXPECT_EQ(skip_bytes(Strategy::pulse), 0);
  // Balanced without looking at skips, the V leaves some non-local.
  EXPECT_GT(skip_bytes(Strategy::v_naive), 0);
  // Relaying through every boundary costs more than sending straight to the consumer.
  EXPECT_GT(skip_bytes(Strategy::one_f_one_b), skip_bytes(Strategy::one_f_one_b_direct));
  EXPECT_EQ(skip_bytes(Strategy::gpipe), skip_bytes(Strategy::one_f_one_b));
  EXPECT_EQ(parse_strategy("sequential"), Strategy::one_f_one_b);
  EXPECT_EQ(parse_strategy("pipedream"), std::nullopt);
}

TEST(Strategies, GpipeNeedsRoomForEveryMicrobatch) {
  // Tiny UNet on 20 MB devices at pp 2: the partition fits one microbatch in flight, not 16.
  auto model = load_model_profile(test::profile_path("models/tiny-unet.json")).value();
  ClusterProfile cluster = test::make_cluster(2, 1, 140 * 1000 * 1000);
  cluster.device_type = std::string("V100-SXM2");
  PlanOptions o;
  o.strategy = Strategy::gpipe;
  o.pp = 2;
  o.global_batch = 16;
  const auto plan = compile_plan(model, cluster, o);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().kind, ErrorKind::infeasible);
  EXPECT_NE(plan.error().message.find("GPipe keeps all 16 microbatches in flight"),
            std::string::npos)
      << plan.error().message;
  // Said of every partition (passes.cpp, gpipe_holds_none), not of the one that holds one.
  EXPECT_NE(plan.error().message.find("no partition of " + model.name + " into 2 stages holds"),
            std::string::npos)
      << plan.error().message;
}

}  // namespace
}  // namespace pulse
