// Buckets files and the model at a bucket's shape (profile/buckets.hpp).

#include "pulse/profile/buckets.hpp"

#include <gtest/gtest.h>

#include <string>

#include "support/test_support.hpp"

namespace pulse {
namespace {

std::string buckets_image_file(const std::string& buckets) {
  return R"({"schema": "pulse.buckets/v1", "name": "t", "source": "test", "share_of": "samples",
             "pixels_per_token": 8, "profile_shape": {"height": 1024, "width": 1024},
             "buckets": )" +
         buckets + "}";
}

TEST(Buckets, TokensFromPixelsAndFrames) {
  auto set = parse_bucket_set(
      buckets_image_file(
          R"([{"height": 1024, "width": 960, "share": 3}, {"tokens": 4096, "share": 1}])"),
      "b.json");
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->profile_tokens, 128 * 128);
  ASSERT_EQ(set->buckets.size(), 2u);
  EXPECT_EQ(set->buckets[0].tokens, 128 * 120);  // 1024 / 8 x 960 / 8
  EXPECT_EQ(set->buckets[0].name, "1024x960");
  EXPECT_DOUBLE_EQ(set->buckets[0].share, 0.75);  // 3 / (3 + 1)
  EXPECT_EQ(set->buckets[1].name, "4096 tokens");
  EXPECT_DOUBLE_EQ(set->ratio(set->buckets[1]), 0.25);
  EXPECT_EQ(set->largest(), 0);

  // Open-Sora 2.0's 129 x 768 x 768: 1 + 128 / 4 = 33 latent frames of 48 x 48 = 76032.
  auto video = parse_bucket_set(
      R"({"schema": "pulse.buckets/v1", "name": "v", "source": "test", "share_of": "steps",
          "pixels_per_token": 16, "frames_per_token": 4, "causal_first_frame": true,
          "profile_shape": {"frames": 129, "height": 768, "width": 768},
          "buckets": [{"frames": 33, "height": 768, "width": 768, "share": 1},
                      {"frames": 1, "height": 256, "width": 256, "share": 1}]})",
      "v.json");
  ASSERT_TRUE(video) << video.error().message;
  EXPECT_EQ(video->profile_tokens, 76032);
  EXPECT_EQ(video->buckets[0].tokens, 9 * 48 * 48);
  EXPECT_EQ(video->buckets[1].tokens, 16 * 16);
  EXPECT_EQ(video->buckets[0].name, "33x768x768");
}

TEST(Buckets, ErrorsNameTheFileAndThePath) {
  auto bad = parse_bucket_set(
      buckets_image_file(R"([{"height": 1004, "width": 1024, "share": 1}])"), "b.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::input);
  EXPECT_NE(bad.error().message.find("b.json: $.buckets[0]: expected height and width divisible "
                                     "by pixels_per_token 8, got 1004 x 1024"),
            std::string::npos)
      << bad.error().message;
  auto share = parse_bucket_set(
      buckets_image_file(R"([{"height": 512, "width": 512, "share": 0}])"), "b.json");
  ASSERT_FALSE(share);
  EXPECT_NE(share.error().message.find("$.buckets[0].share"), std::string::npos)
      << share.error().message;
  auto frames = parse_bucket_set(
      buckets_image_file(R"([{"frames": 8, "height": 512, "width": 512, "share": 1}])"), "b.json");
  ASSERT_FALSE(frames);
  EXPECT_NE(frames.error().message.find("$.buckets[0].frames: expected frames divisible by the "
                                        "file's frames_per_token (not given), got 8"),
            std::string::npos)
      << frames.error().message;
  auto key = parse_bucket_set(buckets_image_file(R"([{"hieght": 512, "width": 512, "share": 1}])"),
                              "b.json");
  ASSERT_FALSE(key);
  EXPECT_NE(key.error().message.find("$.buckets[0]"), std::string::npos);
  auto empty = parse_bucket_set(buckets_image_file("[]"), "b.json");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("$.buckets: expected 1 to 1024 buckets, got 0"),
            std::string::npos)
      << empty.error().message;
}

