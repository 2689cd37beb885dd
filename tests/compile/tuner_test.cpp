#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "compile/compile_internal.hpp"
#include "pulse/compile/compile.hpp"
#include "pulse/place/placement.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

std::int64_t largest_peak(const CompiledPlan& p) {
  std::int64_t peak = 0;
  for (const DeviceTimeline& d : p.timeline.devices) peak = std::max(peak, d.peak.total());
  return peak;
}

// Four equal layers (forward 1 s, backward 2 s), no skips, outputs of 0 bytes; `params` per
// layer and 1 kB of activations per sample.
ModelProfile four_layers(std::int64_t params) {
  std::vector<test::LayerSpec> layers(4, test::LayerSpec{1.0, params, 1000, 0});
  return test::make_model(layers, {});
}

// Two devices on one node; links of `bandwidth` and no latency.
ClusterProfile two_devices(std::int64_t memory, double bandwidth) {
  ClusterProfile c = test::make_cluster(2, 1, memory, bandwidth, 0.0);
  return c;
}

const Candidate& find(const CompiledPlan& p, int pp) {
  for (const Candidate& c : p.candidates) {
    if (c.pp == pp) return c;
  }
  throw std::runtime_error("no candidate");
}

TEST(Tuner, PipeliningWinsWhenTheAllReduceCosts) {
  // Global batch 4 on 2 devices, microbatch size 1 (the only profiled size):
  //   pp 1 x dp 2: each device runs 2 microbatches of all 4 layers back to back,
  //     2 x 4 x 3 = 24 s, then all-reduces its gradients: 4 x 625,000 params x 2 bytes =
  //     5 MB over a 2-ring at 1 MB/s: 2 steps of 2.5 MB = 5 s, nothing to hide it behind:
  //     29 s, 4/29 = 0.138 samples/s.
  //   pp 2 x dp 1: a V of 4 one-layer stages, M = 4; each device has 4 x (1+1+2+2) = 24 s of
  //     work and the ramp costs 3 (the bottom device starts at 1, the top one ends 2 after
  //     it): 27 s is the bound, and the synthesizer reaches it; no all-reduce:
  //     4/27 = 0.148 samples/s.
  // So pp 2 wins.
  const ModelProfile m = four_layers(625000);
  const ClusterProfile c = two_devices(std::int64_t{1} << 30, 1e6);
  PlanOptions o;
  o.global_batch = 4;
  const auto plan = compile_plan(m, c, o);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->pp, 2);
  EXPECT_EQ(plan->dp, 1);
  EXPECT_DOUBLE_EQ(plan->evaluation.iteration_s, 27.0);
  // Pure data parallelism is never scheduled: its lower bound (24 s of work, then the
  // 5 s all-reduce) is its exact time, 29 s, and no better than the V's 27 s.
  const Candidate& pure_dp = find(*plan, 1);
  EXPECT_FALSE(pure_dp.feasible);
  EXPECT_TRUE(plan->candidates.front().chosen);
  EXPECT_EQ(pure_dp.reason.value_or(""),
            "not scheduled: its families' least lower bound on time, 29.000 s, is no better "
            "than a plan already found, 27.000 s");
  // Searched alone, it takes exactly that.
  PlanOptions alone = o;
  alone.pp = 1;
  alone.microbatch_size = 1;
  const auto dp_only = compile_plan(m, c, alone);
  ASSERT_TRUE(dp_only.ok()) << dp_only.error().message;
  EXPECT_DOUBLE_EQ(dp_only->evaluation.iteration_s, 29.0);
  // With free gradients pure data parallelism wins: 24 s against 27 s.
  const auto fast = compile_plan(m, two_devices(std::int64_t{1} << 30, 1e300), o);
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->pp, 1);
  EXPECT_DOUBLE_EQ(fast->evaluation.iteration_s, 24.0);
}

