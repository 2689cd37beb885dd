#include "pulse/profile/scaling.hpp"

#include <gtest/gtest.h>

#include "pulse/cost/cost_model.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

TimeRange range_of(std::string_view line) {
  auto r = parse_time_range(line);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  EXPECT_TRUE(r.ok() && r->has_value()) << line;
  return r.ok() && r->has_value() ? **r : TimeRange{};
}

std::string error_of(std::string_view line) {
  auto r = parse_time_range(line);
  EXPECT_FALSE(r.ok()) << line;
  return r.ok() ? "" : r.error().message;
}

TEST(TimeRange, ReadsTheLineTheProfileGeneratorWrites) {
  // As scripts/profilegen/anchors.py writes it into sd2-unet-512.json.
  const TimeRange r = range_of(
      "time-range Ascend-910A: x0.76 to x1.23 (covers every anchor's bounds for this model "
      "on this device)");
  EXPECT_EQ(r.device_type, "Ascend-910A");
  EXPECT_EQ(r.low, 0.76);
  EXPECT_EQ(r.high, 1.23);
  // Without the reason, and a device name with spaces.
  const TimeRange s = range_of("time-range NVIDIA A100 80GB: x0.5 to x2");
  EXPECT_EQ(s.device_type, "NVIDIA A100 80GB");
  EXPECT_EQ(s.low, 0.5);
  EXPECT_EQ(s.high, 2.0);
}

TEST(TimeRange, OtherLinesAreNoRange) {
  for (const char* line : {"A microbatch of 2 takes 1.8x the time of 1.", "", "time-range",
                           "Time-range V100: x1 to x2"}) {
    auto r = parse_time_range(line);
    ASSERT_TRUE(r.ok()) << line;
    EXPECT_FALSE(r->has_value()) << line;
  }
}

TEST(TimeRange, AMalformedLineSaysWhatWasExpected) {
  EXPECT_NE(error_of("time-range V100: 0.8 to 1.1").find("no \"DEVICE: x\""), std::string::npos);
  EXPECT_NE(error_of("time-range : x0.8 to x1.1").find("no \"DEVICE: x\""), std::string::npos);
  EXPECT_NE(error_of("time-range V100: x0.8 - x1.1").find("no \" to x\""), std::string::npos);
  EXPECT_NE(error_of("time-range V100: x1.2 to x0.8").find("LOW is above HIGH"), std::string::npos);
  for (const char* line :
       {"time-range V100: x0 to x1", "time-range V100: xabc to x1", "time-range V100: x0.8 to x",
        "time-range V100: x-1 to x1", "time-range V100: x0.8 to xinf"}) {
    EXPECT_NE(error_of(line).find("LOW and HIGH must be positive numbers"), std::string::npos)
        << line;
  }
  // The message quotes the line and the form expected.
  EXPECT_EQ(error_of("time-range V100: x1.2 to x0.8"),
            "\"time-range V100: x1.2 to x0.8\": LOW is above HIGH; expected \"time-range "
            "DEVICE: xLOW to xHIGH\" with 0 < LOW <= HIGH");
}

ModelProfile tiny_with(const std::vector<std::string>& lines) {
  ModelProfile m = test::shipped("tiny-unet", "dgx1-v100-32gb-1n").model;
  m.provenance.assumptions = lines;
  return m;
}

TEST(TimeRange, TheProfileStatesOnePerDeviceType) {
  const ModelProfile m =
      tiny_with({"Some assumption.", "time-range V100-SXM2: x0.84 to x1.07 (anchored)",
                 "time-range Ascend-910A: x0.76 to x1.23 (anchored)"});
  auto v100 = stated_time_range(m, "V100-SXM2");
  ASSERT_TRUE(v100.ok()) << v100.error().message;
  EXPECT_EQ(v100->low, 0.84);
  EXPECT_EQ(v100->high, 1.07);
  auto a910 = stated_time_range(m, "Ascend-910A");
  ASSERT_TRUE(a910.ok());
  EXPECT_EQ(a910->low, 0.76);
  EXPECT_EQ(a910->high, 1.23);
}

