// The model profile's `frozen[]` (docs/frozen.md): read as written, every rejection naming
// the file, the JSON path and the component, and the shipped profiles carrying theirs.
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pulse/profile/profile.hpp"

namespace pulse {
namespace {

using nlohmann::json;

const char* const kFrozenModel = R"({
  "schema": "pulse.model/v1",
  "name": "mini",
  "provenance": {"method": "hand-written", "source": "unit test"},
  "timing": {"microbatch_sizes": [1, 2], "device_types": ["GPU"]},
  "layers": [
    {"name": "enc", "params": 100, "forward_s": {"GPU": [0.001, 0.002]},
     "backward_s": {"GPU": [0.002, 0.004]}, "activation_bytes_per_sample": 4096,
     "output_bytes_per_sample": 1024},
    {"name": "dec", "params": 100, "forward_s": {"GPU": [0.001, 0.002]},
     "backward_s": {"GPU": [0.002, 0.004]}, "activation_bytes_per_sample": 4096,
     "output_bytes_per_sample": 1024}
  ],
  "skips": [],
  "frozen": [
    {"name": "vae", "kind": "vae_encoder", "params": 50, "weight_bytes": 100,
     "forward_s": {"GPU": [0.004, 0.006]}, "activation_bytes_per_sample": 300,
     "output_bytes_per_sample": 64, "forward_flops_per_sample": 1e6, "source": "by hand"}
  ]
})";

std::string frozen_error(void (*mutate)(json&)) {
  json j = json::parse(kFrozenModel);
  mutate(j);
  auto r = parse_model_profile(j.dump(2), "m.json");
  if (r.ok()) return "<loaded without error>";
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  return r.error().message;
}

TEST(FrozenLoader, ComponentsAreReadAsWritten) {
  auto r = parse_model_profile(kFrozenModel, "m.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->frozen.size(), 1u);
  const FrozenComponent& c = r->frozen[0];
  EXPECT_EQ(c.name, "vae");
  EXPECT_EQ(c.kind, "vae_encoder");
  EXPECT_EQ(c.params, 50);
  EXPECT_EQ(c.weight_bytes, 100);
  ASSERT_EQ(c.forward_s.size(), 1u);
  EXPECT_EQ(c.forward_s[0], (std::vector<double>{0.004, 0.006}));
  EXPECT_EQ(c.activation_bytes_per_sample, 300);
  EXPECT_EQ(c.output_bytes_per_sample, 64);
  EXPECT_EQ(c.forward_flops_per_sample, 1e6);
  EXPECT_EQ(c.source, "by hand");
}

TEST(FrozenLoader, AbsentMeansNone) {
  json j = json::parse(kFrozenModel);
  j.erase("frozen");
  auto r = parse_model_profile(j.dump(), "m.json");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->frozen.empty());
}

TEST(FrozenLoader, ErrorsNameTheFilePathAndComponent) {
  EXPECT_EQ(frozen_error([](json& j) { j["frozen"][0]["kind"] = "unet"; }),
            "m.json: $.frozen[0].kind (frozen component \"vae\"): expected \"vae_encoder\", "
            "\"text_encoder\" or \"image_encoder\", got \"unet\"");
  EXPECT_EQ(frozen_error([](json& j) { j["frozen"][0]["forward_s"]["GPU"] = {0.1}; }),
            "m.json: $.frozen[0].forward_s.GPU (frozen component \"vae\"): expected an array of "
            "2 times, one per $.timing.microbatch_sizes entry, got an array of 1");
  EXPECT_EQ(frozen_error([](json& j) { j["frozen"][0].erase("weight_bytes"); }),
            "m.json: $.frozen[0] (frozen component \"vae\"): missing required key "
            "\"weight_bytes\"");
  EXPECT_EQ(frozen_error([](json& j) { j["frozen"][0]["output_bytes_per_sample"] = 0; }),
            "m.json: $.frozen[0].output_bytes_per_sample (frozen component \"vae\"): expected an "
            "integer >= 1, got 0");
  EXPECT_EQ(frozen_error([](json& j) { j["frozen"].push_back(j["frozen"][0]); }),
            "m.json: $.frozen[1].name: duplicate frozen component \"vae\" (first at $.frozen[0])");
  EXPECT_EQ(frozen_error([](json& j) { j["frozen"] = json::object(); }),
            "m.json: $.frozen: expected an array, got an object");
}

TEST(FrozenLoader, ShippedModelsCarryTheirEncoders) {
  const std::string root = PULSE_SOURCE_DIR;
  struct Expect {
    const char* file;
    std::vector<std::string> names;
  };
  const Expect expected[] = {
      {"sd2-unet-512", {"vae_encoder", "text_encoder"}},
      {"sdxl-unet-1024", {"vae_encoder", "text_encoder", "text_encoder_2"}},
      {"flux1-dev-1024", {"vae_encoder", "text_encoder", "text_encoder_2"}},
      {"hunyuan-dit-g2-1024", {"vae_encoder", "text_encoder", "text_encoder_2"}},
  };
  for (const Expect& e : expected) {
    auto m = load_model_profile(root + "/profiles/models/" + e.file + ".json");
    ASSERT_TRUE(m.ok()) << m.error().message;
    std::vector<std::string> names;
    for (const FrozenComponent& c : m->frozen) {
      names.push_back(c.name);
      EXPECT_EQ(c.forward_s.size(), m->device_types.size()) << e.file << " " << c.name;
      EXPECT_EQ(c.weight_bytes, 2 * c.params) << e.file << " " << c.name;
    }
    EXPECT_EQ(names, e.names) << e.file;
  }
}

}  // namespace
}  // namespace pulse