TEST(Tuner, MemoryCapForcesADeeperPipelineOrShardedDataParallelism) {
  // 1M parameters per layer at 16 bytes each: one device holding all four layers needs
  // 64 MB of training state; two layers each, 32 MB. With 50 MB per device only pp 2 fits
  // without sharding.
  const ModelProfile m = four_layers(1000000);
  const ClusterProfile c = two_devices(50 * 1000 * 1000, 1e9);
  PlanOptions o;
  o.global_batch = 4;
  const auto plan = compile_plan(m, c, o);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const Candidate* shallow = nullptr;
  const Candidate* deep = nullptr;
  for (const Candidate& k : plan->candidates) {
    if (k.zero_stage) continue;  // the sharded search's
    if (k.pp == 1) shallow = &k;
    if (k.pp == 2) deep = &k;
  }
  ASSERT_TRUE(shallow && deep);
  EXPECT_FALSE(shallow->feasible);
  EXPECT_NE(shallow->reason.value_or("").find("does not fit synthetic-cluster at pp 1"),
            std::string::npos)
      << shallow->reason.value_or("");
  EXPECT_TRUE(deep->feasible);
  // ZeRO-2 holds 2 + 2/2 + 12/2 = 9 bytes per parameter, 36 MB: pp 1 fits again, and with
  // 2 microbatches of 4 x 3 s per replica (24 s, the gradients all-reduced in 8 ms) it beats
  // the pipeline's 27 s; ZeRO-3 is as fast and ties lose to the first.
  EXPECT_EQ(plan->pp, 1);
  EXPECT_EQ(plan->options.memory.zero_stage, 2);
  ASSERT_TRUE(plan->pipeline_or_not);
  EXPECT_EQ(plan->pipeline_or_not->verdict, "sharded data parallel");
  EXPECT_NE(plan->pipeline_or_not->note.find("data parallel over 2 (ZeRO-2), microbatch 1"),
            std::string::npos)
      << plan->pipeline_or_not->note;
  EXPECT_NE(plan->pipeline_or_not->note.find("beats pp 2 x dp 1, microbatch 1, at 27.000 s"),
            std::string::npos)
      << plan->pipeline_or_not->note;
  EXPECT_TRUE(plan->candidates.front().chosen);
  EXPECT_EQ(plan->candidates.front().zero_stage, 2);
}

TEST(Tuner, AZeroStageGivenIsKeptOrThePlanRefused) {
  // The cap of the test above. ZeRO-3 given: the ZeRO-2 plan (24 s, the fastest, adopted
  // when --zero is not given) is weighed, never adopted; ZeRO-3 at pp 1 is as fast and kept.
  const ModelProfile m = four_layers(1000000);
  const ClusterProfile c = two_devices(50 * 1000 * 1000, 1e9);
  PlanOptions o;
  o.global_batch = 4;
  o.memory.zero_stage = 3;
  o.zero_given = true;
  const auto three = compile_plan(m, c, o);
  ASSERT_TRUE(three.ok()) << three.error().message;
  EXPECT_EQ(three->options.memory.zero_stage, 3);
  EXPECT_EQ(three->given.memory.zero_stage, 3);
  EXPECT_TRUE(three->given.zero_given);
  EXPECT_EQ(three->pp, 1);
  // ZeRO-0 given: no sharded plan is adopted; the pipeline at 27 s is the plan.
  o.memory.zero_stage = 0;
  const auto zero = compile_plan(m, c, o);
  ASSERT_TRUE(zero.ok()) << zero.error().message;
  EXPECT_EQ(zero->options.memory.zero_stage, 0);
  EXPECT_EQ(zero->pp, 2);
  EXPECT_DOUBLE_EQ(zero->evaluation.iteration_s, 27.0);
  // ZeRO-0 at pp 1 does not fit (64 MB of state in 50 MB): refused, naming what would: ZeRO-2
  // at 24 s of compute plus 8 ms of exposed all-reduce (the test above).
  o.pp = 1;
  const auto refused = compile_plan(m, c, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::infeasible);
  const std::string& e = refused.error().message;
  EXPECT_NE(e.find("; --zero 0 was given and is kept; sharded data parallelism alone would "
                   "fit: ZeRO-2, pp 1 x dp 2, microbatch 1, 24.008 s per iteration (plan with "
                   "--zero 2 --pp 1); ZeRO-3, pp 1 x dp 2, microbatch 1"),
            std::string::npos)
      << e;
}

TEST(Tuner, TheHeadroomCapsEveryDevicesPeak) {
  // The cap of the tests above, 50 MB per device. ZeRO-2 at pp 1 (24 s) holds 36 MB of
  // training state on each device, 72% of it; the pipeline (27 s) 32 MB, 64%.
  const ModelProfile m = four_layers(1000000);
  const ClusterProfile c = two_devices(50 * 1000 * 1000, 1e9);
  PlanOptions o;
  o.global_batch = 4;
  const auto loose = compile_plan(m, c, o);  // the default, 0.95: 47.5 MB
  ASSERT_TRUE(loose.ok()) << loose.error().message;
  EXPECT_EQ(loose->pp, 1);
  EXPECT_GT(largest_peak(*loose), 35 * 1000 * 1000);
  o.headroom = 0.7;  // 35 MB: ZeRO-2 does not fit, the pipeline does
  const auto capped = compile_plan(m, c, o);
  ASSERT_TRUE(capped.ok()) << capped.error().message;
  EXPECT_EQ(capped->pp, 2);
  EXPECT_DOUBLE_EQ(capped->evaluation.iteration_s, 27.0);
  EXPECT_LE(largest_peak(*capped), 35 * 1000 * 1000);
  o.headroom = 0.6;  // 30 MB: neither
  const auto none = compile_plan(m, c, o);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind, ErrorKind::infeasible);
  EXPECT_NE(none.error().message.find("--headroom 0.6"), std::string::npos) << none.error().message;
  o.headroom = 1.5;
  EXPECT_EQ(compile_plan(m, c, o).error().message,
            "plan: --headroom must be a fraction in (0, 1] of the usable memory, got 1.5");
}

