// A model whose weights' state alone overflows every partition at the pp asked for is
// refused at once: the partitioners skip their searches (partition_dp.hpp), and past
// kShortfallSearchMaxLayers the message states the weights' floor instead of searching for
// the most frugal partition.
#include <gtest/gtest.h>

#include "pulse/compile/compile.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

// n layers of 1000 parameters (16 bytes each under mixed-precision Adam: 16 kB a layer).
Result<CompiledPlan> plan_layers(int n, std::int64_t memory_bytes) {
  const ModelProfile model = test::make_model(std::vector<test::LayerSpec>(n), {});
  const ClusterProfile cluster = test::make_cluster(2, 1, memory_bytes);
  PlanOptions o;
  o.pp = 2;
  o.dp = 1;
  return compile_plan(model, cluster, o);
}

TEST(WeightsFloor, PastTheSearchLimitTheMessageStatesTheFloor) {
  // 1100 layers: 17.6 MB of state, at least 8.8 MB on one of 2 devices; 8 MB usable, of
  // which the default headroom (0.95) lets a device fill 7.6 MB.
  const auto p = plan_layers(1100, 8'000'000);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().kind, ErrorKind::infeasible);
  EXPECT_NE(
      p.error().message.find(
          "its weights, gradients and optimizer state alone put at "
          "least 8.4 MiB on the fullest pipeline device of any partition, 1.1 MiB more than the "
          "7.2 MiB a device may fill (--headroom 0.95"),
      std::string::npos)
      << p.error().message;
}

TEST(WeightsFloor, WithinTheLimitTheFrugalPartitionIsSearched) {
  // 100 layers, 1.6 MB of state at least 0.8 MB a device, 0.7 MB usable: the most frugal
  // partition's need, as before the floor.
  const auto p = plan_layers(100, 700'000);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().kind, ErrorKind::infeasible);
  EXPECT_NE(p.error().message.find("even the most memory-frugal partition"), std::string::npos)
      << p.error().message;
  // Room for the weights: planned.
  EXPECT_TRUE(plan_layers(100, 64'000'000).ok());
}

}  // namespace
}  // namespace pulse
