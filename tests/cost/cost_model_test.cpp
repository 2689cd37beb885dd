#include "pulse/cost/cost_model.hpp"

#include <gtest/gtest.h>

namespace pulse {
namespace {

TEST(CostModel, TransferTimeIsLatencyPerMessagePlusBytesOverBandwidth) {
  const LinkClass nvlink{"NVL", 4e10, 8e-6};
  // One message of 4 MB: 8 us + 4e6 / 4e10 s = 8 us + 100 us.
  EXPECT_DOUBLE_EQ(transfer_time(nvlink, 1, 4'000'000), 108e-6);
  // Three messages totalling the same bytes pay the latency three times.
  EXPECT_DOUBLE_EQ(transfer_time(nvlink, 3, 4'000'000), 124e-6);
  // No messages, no bytes: free.
  EXPECT_EQ(transfer_time(nvlink, 0, 0), 0.0);
}

TEST(CostModel, DeviceLoadAddsBlockingSendsAndOverlapsTheOthers) {
  EXPECT_DOUBLE_EQ(device_load(0.3, 0.1, false), 0.4);
  EXPECT_DOUBLE_EQ(device_load(0.3, 0.1, true), 0.3);
  // Overlap does not make a slow link free: the sends pace the device.
  EXPECT_DOUBLE_EQ(device_load(0.3, 0.5, true), 0.5);
}

TEST(CostModel, TimesAreQuantizedToWholeNanoseconds) {
  EXPECT_EQ(kTimeQuantum_s, 1e-9);
  EXPECT_EQ(quantize_time(0.1234567894), 0.123456789);
  EXPECT_EQ(quantize_time(0.1234567896), 0.12345679);
  // Already on the grid: unchanged, so quantizing twice changes nothing.
  EXPECT_EQ(quantize_time(quantize_time(2.0000000015)), quantize_time(2.0000000015));
}

}  // namespace
}  // namespace pulse
