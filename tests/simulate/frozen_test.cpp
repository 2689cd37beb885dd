// Frozen placement (simulate/frozen.hpp) on hand-built gaps: the exact pieces, their times
// and the step they add, worked out in the comments.
#include "pulse/simulate/frozen.hpp"

#include <gtest/gtest.h>

namespace pulse {
namespace {

// One component: forward 10 ms at 1 sample, 16 ms at 2 (3 samples: 16 x 3/2 = 24 ms, 4: 32 ms);
// 100 bytes of weights, 10 bytes of working set and 1000 bytes of output per sample.
ModelProfile tiny_model() {
  ModelProfile m;
  m.microbatch_sizes = {1, 2};
  m.device_types = {"GPU"};
  FrozenComponent c;
  c.name = "enc";
  c.kind = "text_encoder";
  c.weight_bytes = 100;
  c.forward_s = {{0.010, 0.016}};
  c.activation_bytes_per_sample = 10;
  c.output_bytes_per_sample = 1000;
  m.frozen.push_back(c);
  return m;
}

// Two devices; device 1 -> device 0 at 1 MB/s and 1 ms: k samples' outputs take 1 + k ms.
// Gaps: device 0 [0, 12) and [50, 80) ms, device 1 [20, 34) ms. Six samples.
FrozenRequest tiny_request(const ModelProfile& m) {
  FrozenRequest r;
  r.model = &m;
  r.pp = 2;
  r.samples = 6;
  r.link_to_first = {LinkClass{}, LinkClass{"slow", 1e6, 0.001}};
  r.free_step_bytes = {1'000'000, 1'000'000};
  r.free_before_bytes = {1'000'000, 1'000'000};
  r.gaps = {{{0.0, 0.012}, {0.050, 0.080}}, {{0.020, 0.034}}};
  return r;
}

void expect_op(const FrozenOp& op, DeviceId device, bool bubble, double start, double end,
               int first, int samples) {
  EXPECT_EQ(op.device, device);
  EXPECT_EQ(op.in_bubble(), bubble);
  EXPECT_NEAR(op.start_s, start, 1e-12);
  EXPECT_NEAR(op.end_s, end, 1e-12);
  EXPECT_EQ(op.first_sample, first);
  EXPECT_EQ(op.samples, samples);
}

TEST(Frozen, PieceSecondsAddTheSendToTheFirstStage) {
  const ModelProfile m = tiny_model();
  const FrozenRequest r = tiny_request(m);
  EXPECT_NEAR(frozen_piece_seconds(r, m.frozen[0], 0, 3), 0.024, 1e-12);
  EXPECT_NEAR(frozen_piece_seconds(r, m.frozen[0], 1, 2), 0.016 + 0.001 + 0.002, 1e-12);
}

TEST(Frozen, BeforeStepSplitsTheSamplesOverTheDevices) {
  const ModelProfile m = tiny_model();
  const FrozenAnswer a = place_frozen(tiny_request(m), FrozenPlacement::before_step);
  ASSERT_TRUE(a.feasible) << a.reason;
  // Device 0: samples 0-2 in one piece, 24 ms; device 1: samples 3-5, 24 + 1 + 3 = 28 ms.
  ASSERT_EQ(a.ops.size(), 2u);
  expect_op(a.ops[0], 0, false, 0, 0.024, 0, 3);
  expect_op(a.ops[1], 1, false, 0, 0.028, 3, 3);
  EXPECT_NEAR(a.before_step_s, 0.028, 1e-12);
  EXPECT_EQ(a.bubble_s, 0);
  EXPECT_EQ(a.weight_bytes, (std::vector<std::int64_t>{100, 100}));
  EXPECT_EQ(a.activation_bytes, (std::vector<std::int64_t>{30, 30}));
}

TEST(Frozen, BubblesFillTheGapsAndTheRestRunsBeforeTheStep) {
  const ModelProfile m = tiny_model();
  const FrozenAnswer a = place_frozen(tiny_request(m), FrozenPlacement::bubbles);
  ASSERT_TRUE(a.feasible) << a.reason;
  // Device 0, gap [0, 12): 1 sample (10 ms; 2 would take 16). Gap [50, 80): 3 samples
  // (24 ms; 4 would take 32). Device 1, gap [20, 34): 1 sample, 10 + 1 + 1 = 12 ms (2 would
  // take 19). Sample 5 is left: before the step on device 0 (1 / 2 rounds up there), 10 ms.
  ASSERT_EQ(a.ops.size(), 4u);
  expect_op(a.ops[0], 0, false, 0, 0.010, 5, 1);
  expect_op(a.ops[1], 0, true, 0, 0.010, 0, 1);
  expect_op(a.ops[2], 0, true, 0.050, 0.074, 1, 3);
  expect_op(a.ops[3], 1, true, 0.020, 0.032, 4, 1);
  EXPECT_NEAR(*a.ops[3].gap_start_s, 0.020, 1e-12);
  EXPECT_NEAR(*a.ops[3].gap_end_s, 0.034, 1e-12);
  EXPECT_NEAR(a.before_step_s, 0.010, 1e-12);
  EXPECT_NEAR(a.bubble_s, 0.010 + 0.024 + 0.012, 1e-12);
}

TEST(Frozen, MemoryCutsThePieces) {
  const ModelProfile m = tiny_model();
  FrozenRequest r = tiny_request(m);
  // Before the step device 1 has room for the weights and 1.5 samples: three pieces of one
  // sample, 3 x (10 + 1 + 1) = 36 ms.
  r.free_before_bytes[1] = 115;
  const FrozenAnswer a = place_frozen(r, FrozenPlacement::before_step);
  ASSERT_TRUE(a.feasible) << a.reason;
  ASSERT_EQ(a.ops.size(), 4u);
  expect_op(a.ops[3], 1, false, 0.024, 0.036, 5, 1);
  EXPECT_NEAR(a.before_step_s, 0.036, 1e-12);
  EXPECT_EQ(a.activation_bytes[1], 10);
}

TEST(Frozen, APlacementThatDoesNotFitIsRefused) {
  const ModelProfile m = tiny_model();
  FrozenRequest r = tiny_request(m);
  r.free_step_bytes[1] = 50;  // the weights (100 bytes) do not fit beside the step's peak
  const FrozenAnswer a = place_frozen(r, FrozenPlacement::before_step);
  EXPECT_FALSE(a.feasible);
  EXPECT_EQ(a.reason,
            "device 1: 100 B of frozen weights and one sample of enc (10 B) do not fit beside "
            "the step (50 B free during it, 976.6 KiB before it)");
}

TEST(Frozen, CachedRunsNothingAndStatesTheStorage) {
  const ModelProfile m = tiny_model();
  const FrozenAnswer a = place_frozen(tiny_request(m), FrozenPlacement::cached);
  EXPECT_TRUE(a.feasible);
  EXPECT_TRUE(a.ops.empty());
  EXPECT_EQ(a.before_step_s, 0);
  EXPECT_EQ(a.cached_bytes_per_sample, 1000);
}

// The least a sample can cost is the cheapest profiled rate: 10 ms / 1 or 16 ms / 2, so 8 ms
// at 2 (a piece of 3 costs 24 ms, 8 ms a sample; of 1, 10 ms). Six samples: 48 ms, less the
// nanosecond a piece may round away. A second component of 3 ms at 1 and 8 ms at 2 is
// cheapest alone: 3 ms a sample.
TEST(Frozen, WorkLowerBoundIsTheCheapestProfiledRate) {
  ModelProfile m = tiny_model();
  EXPECT_NEAR(frozen_work_lower_bound(m, 0, 6), 6 * (0.008 - 1e-9), 1e-15);
  FrozenComponent other = m.frozen[0];
  other.forward_s = {{0.003, 0.008}};
  m.frozen.push_back(other);
  EXPECT_NEAR(frozen_work_lower_bound(m, 0, 6), 6 * (0.008 - 1e-9) + 6 * (0.003 - 1e-9), 1e-15);
}

// Never above what a placement runs: every placement of tiny_request, under every memory
// limit that cuts its pieces, spends at least the bound on forwards (its ops' time less
// the sends, which only add).
TEST(Frozen, WorkLowerBoundNeverExceedsAPlacementsForwards) {
  const ModelProfile m = tiny_model();
  const double bound = frozen_work_lower_bound(m, 0, 6);
  const auto forwards_of = [](const FrozenAnswer& a) {
    double forwards = 0;
    for (const FrozenOp& op : a.ops) {
      forwards += (op.end_s - op.start_s) -
                  (op.device == 0 ? 0.0 : 0.001 + op.samples * 0.001);  // the send (1 + k ms)
    }
    return forwards;
  };
  int placed = 0;
  for (std::int64_t room : {110, 115, 120, 130, 1'000'000}) {
    for (FrozenPlacement p : {FrozenPlacement::before_step, FrozenPlacement::bubbles}) {
      FrozenRequest r = tiny_request(m);
      r.free_before_bytes = {room, room};
      r.free_step_bytes = {room, room};
      const FrozenAnswer a = place_frozen(r, p);
      if (!a.feasible) continue;
      ++placed;
      EXPECT_GE(forwards_of(a), bound) << "room " << room << ", " << frozen_placement_name(p);
    }
  }
  EXPECT_EQ(placed, 10);
  // The control: the rate of a piece of one (10 ms) would not be a bound; the whole-sample
  // pieces of the placement with the most room beat it.
  EXPECT_LT(forwards_of(place_frozen(tiny_request(m), FrozenPlacement::before_step)), 6 * 0.010);
}

TEST(Frozen, IdleGapsAreTheComplementOfBusyTime) {
  Timeline t;
  t.makespan_s = 0.5;
  t.devices.resize(1);
  t.devices[0].ops.push_back({Op{}, 0.1, 0.2, 0.25});  // a blocking send until 0.25
  t.devices[0].ops.push_back({Op{}, 0.3, 0.4, 0.4});
  const auto gaps = idle_gaps(t);
  ASSERT_EQ(gaps[0].size(), 3u);
  EXPECT_DOUBLE_EQ(gaps[0][0].start_s, 0.0);
  EXPECT_DOUBLE_EQ(gaps[0][0].end_s, 0.1);
  EXPECT_DOUBLE_EQ(gaps[0][1].start_s, 0.25);
  EXPECT_DOUBLE_EQ(gaps[0][1].end_s, 0.3);
  EXPECT_DOUBLE_EQ(gaps[0][2].start_s, 0.4);
  EXPECT_DOUBLE_EQ(gaps[0][2].end_s, 0.5);
}

}  // namespace
}  // namespace pulse