TEST(Buckets, ShippedSetsLoad) {
  for (const char* name : {"sdxl-aspect-40", "open-sora-2.0-768px-frames"}) {
    auto set = load_bucket_set(test::profile_path(std::string("buckets/") + name + ".json"));
    ASSERT_TRUE(set) << set.error().message;
    EXPECT_GE(set->buckets.size(), 5u);
  }
}

// One layer's times at sizes {1, 2} of 1 and 1.8 ms (backward 2 and 3.6), 100 FLOPs, 1000
// activation and 10 output bytes per sample; a second with half its FLOPs in attention.
ModelProfile buckets_two_layers() {
  ModelProfile m = test::make_model({{0.001, 10, 1000, 10}, {0.001, 10, 1000, 10}}, {{0, 1}}, 50);
  m.microbatch_sizes = {1, 2};
  for (Layer& l : m.layers) {
    l.forward_s = {{0.001, 0.0018}};
    l.backward_s = {{0.002, 0.0036}};
    l.forward_flops_per_sample = 100;
  }
  m.layers[1].sequence = SequenceShape{64, 2, 8, 50};
  return m;
}

TEST(Buckets, ScaleToTokensByHand) {
  ModelProfile m = buckets_two_layers();
  scale_to_tokens(m, 2);
  // Token-wise layer: time(b) = T(2b). T(2) = 1.8 ms; T(4) = 1.8 x 4 / 2 = 3.6 ms (per-sample
  // scaling beyond the largest size).
  EXPECT_DOUBLE_EQ(m.layers[0].forward_s[0][0], 0.0018);
  EXPECT_DOUBLE_EQ(m.layers[0].forward_s[0][1], 0.0036);
  EXPECT_DOUBLE_EQ(m.layers[0].backward_s[0][1], 0.0072);
  // Half attention: 0.5 T(2b) + 0.5 T(4b): b = 1: 0.9 + 1.8 = 2.7 ms; b = 2: 1.8 + 3.6.
  EXPECT_DOUBLE_EQ(m.layers[1].forward_s[0][0], 0.0027);
  EXPECT_DOUBLE_EQ(m.layers[1].forward_s[0][1], 0.0054);
  EXPECT_EQ(m.layers[0].activation_bytes_per_sample, 2000);
  EXPECT_EQ(m.layers[0].output_bytes_per_sample, 20);
  EXPECT_EQ(m.skips[0].bytes_per_sample, 100);
  EXPECT_DOUBLE_EQ(m.layers[0].forward_flops_per_sample, 200);
  EXPECT_DOUBLE_EQ(m.layers[1].forward_flops_per_sample, 300);  // 50 x 2 + 50 x 4
  EXPECT_EQ(m.layers[1].sequence->tokens, 128);
  EXPECT_DOUBLE_EQ(m.layers[1].sequence->attention_flops_per_sample, 200);
  EXPECT_EQ(m.layers[0].params, 10);

  // Half the tokens: T(0.5) = 0.5 ms (per-sample below the smallest size), T(1) = 1 ms.
  ModelProfile half = buckets_two_layers();
  scale_to_tokens(half, 0.5);
  EXPECT_DOUBLE_EQ(half.layers[0].forward_s[0][0], 0.0005);
  EXPECT_DOUBLE_EQ(half.layers[0].forward_s[0][1], 0.001);
  // 0.5 T(0.5) + 0.5 T(0.25) at b = 1.
  EXPECT_DOUBLE_EQ(half.layers[1].forward_s[0][0], 0.5 * 0.0005 + 0.5 * 0.00025);
  EXPECT_EQ(half.layers[0].activation_bytes_per_sample, 500);
}

}  // namespace
}  // namespace pulse
