// The memory rule (cost/memory.hpp) on a hand-built V of two devices:
//   stages 0..3 on devices 0, 1, 1, 0; activations per microbatch 100, 10, 20, 40 bytes;
//   one skip of 5 bytes from stage 0 to stage 3, kept on device 0.
#include "pulse/cost/memory.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace pulse {
namespace {

PipelineModel little_v() {
  PipelineModel m;
  m.layout = v_layout({0, 1, 2, 3, 4}, 2);
  for (std::int64_t a : {100, 10, 20, 40}) {
    StageCost c;
    c.activation_bytes = a;
    c.params = 10;
    m.stages.push_back(c);
  }
  m.skips.push_back(SkipPlacement{0, 0, 3, true, 5});
  return m;
}

TEST(Memory, BytesPerMicrobatch) {
  const PipelineModel m = little_v();
  // skip(d): the local skip is held on device 0 only.
  EXPECT_EQ(skip_bytes_per_microbatch(m), (std::vector<std::int64_t>{5, 0}));
  // At most: all of a device's stages, 100 + 40 + 5 and 10 + 20.
  EXPECT_EQ(bytes_per_microbatch_at_most(m), (std::vector<std::int64_t>{145, 30}));
  // For a microbatch's whole stay: the first stage's activations and skip(d).
  EXPECT_EQ(bytes_per_microbatch_staying(m), (std::vector<std::int64_t>{105, 10}));
}

TEST(Memory, InflightLimitsFromFreeBytes) {
  const PipelineModel m = little_v();
  // 320 bytes free on each device: 320 / 145 = 2 in any order, 320 / 105 = 3 at best on
  // device 0; device 1 is capped by `wanted`.
  const std::vector<std::int64_t> static_bytes{1000, 1000};
  const std::vector<int> wanted{8, 8};
  EXPECT_EQ(memory_inflight_limits(m, static_bytes, 1320, wanted), (std::vector<int>{2, 8}));
  EXPECT_EQ(resident_inflight_limits(m, static_bytes, 1320, wanted), (std::vector<int>{3, 8}));
  // Nothing free: not even one microbatch fits.
  EXPECT_EQ(memory_inflight_limits(m, static_bytes, 1000, wanted), (std::vector<int>{0, 0}));
}

TEST(Memory, PartitionBoundIsStaticPlusInflightTimesPerMicrobatch) {
  // 16 bytes per parameter (mixed-precision Adam): 16 * 1000 + 3 * 145.
  EXPECT_EQ(memory_bound(MemoryModel{}, 1000, 1, 3, 145), 16435);
  // ZeRO-1 over 4 replicas shards the 12 optimizer bytes: (2 + 2 + 3) * 1000.
  MemoryModel zero;
  zero.zero_stage = 1;
  EXPECT_EQ(memory_bound(zero, 1000, 4, 0, 145), 7000);
}

TEST(Memory, PrecisionNamesAndTheirBytes) {
  // {weights, gradients, optimizer} per parameter; an alias is written as its name.
  struct Want {
    const char* name;
    const char* written;
    double weights, gradients, optimizer;
  };
  for (const Want& w : {Want{"mixed", "mixed", 2, 2, 12}, Want{"bf16-mixed", "mixed", 2, 2, 12},
                        Want{"fp16-mixed", "fp16-mixed", 2, 2, 12}, Want{"bf16", "bf16", 2, 2, 4},
                        Want{"fp32", "fp32", 4, 4, 8}, Want{"fp64", "fp64", 8, 8, 16}}) {
    MemoryModel m;
    ASSERT_TRUE(m.set_precision(w.name)) << w.name;
    EXPECT_EQ(m.precision, w.written);
    EXPECT_EQ(m.weight_bytes_per_param, w.weights) << w.name;
    EXPECT_EQ(m.gradient_bytes_per_param, w.gradients) << w.name;
    EXPECT_EQ(m.optimizer_bytes_per_param, w.optimizer) << w.name;
  }
  MemoryModel m;
  EXPECT_FALSE(m.set_precision("fp16"));  // pure fp16 is no regime the runtime trains
  EXPECT_FALSE(m.set_precision("float32"));
  EXPECT_EQ(m.precision, "mixed");
  // fp32 under ZeRO-2 over 2 replicas: 4 + 4 / 2 + 8 / 2 = 10 bytes per parameter.
  ASSERT_TRUE(m.set_precision("fp32"));
  m.zero_stage = 2;
  EXPECT_EQ(m.static_bytes(1000, 2), 10000);
}

TEST(Memory, ResidencyChargesActivationsFromForwardToLastBackward) {
  const PipelineModel m = little_v();
  // Device 0: stage 0 holds microbatch 0 over [0, 10] and 1 over [2, 12], each 100 + 5 (its
  // first stage carries skip(0)); stage 3 holds 40 over [4, 8] and [6, 9].
  //   t: 0 -> 105, 2 -> 210, 4 -> 250, 6 -> 290, 8 -> 250, 9 -> 210, 10 -> 105, 12 -> 0.
  const Residency r = residency(m, 0, {{0, 0, 10}, {0, 2, 12}, {3, 4, 8}, {3, 6, 9}});
  EXPECT_EQ(r.peak_bytes, 290);
  EXPECT_EQ(r.max_inflight, 2);
  // What ends at an instant is released before what starts then is charged.
  const Residency handover = residency(m, 0, {{0, 0, 5}, {0, 5, 10}});
  EXPECT_EQ(handover.peak_bytes, 105);
  EXPECT_EQ(handover.max_inflight, 1);
  EXPECT_TRUE(within_memory(1000, 290, 1290));
  EXPECT_FALSE(within_memory(1000, 290, 1289));
}

// The rule's definition, directly: a hold counts over [from, until) (what ends at an instant
// is released before what starts then), and the peak is the largest sum at any instant.
Residency residency_by_instants(const PipelineModel& m, const std::vector<ActivationHold>& holds) {
  Residency r;
  for (const ActivationHold& at : holds) {
    std::int64_t bytes = 0;
    int inflight = 0;
    for (const ActivationHold& h : holds) {
      if (!(h.from_s <= at.from_s && at.from_s < h.until_s)) continue;
      bytes += m.stages[h.stage].activation_bytes + (h.stage == 0 ? 5 : 0);
      inflight += h.stage == 0 ? 1 : 0;
    }
    r.peak_bytes = std::max(r.peak_bytes, bytes);
    r.max_inflight = std::max(r.max_inflight, inflight);
  }
  return r;
}

TEST(Memory, ResidencyIsTheLargestSumAtAnyInstantInAnyHoldOrder) {
  // residency merges ascending runs (each stage's holds in microbatch order) and sorts
  // when there are many: holds in stage order with every stage's in order (two runs of
  // allocations, two of releases), the same with one stage's out of order, and shuffled
  // (past the merge's run limit); on whole-number times, so many events share an instant.
  const PipelineModel m = little_v();
  std::mt19937 rng(42);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<ActivationHold> holds;
    for (StageId s : {0, 3}) {
      double from = 0, until = 0;
      for (int k = 0; k < 100; ++k) {
        from += static_cast<double>(rng() % 3);
        until = std::max(until, from + static_cast<double>(rng() % 12));
        holds.push_back({s, from, until});
      }
    }
    if (trial % 3 == 1) std::reverse(holds.begin(), holds.begin() + 10);
    if (trial % 3 == 2) std::shuffle(holds.begin(), holds.end(), rng);
    const Residency want = residency_by_instants(m, holds);
    const Residency got = residency(m, 0, holds);
    EXPECT_EQ(got.peak_bytes, want.peak_bytes) << "trial " << trial;
    EXPECT_EQ(got.max_inflight, want.max_inflight) << "trial " << trial;
  }
}

}  // namespace
}  // namespace pulse
