#include "pulse/profile/derive.hpp"

#include <gtest/gtest.h>

namespace pulse {
namespace {

// Two layers timed on one device type at microbatch 1 and 2.
ModelProfile two_layers(std::vector<std::string> types) {
  ModelProfile m;
  m.name = "two";
  m.file.path = "two.json";
  m.microbatch_sizes = {1, 2};
  m.device_types = std::move(types);
  Layer plain;  // no FLOPs stated: all of its time scales with the peak
  plain.name = "plain";
  Layer heavy;  // 1 TFLOP and 1 GB of saved activations per sample, no parameters
  heavy.name = "heavy";
  heavy.forward_flops_per_sample = 1e12;
  heavy.activation_bytes_per_sample = 1'000'000'000;
  for (std::size_t t = 0; t < m.device_types.size(); ++t) {
    plain.forward_s.push_back({10e-3, 20e-3});
    plain.backward_s.push_back({20e-3, 40e-3});
    heavy.forward_s.push_back({0.1, 0.2});
    heavy.backward_s.push_back({1e-3, 2e-3});
  }
  m.layers = {plain, heavy};
  return m;
}

ClusterProfile cluster_of(std::string type) {
  ClusterProfile c;
  c.file.path = "c.json";
  c.device_type = std::move(type);
  return c;
}

TEST(DeriveTimes, ScalesTheComputeAndTheMemoryShareByTheSpecs) {
  ModelProfile m = two_layers({"V100-SXM2"});
  auto d = derive_device_times(m, cluster_of("H100-SXM"));
  ASSERT_TRUE(d.ok()) << d.error().message;
  ASSERT_TRUE(d->has_value());
  EXPECT_EQ((*d)->from_device_type, "V100-SXM2");
  EXPECT_EQ(m.device_types, (std::vector<std::string>{"V100-SXM2", "H100-SXM"}));
  // plain: x 125 / 989.4 = 0.126339 (no FLOPs: all compute).
  EXPECT_NEAR(m.layers[0].forward_s[1][0], 1.263392e-3, 1e-9);
  EXPECT_NEAR(m.layers[0].backward_s[1][1], 5.053568e-3, 1e-9);
  // heavy at b = 1 on the V100: compute 1e12 / 125e12 = 8 ms, memory 2 x 1 GB / (0.9 x 900
  // GB/s) = 2.469 ms, so 76.415% compute; x (0.76415 x 0.126339 + 0.23585 x 810 / 2847.5)
  // = x 0.163632. The same share at b = 2 (no parameters: both parts grow with b).
  EXPECT_NEAR(m.layers[1].forward_s[1][0], 0.1 * 0.163632, 1e-7);
  EXPECT_NEAR(m.layers[1].forward_s[1][1], 0.2 * 0.163632, 1e-7);
  // Its backward, 1 ms x 0.1636 = 0.16 ms, is below the H100's floor: 2 x 24.4 us x 1256 /
  // 47 ops per layer = 1.304 ms.
  EXPECT_NEAR(m.layers[1].backward_s[1][0], 2 * 24.4e-6 * 1256 / 47, 1e-12);
  EXPECT_NE((*d)->rule.find("V100-SXM2 times x"), std::string::npos) << (*d)->rule;
}

TEST(DeriveTimes, TakesTheNearestListedDevice) {
  // H200 has the H100's peak: nearer than either older device.
  ModelProfile m = two_layers({"V100-SXM2", "H200-SXM", "Ascend-910A"});
  auto d = derive_device_times(m, cluster_of("H100-SXM"));
  ASSERT_TRUE(d.ok() && d->has_value());
  EXPECT_EQ((*d)->from_device_type, "H200-SXM");
  // plain: all compute, the same peak: the same time.
  EXPECT_EQ(m.layers[0].forward_s[3], m.layers[0].forward_s[1]);
}

TEST(DeriveTimes, PrefersTheSameSoftwareStackOverANearerSpec) {
  // By spec the 910A is nearer an H100 (|ln 256/989.4| + |ln 960/2847.5| = 2.44) than the
  // V100 (|ln 125/989.4| + |ln 810/2847.5| = 3.33), but its times are MindSpore's.
  ModelProfile m = two_layers({"Ascend-910A", "V100-SXM2"});
  auto d = derive_device_times(m, cluster_of("H100-SXM"));
  ASSERT_TRUE(d.ok() && d->has_value());
  EXPECT_EQ((*d)->from_device_type, "V100-SXM2");
  ModelProfile n = two_layers({"V100-SXM2", "Ascend-910A"});
  auto e = derive_device_times(n, cluster_of("Ascend-910B"));
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->from_device_type, "Ascend-910A");
}

TEST(DeriveTimes, NothingToDeriveForAListedDeviceOrAnAlias) {
  ModelProfile m = two_layers({"NVIDIA H200"});
  auto d = derive_device_times(m, cluster_of("H200-SXM"));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->has_value());
  EXPECT_EQ(m.device_types.size(), 1u);
  EXPECT_EQ(m.device_type_index("H200-SXM"), 0);
  EXPECT_EQ(m.device_type_index("H100-SXM"), -1);
  EXPECT_TRUE(same_device("Tesla V100-SXM2-32GB", "V100-SXM2"));
  EXPECT_FALSE(same_device("NVIDIA H200", "H100-SXM"));
}

TEST(DeriveTimes, AnExactNameWinsOverAnAlias) {
  ModelProfile m = two_layers({"NVIDIA H200", "H200-SXM"});
  EXPECT_EQ(m.device_type_index("H200-SXM"), 1);
  EXPECT_EQ(m.device_type_index("NVIDIA H200"), 0);
}

TEST(DeriveTimes, WithoutSpecsTheErrorListsTheTypesAndTheWaysOut) {
  ModelProfile cpu = two_layers({"CPU"});
  auto d = derive_device_times(cpu, cluster_of("H100-SXM"));
  ASSERT_FALSE(d.ok());
  const std::string& e = d.error().message;
  EXPECT_NE(e.find("two.json: model profile has times for device types [\"CPU\"], not for "
                   "\"H100-SXM\" (cluster profile c.json), and none of the profile's device "
                   "types has a device spec"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("scripts/profile_torch.py"), std::string::npos) << e;
  EXPECT_NE(e.find("scripts/gen_profiles.py"), std::string::npos) << e;
  EXPECT_NE(e.find("(V100-SXM2, Ascend-910A, H100-SXM, H200-SXM, A100-SXM, Ascend-910B)"),
            std::string::npos)
      << e;
  EXPECT_EQ(cpu.device_types.size(), 1u);  // left as it was

  ModelProfile v100 = two_layers({"V100-SXM2"});
  auto b200 = derive_device_times(v100, cluster_of("B200"));
  ASSERT_FALSE(b200.ok());
  EXPECT_NE(b200.error().message.find("no device spec covers \"B200\""), std::string::npos)
      << b200.error().message;
}

}  // namespace
}  // namespace pulse