TEST(Tuner, ZeroOneMakesTheShallowerPipelineFit) {
  // Same 50 MB devices. ZeRO-1 shards the 12 bytes of optimizer state per parameter over the
  // 2 replicas of pp 1: 2 + 2 + 6 = 10 bytes, 40 MB for all four layers, plus a few kB of
  // activations: it fits.
  const ModelProfile m = four_layers(1000000);
  const ClusterProfile c = two_devices(50 * 1000 * 1000, 1e9);
  PlanOptions o;
  o.global_batch = 4;
  o.pp = 1;
  o.microbatch_size = 1;
  EXPECT_FALSE(compile_plan(m, c, o).ok());
  o.memory.zero_stage = 1;
  const auto plan = compile_plan(m, c, o);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->pp, 1);
  EXPECT_EQ(plan->static_bytes[0].optimizer, 4 * 1000000 * 6);
}

TEST(Tuner, InfeasibleClusterNamesTheSmallestPipelineThatWouldFit) {
  // Eight layers of 1M parameters (16 MB of state each) on two 40 MB devices: a V of 2
  // devices puts at least 4 layers (64 MB) on one; of 3 devices, at least 3 (48 MB); of 4,
  // 2 layers (32 MB plus a few kB of activations): 4 devices per pipeline, the cluster has 2.
  std::vector<test::LayerSpec> layers(8, test::LayerSpec{1.0, 1000000, 1000, 0});
  const ModelProfile m = test::make_model(layers, {});
  const ClusterProfile c = two_devices(40 * 1000 * 1000, 1e9);
  PlanOptions all;
  all.headroom = 1.0;  // all of the usable memory (the figures below)
  const auto plan = compile_plan(m, c, all);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().kind, ErrorKind::infeasible);
  // Then the shortfall of the deepest pipeline the cluster allows: pp 2 holds 4 layers,
  // 64 MB = 61.0 MiB, 22.9 MiB over.
  EXPECT_EQ(plan.error().message,
            "synthetic needs at least 4 T devices (38.1 MiB usable each) per pipeline, even "
            "with microbatch 1 and one microbatch in flight; the cluster has 2. At pp 2: "
            "synthetic does not fit synthetic-cluster at pp 2 (dp 1, microbatch size 1): even "
            "the most memory-frugal partition, with one microbatch in flight, needs 61.0 MiB on "
            "pipeline device 0, 22.9 MiB more than the 38.1 MiB usable per device (38.1 MiB "
            "minus 0 B reserved)");
}

TEST(Tuner, EveryCandidateSaysWhyItLost) {
  auto model = load_model_profile(test::profile_path("models/tiny-unet.json")).value();
  auto cluster =
      load_cluster_profile(test::profile_path("clusters/dgx1-v100-32gb-1n.json")).value();
  PlanOptions o;
  o.global_batch = 24;  // 24 / (dp x mb) must be whole: dp 8 with mb 2 is not
  const auto plan = compile_plan(model, cluster, o);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  int chosen = 0;
  for (const Candidate& c : plan->candidates) {
    if (c.chosen) {
      ++chosen;
      EXPECT_FALSE(c.reason);
    } else {
      EXPECT_TRUE(c.reason) << "pp " << c.pp << " mb " << c.microbatch_size;
    }
  }
  EXPECT_EQ(chosen, 1);
  EXPECT_TRUE(std::any_of(plan->candidates.begin(), plan->candidates.end(), [](const Candidate& c) {
    return c.reason == "global batch 24 is not divisible by dp 8 x microbatch size 2 = 16";
  }));
}

// --- Placement ----------------------------------------------------------------------------

ClusterProfile shipped_cluster(const std::string& name) {
  return load_cluster_profile(test::profile_path("clusters/" + name + ".json")).value();
}

void expect_permutation(const Placement& p, int devices) {
  std::set<RankId> seen;
  for (const auto& replica : p.ranks) seen.insert(replica.begin(), replica.end());
  EXPECT_EQ(static_cast<int>(seen.size()), devices);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), devices - 1);
}