TEST(TimeRange, NoneTwoOrAMalformedOneIsAnInputErrorNamingTheFileAndLine) {
  const ModelProfile none = tiny_with({"time-range V100-SXM2: x0.84 to x1.07"});
  auto r = stated_time_range(none, "Ascend-910A");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  EXPECT_EQ(r.error().message,
            none.file.path +
                ": model tiny-unet states no time range for Ascend-910A (a "
                "provenance.assumptions line \"time-range Ascend-910A: xLOW to xHIGH\")");

  const ModelProfile two = tiny_with(
      {"time-range V100-SXM2: x0.84 to x1.07", "Other.", "time-range V100-SXM2: x0.9 to x1.1"});
  r = stated_time_range(two, "V100-SXM2");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, two.file.path +
                                   ": $.provenance.assumptions[2]: a second time range for "
                                   "V100-SXM2 (the first is assumptions[0])");

  // A malformed range is an error even when it is for another device type.
  const ModelProfile bad =
      tiny_with({"time-range Ascend-910A: x2 to x1", "time-range V100-SXM2: x0.84 to x1.07"});
  r = stated_time_range(bad, "V100-SXM2");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(bad.file.path + ": $.provenance.assumptions[0]: "),
            std::string::npos)
      << r.error().message;
}

TEST(ComputeScale, ANumberOrAnEndOfTheRange) {
  auto two = parse_compute_scale("2");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->compute, 2.0);
  EXPECT_EQ(two->compute_from, "");
  auto small = parse_compute_scale("0.125");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->compute, 0.125);

  const ModelProfile m = tiny_with({"time-range V100-SXM2: x0.84 to x1.07"});
  for (const auto& [word, want] : {std::pair{"range-low", 0.84}, std::pair{"range-high", 1.07}}) {
    auto s = parse_compute_scale(word);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->compute_from, word);
    ASSERT_TRUE(resolve_compute_scale(*s, m, "V100-SXM2").ok());
    EXPECT_EQ(s->compute, want);
    EXPECT_FALSE(s->identity());
  }
  // A number needs no range.
  CostScales plain = *two;
  ASSERT_TRUE(resolve_compute_scale(plain, tiny_with({}), "V100-SXM2").ok());
  EXPECT_EQ(plain.compute, 2.0);
}

TEST(ComputeScale, BadValuesAreUsageErrorsNamingTheOption) {
  for (const char* text : {"0", "-1", "abc", "nan", "inf", "-inf", "1e400", "", "2x", " 2", "+2",
                           "range", "range-middle"}) {
    auto s = parse_compute_scale(text, "--compute-scale");
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.error().kind, ErrorKind::usage);
    EXPECT_EQ(s.error().message,
              std::string("--compute-scale must be a positive, finite number, range-low or "
                          "range-high, got \"") +
                  text + "\"");
    EXPECT_FALSE(parse_scale(text).has_value()) << text;
  }
  // Tiny and huge positive numbers are numbers.
  EXPECT_EQ(parse_scale("1e-300"), 1e-300);
  EXPECT_EQ(parse_scale("1e300"), 1e300);

  CostScales low = *parse_compute_scale("range-low");
  auto resolved = resolve_compute_scale(low, tiny_with({}), "V100-SXM2");
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.error().kind, ErrorKind::input);
  EXPECT_EQ(resolved.error().message.rfind("--compute-scale range-low: ", 0), 0u)
      << resolved.error().message;
}