// Of the plans a tune caches, only the one it chooses keeps its timeline's ops (each
// device's figures and last op stay on all). A tune whose choice another tune of the job
// released returns it so, its figures whole; restore_timeline replays it: the same
// timeline, to the bit.
TEST(TunerCache, NoCachedPlanKeepsItsTimelinesOps) {
  // The tuner reads the figures of the plans it screens; only the chosen one's ops are
  // kept, in the plan tune returns (a copy: the cache's are released, so that the job holds
  // one chosen timeline, not two; at pp 512 over 2048 layers 170 MB each).
  const test::Inputs in = test::shipped("sd2-unet-512", "dgx1-v100-32gb-1n");
  const PlanOptions o;
  detail::CompileCache cache;
  const detail::CompileInputs inputs{&in.model, &in.cluster, &o,
                                     in.model.device_type_index(in.cluster.device_type), &cache};
  PassClock clock;
  const auto first = detail::tune(inputs, clock);
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_FALSE(first->timeline_ops_released);
  int released = 0;
  for (const auto& [key, cached] : cache.plans) {
    if (!cached || cached->timeline.devices.empty()) continue;  // placed, not scheduled
    EXPECT_TRUE(cached->timeline_ops_released);
    ++released;
    for (const DeviceTimeline& d : cached->timeline.devices) {
      EXPECT_EQ(d.ops.size(), 1u);   // its last: where the device's share of the iteration ends
      EXPECT_GT(d.peak.total(), 0);  // the figures stay
    }
    EXPECT_GT(cached->timeline.makespan_s, 0);
  }
  EXPECT_GE(released, 4);
  // Another tune of the job chooses the same plan, its ops released and its figures the
  // first's (plan_level weighs rows by these, and replays only the plan it keeps).
  auto second = detail::tune(inputs, clock);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_TRUE(second->timeline_ops_released);
  EXPECT_EQ(second->pp, first->pp);
  EXPECT_EQ(second->microbatch_size, first->microbatch_size);
  EXPECT_EQ(second->evaluation.iteration_s, first->evaluation.iteration_s);
  EXPECT_EQ(second->timeline.makespan_s, first->timeline.makespan_s);
  ASSERT_TRUE(detail::restore_timeline(*second).ok());
  EXPECT_FALSE(second->timeline_ops_released);
  test::expect_same_timeline(second->timeline, first->timeline, "the chosen plan, replayed");
}

TEST(Placement, DgxPipelineOfEightStaysOnNvlink) {
  // The DGX-1V cube-mesh has a Hamiltonian path over NVLink: rank order 0..7 is not one
  // (3-4 is SYS), the placement must be.
  const ClusterProfile c = shipped_cluster("dgx1-v100-32gb-1n");
  const Placement p = place_pipelines({&c, 8, 1, {}, {}});
  EXPECT_TRUE(p.topology_aware);
  expect_permutation(p, 8);
  for (const std::string& link : p.boundary_links) EXPECT_NE(link, "SYS");
  // Weighted: the heaviest boundary gets a double link.
  const Placement w = place_pipelines({&c, 8, 1, {1, 1, 1, 100, 1, 1, 1}, {}});
  EXPECT_EQ(w.boundary_links[3], "NV2");
}

TEST(Placement, DgxTwoPipelinesOfFourUseNvlinkOnly) {
  const ClusterProfile c = shipped_cluster("dgx1-v100-32gb-1n");
  const Placement p = place_pipelines({&c, 4, 2, {}, {}});
  expect_permutation(p, 8);
  for (const auto& replica : p.ranks) {
    for (int d = 0; d + 1 < 4; ++d) EXPECT_NE(c.link(replica[d], replica[d + 1]).name, "SYS");
  }
}

TEST(Placement, AscendPipelineOfFourStaysInOneHccsGroup) {
  const ClusterProfile c = shipped_cluster("atlas800-910a-2n");
  const Placement p = place_pipelines({&c, 4, 4, {}, {}});
  expect_permutation(p, 16);
  for (const auto& replica : p.ranks) {
    const int group = c.local_of(replica[0]) / 4, node = c.node_of(replica[0]);
    for (RankId r : replica) {
      EXPECT_EQ(c.local_of(r) / 4, group);
      EXPECT_EQ(c.node_of(r), node);
    }
  }
}

TEST(Placement, LongPipelinesSpanWholeNodesAndReplicasSpreadOverNodes) {
  const ClusterProfile c = shipped_cluster("dgx1-v100-32gb-4n");
  const Placement p = place_pipelines({&c, 16, 2, {}, {}});
  expect_permutation(p, 32);
  for (const auto& replica : p.ranks) {
    // Devices 0-7 on one node, 8-15 on the next.
    for (int d = 1; d < 16; ++d) {
      EXPECT_EQ(c.node_of(replica[d]), c.node_of(replica[0]) + d / 8);
    }
  }
  const Placement q = place_pipelines({&c, 8, 4, {}, {}});
  std::set<int> nodes;
  for (const auto& replica : q.ranks) nodes.insert(c.node_of(replica[0]));
  EXPECT_EQ(nodes.size(), 4u);  // one replica per node
}

}  // namespace
}  // namespace pulse