TEST(ScaleTimes, EveryTimeOfTheDeviceTypeAndNoOther) {
  // tiny-unet's embed layer: 1 ms forward and 2 ms backward at microbatch 1, 1.8 and 3.6 ms
  // at 2, on both device types; x2.5 on the 910A: 2.5, 5, 4.5 and 9 ms.
  const ModelProfile before = tiny_with({});
  ModelProfile m = before;
  const int v100 = m.device_type_index("V100-SXM2"), a910 = m.device_type_index("Ascend-910A");
  ASSERT_GE(v100, 0);
  ASSERT_GE(a910, 0);
  ASSERT_EQ(before.layers[0].forward_s[a910], (std::vector<double>{0.001, 0.0018}));
  ASSERT_EQ(before.layers[0].backward_s[a910], (std::vector<double>{0.002, 0.0036}));
  scale_times(m, "Ascend-910A", 2.5);
  EXPECT_DOUBLE_EQ(m.layers[0].forward_s[a910][0], 0.0025);
  EXPECT_DOUBLE_EQ(m.layers[0].forward_s[a910][1], 0.0045);
  EXPECT_DOUBLE_EQ(m.layers[0].backward_s[a910][0], 0.005);
  EXPECT_DOUBLE_EQ(m.layers[0].backward_s[a910][1], 0.009);
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const Layer &l = m.layers[i], &was = before.layers[i];
    for (std::size_t k = 0; k < was.forward_s[a910].size(); ++k) {
      EXPECT_EQ(l.forward_s[a910][k], 2.5 * was.forward_s[a910][k]) << l.name;
      EXPECT_EQ(l.backward_s[a910][k], 2.5 * was.backward_s[a910][k]) << l.name;
    }
    // The other device type, bytes and parameters stay as they are.
    EXPECT_EQ(l.forward_s[v100], was.forward_s[v100]) << l.name;
    EXPECT_EQ(l.backward_s[v100], was.backward_s[v100]) << l.name;
    EXPECT_EQ(l.params, was.params);
    EXPECT_EQ(l.activation_bytes_per_sample, was.activation_bytes_per_sample);
  }
  // A device type the model lacks changes nothing.
  ModelProfile same = before;
  scale_times(same, "CPU", 3);
  for (std::size_t i = 0; i < same.layers.size(); ++i) {
    EXPECT_EQ(same.layers[i].forward_s, before.layers[i].forward_s);
  }
}

TEST(ScaleLinks, EveryTransferTimeDividedByTheFactor) {
  // Links "L" (1 GB/s, 10 us) within a node and "N" (0.25 GB/s, 40 us) between nodes.
  ClusterProfile c = test::make_cluster(2, 2, 1 << 30, /*bandwidth=*/1e9, /*latency=*/1e-5);
  // 2 messages of 1 MB in all: 2 x 10 us + 1e6 / 1e9 s = 1.02 ms on L, 2 x 40 us + 4 ms on N.
  EXPECT_DOUBLE_EQ(transfer_time(c.link(0, 1), 2, 1000000), 1.02e-3);
  EXPECT_DOUBLE_EQ(transfer_time(c.link(0, 2), 2, 1000000), 4.08e-3);
  scale_links(c, 4);
  EXPECT_DOUBLE_EQ(c.link_classes[0].bandwidth_bytes_per_s, 4e9);
  EXPECT_DOUBLE_EQ(c.link_classes[0].latency_s, 2.5e-6);
  EXPECT_DOUBLE_EQ(c.link_classes[1].bandwidth_bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(c.link_classes[1].latency_s, 1e-5);
  // A quarter of each: 2 x 2.5 us + 1e6 / 4e9 s = 0.255 ms; 2 x 10 us + 1 ms = 1.02 ms.
  EXPECT_DOUBLE_EQ(transfer_time(c.link(0, 1), 2, 1000000), 0.255e-3);
  EXPECT_DOUBLE_EQ(transfer_time(c.link(0, 2), 2, 1000000), 1.02e-3);
}

TEST(ApplyScales, TheIdentityChangesNothingAndTheFilesStayNamed) {
  const test::Inputs in = test::shipped("tiny-unet", "dgx1-v100-32gb-1n");
  test::Inputs copy = in;
  apply_scales({}, copy.model, copy.cluster);
  EXPECT_EQ(copy.model.layers[3].forward_s, in.model.layers[3].forward_s);
  EXPECT_EQ(copy.cluster.link_classes[0].bandwidth_bytes_per_s,
            in.cluster.link_classes[0].bandwidth_bytes_per_s);
  apply_scales({3, 2, ""}, copy.model, copy.cluster);
  EXPECT_DOUBLE_EQ(copy.model.layers[3].forward_s[0][0], 3 * in.model.layers[3].forward_s[0][0]);
  EXPECT_DOUBLE_EQ(copy.cluster.link_classes[0].latency_s,
                   in.cluster.link_classes[0].latency_s / 2);
  EXPECT_EQ(copy.model.file.sha256, in.model.file.sha256);
  EXPECT_EQ(copy.cluster.file.sha256, in.cluster.file.sha256);
  EXPECT_TRUE(CostScales{}.identity());
  EXPECT_FALSE((CostScales{1, 1, "range-low"}.identity()));
}

}  // namespace
}  // namespace pulse
