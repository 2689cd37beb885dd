// Model profile loader: every rejection names the file and the JSON path (and the layer's
// name where there is one) and says what was expected. Each bad-input test starts from a
// small valid profile, changes one thing, and asserts the exact message, so a change in
// wording is a deliberate, reviewed change.
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "pulse/base/io.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {
namespace {

using nlohmann::json;

// A valid three-layer profile: enc -> mid -> dec, one skip enc -> dec, one device type.
// Names are long enough that did-you-mean suggestions are unambiguous.
const char* const kMinimalModel = R"({
  "schema": "pulse.model/v1",
  "name": "mini",
  "provenance": {"method": "hand-written", "source": "unit test"},
  "timing": {"microbatch_sizes": [1, 2], "device_types": ["GPU"]},
  "layers": [
    {"name": "enc", "kind": "conv", "params": 100,
     "forward_s": {"GPU": [0.001, 0.002]}, "backward_s": {"GPU": [0.002, 0.004]},
     "activation_bytes_per_sample": 4096, "output_bytes_per_sample": 1024},
    {"name": "mid", "kind": "attention", "params": 200,
     "forward_s": {"GPU": [0.003, 0.006]}, "backward_s": {"GPU": [0.006, 0.012]},
     "activation_bytes_per_sample": 4096, "output_bytes_per_sample": 1024},
    {"name": "dec", "kind": "conv", "params": 300,
     "forward_s": {"GPU": [0.001, 0.002]}, "backward_s": {"GPU": [0.002, 0.004]},
     "activation_bytes_per_sample": 4096, "output_bytes_per_sample": 1024}
  ],
  "skips": [{"producer": "enc", "consumer": "dec", "bytes_per_sample": 1024}]
})";

// The minimal profile after `mutate`, as JSON text.
std::string model_with(const std::function<void(json&)>& mutate) {
  json j = json::parse(kMinimalModel);
  mutate(j);
  return j.dump(2);
}

// The full error message for `text`, or a marker that makes the EXPECT_EQ fail readably.
std::string model_error(const std::string& text) {
  auto r = parse_model_profile(text, "m.json");
  if (r.ok()) return "<loaded without error>";
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  return r.error().message;
}

std::string mutated_model_error(const std::function<void(json&)>& mutate) {
  return model_error(model_with(mutate));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kRoot = PULSE_SOURCE_DIR;

// --- The baseline itself --------------------------------------------------------------

TEST(ModelLoader, MinimalProfileLoads) {
  auto r = parse_model_profile(kMinimalModel, "dir/m.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelProfile& m = *r;
  EXPECT_EQ(m.name, "mini");
  EXPECT_EQ(m.file.path, "dir/m.json");
  EXPECT_EQ(m.file.name, "m.json");
  EXPECT_EQ(m.file.sha256, sha256_hex(kMinimalModel));
  EXPECT_EQ(m.provenance.method, "hand-written");
  EXPECT_EQ(m.microbatch_sizes, (std::vector<int>{1, 2}));
  EXPECT_EQ(m.device_types, (std::vector<std::string>{"GPU"}));
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[1].name, "mid");
  EXPECT_EQ(m.layers[1].params, 200);
  EXPECT_EQ(m.layers[1].forward_s, (std::vector<std::vector<double>>{{0.003, 0.006}}));
  EXPECT_EQ(m.layers[1].backward_s, (std::vector<std::vector<double>>{{0.006, 0.012}}));
  EXPECT_DOUBLE_EQ(m.layers[1].backward_weight_fraction, 0.5);  // the documented default
  EXPECT_EQ(m.total_params(), 600);
  ASSERT_EQ(m.skips.size(), 1u);
  EXPECT_EQ(m.skips[0].name, "enc->dec");  // default name: producer->consumer
  EXPECT_EQ(m.skips[0].producer, 0);
  EXPECT_EQ(m.skips[0].consumer, 2);
  EXPECT_TRUE(m.carried.empty());
}

TEST(ModelLoader, IntegralFloatsAreAcceptedAsIntegers) {
  // Generators write 1e6 or 4.0 for integers; the loader accepts integral floats.
  auto r =
      parse_model_profile(model_with([](json& j) { j["layers"][0]["params"] = 1e6; }), "m.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->layers[0].params, 1000000);
}

TEST(ModelLoader, CarriedTensorsResolveTheirProducer) {
  auto r = parse_model_profile(model_with([](json& j) {
                                 j["carried"] = json::parse(R"([
        {"name": "temb", "producer": "mid", "bytes_per_sample": 2560, "needs_gradient": true},
        {"name": "text", "producer": null, "bytes_per_sample": 8, "needs_gradient": false}])");
                               }),
                               "m.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->carried.size(), 2u);
  EXPECT_EQ(r->carried[0].producer, 1);
  EXPECT_TRUE(r->carried[0].needs_gradient);
  EXPECT_EQ(r->carried[1].producer, -1);  // null: comes with the input batch
  EXPECT_EQ(r->carried[1].bytes_per_sample, 8);
}

TEST(ModelLoader, SequenceShapesAreRead) {
  auto r = parse_model_profile(model_with([](json& j) {
                                 j["layers"][1]["forward_flops_per_sample"] = 1000;
                                 j["layers"][1]["sequence"] = json::parse(R"({"tokens": 4096,
        "heads": 24, "head_dim": 128, "attention_flops_per_sample": 600})");
                               }),
                               "m.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->layers[0].sequence);  // absent: not split
  ASSERT_TRUE(r->layers[1].sequence);
  EXPECT_EQ(*r->layers[1].sequence, (SequenceShape{4096, 24, 128, 600}));
}

TEST(ModelLoader, SequenceShapesAreChecked) {
  auto with = [](const char* sequence, double flops) {
    return mutated_model_error([&](json& j) {
      j["layers"][1]["forward_flops_per_sample"] = flops;
      j["layers"][1]["sequence"] = json::parse(sequence);
    });
  };
  EXPECT_EQ(
      with(R"({"tokens": 0, "heads": 1, "head_dim": 8, "attention_flops_per_sample": 0})", 10),
      "m.json: $.layers[1].sequence.tokens (layer \"mid\"): expected an integer >= 1, got 0");
  EXPECT_EQ(
      with(R"({"tokens": 8, "heads": 2, "head_dim": 0, "attention_flops_per_sample": 0})", 10),
      "m.json: $.layers[1].sequence (layer \"mid\"): expected heads and head_dim both 0 (no "
      "attention) or both positive with heads x head_dim at most 1048576, got 2 and 0");
  EXPECT_EQ(
      with(R"({"tokens": 8, "heads": 2, "head_dim": 4, "attention_flops_per_sample": 11})", 10),
      "m.json: $.layers[1].sequence.attention_flops_per_sample (layer \"mid\"): expected at "
      "most the layer's forward_flops_per_sample (10) and 0 without heads, got 11");
  EXPECT_NE(with(R"({"tokens": 8, "heads": 2, "head_dim": 4, "flops": 1})", 10)
                .find("$.layers[1].sequence"),
            std::string::npos);
}

// --- Malformed JSON and the document's shape ----------------------------------------

TEST(ModelLoader, MalformedJsonGivesLineAndColumn) {
  // Line 3 is `  "name": ,`: the ',' at column 11 is where a value was expected.
  const std::string text = "{\n  \"schema\": \"pulse.model/v1\",\n  \"name\": ,\n}\n";
  EXPECT_EQ(model_error(text),
            "m.json:3:11: malformed JSON: syntax error while parsing value - unexpected ','; "
            "expected '[', '{', or a literal");
}

TEST(ModelLoader, MalformedJsonTruncatedFile) {
  EXPECT_EQ(model_error("{\n  \"schema\": \"pulse.model/v1\""),
            "m.json:2:29: malformed JSON: syntax error while parsing object - unexpected end of "
            "input; expected '}'");
}

TEST(ModelLoader, MalformedJsonBadLiteral) {
  // nlohmann's own location prefix is dropped and its description kept whole, even when the
  // offending token itself contains ": ".
  EXPECT_EQ(model_error("{\"schema\": tru}"),
            "m.json:1:15: malformed JSON: syntax error while parsing value - invalid literal; "
            "last read: '\"schema\": tru}'");
  EXPECT_EQ(model_error("{\"name\": \"a: b"),
            "m.json:1:15: malformed JSON: syntax error while parsing value - invalid string: "
            "missing closing quote; last read: '\"a: b'");
}

TEST(ModelLoader, EmptyFile) {
  EXPECT_EQ(model_error(""),
            "m.json:1:1: malformed JSON: syntax error while parsing value - unexpected end of "
            "input; expected '[', '{', or a literal");
}

TEST(ModelLoader, RootNotAnObject) {
  EXPECT_EQ(model_error("[1, 2]"), "m.json: $: expected an object, got an array of 2");
}

TEST(ModelLoader, WrongSchemaTag) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["schema"] = "pulse.model/v2"; }),
            "m.json: $.schema: expected \"pulse.model/v1\" (the version this pulse-plan reads), "
            "got a string \"pulse.model/v2\"");
}

TEST(ModelLoader, ClusterProfileGivenAsModel) {
  // Most likely --model and --cluster were swapped: one line saying so, nothing else.
  EXPECT_EQ(mutated_model_error([](json& j) { j["schema"] = "pulse.cluster/v1"; }),
            "m.json: $.schema: this is a cluster profile (\"pulse.cluster/v1\"), expected "
            "\"pulse.model/v1\"; pass it with --cluster");
}

TEST(ModelLoader, MissingRequiredTopLevelKey) {
  EXPECT_EQ(mutated_model_error([](json& j) { j.erase("name"); }),
            "m.json: $: missing required key \"name\"");
  EXPECT_EQ(mutated_model_error([](json& j) { j.erase("schema"); }),
            "m.json: $: missing required key \"schema\"");
  EXPECT_EQ(mutated_model_error([](json& j) { j["provenance"].erase("source"); }),
            "m.json: $.provenance: missing required key \"source\"");
}

TEST(ModelLoader, MissingRequiredLayerKeyNamesTheLayer) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][1].erase("params"); }),
            "m.json: $.layers[1] (layer \"mid\"): missing required key \"params\"");
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][2].erase("backward_s"); }),
            "m.json: $.layers[2] (layer \"dec\"): missing required key \"backward_s\"");
}

TEST(ModelLoader, WrongTypes) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["name"] = 5; }),
            "m.json: $.name: expected a non-empty string, got 5");
  EXPECT_EQ(mutated_model_error([](json& j) { j["name"] = ""; }),
            "m.json: $.name: expected a non-empty string, got a string \"\"");
  EXPECT_EQ(mutated_model_error([](json& j) { j["skips"] = json::object(); }),
            "m.json: $.skips: expected an array, got an object");
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][0]["params"] = "100"; }),
            "m.json: $.layers[0].params (layer \"enc\"): expected an integer >= 0, got a string "
            "\"100\"");
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][0]["forward_s"] = json::array(); }),
            "m.json: $.layers[0].forward_s (layer \"enc\"): expected an object of device type "
            "-> times, got an array of 0");
  EXPECT_EQ(mutated_model_error([](json& j) { j["provenance"]["method"] = "guessed"; }),
            "m.json: $.provenance.method: expected \"analytic\", \"measured\" or "
            "\"hand-written\", got \"guessed\"");
}

TEST(ModelLoader, UnknownKeyWithDidYouMean) {
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["skip"] = j["skips"];
              j.erase("skips");
            }),
            "m.json: $.skip: unknown key; did you mean \"skips\"?\n"
            "m.json: $: missing required key \"skips\"");
  // Inside a layer the message names the layer too.
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["layers"][0]["forwards"] = j["layers"][0]["forward_s"];
              j["layers"][0].erase("forward_s");
            }),
            "m.json: $.layers[0].forwards (layer \"enc\"): unknown key; did you mean "
            "\"forward_s\"?\n"
            "m.json: $.layers[0] (layer \"enc\"): missing required key \"forward_s\"");
}

TEST(ModelLoader, UnknownKeyWithoutCloseMatchListsAllowedKeys) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["timing"]["resolution"] = 512; }),
            "m.json: $.timing.resolution: unknown key (allowed here: microbatch_sizes, "
            "device_types, device_specs)");
}

// --- Numbers ------------------------------------------------------------------------

TEST(ModelLoader, TimesMustBeFiniteAndPositive) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][0]["forward_s"]["GPU"][0] = 0; }),
            "m.json: $.layers[0].forward_s.GPU[0] (layer \"enc\"): expected a finite number > 0, "
            "got 0");
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][1]["backward_s"]["GPU"][1] = -0.5; }),
            "m.json: $.layers[1].backward_s.GPU[1] (layer \"mid\"): expected a finite number > "
            "0, got -0.5");
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][0]["forward_s"]["GPU"][1] = "fast"; }),
            "m.json: $.layers[0].forward_s.GPU[1] (layer \"enc\"): expected a finite number > 0, "
            "got a string \"fast\"");
}

TEST(ModelLoader, FlopsAndDeviceRatesHaveLimits) {
  // Times derived from them (profile/derive.hpp) stay finite: 1e300 FLOPs at microbatch 2
  // would overflow the compute time to inf, and the compute share to inf / inf = NaN.
  EXPECT_EQ(
      mutated_model_error([](json& j) { j["layers"][1]["forward_flops_per_sample"] = 1e300; }),
      "m.json: $.layers[1].forward_flops_per_sample (layer \"mid\"): expected a number "
      "<= 1e+18 (pulse-plan's limit), got 1e+300");
  EXPECT_TRUE(parse_model_profile(
                  model_with([](json& j) { j["layers"][1]["forward_flops_per_sample"] = 1e18; }),
                  "m.json")
                  .ok());  // the limit itself loads
}

// A number too large for a double (1e999) makes nlohmann throw out_of_range, not a parse
// error; it is still an input error, located at the token.
TEST(ModelLoader, NumberOverflowIsAnInputError) {
  std::string text = model_with([](json& j) { j["layers"][0]["forward_s"]["GPU"][0] = 12345; });
  text.replace(text.find("12345"), 5, "1e999");
  std::optional<Result<ModelProfile>> r;
  ASSERT_NO_THROW(r.emplace(parse_model_profile(text, "m.json")));
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->error().kind, ErrorKind::input);
  const std::size_t line = 1 + std::count(text.begin(), text.begin() + text.find("1e999"), '\n');
  const std::size_t column = text.find("1e999") - text.rfind('\n', text.find("1e999"));
  EXPECT_EQ(r->error().message, "m.json:" + std::to_string(line) + ":" + std::to_string(column) +
                                    ": number 1e999 is out of range for a double");
}

TEST(ModelLoader, NegativeIntegers) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][2]["params"] = -1; }),
            "m.json: $.layers[2].params (layer \"dec\"): expected an integer >= 0, got -1");
  EXPECT_EQ(
      mutated_model_error([](json& j) { j["layers"][0]["activation_bytes_per_sample"] = -4096; }),
      "m.json: $.layers[0].activation_bytes_per_sample (layer \"enc\"): expected an integer >= "
      "0, got -4096");
  EXPECT_EQ(mutated_model_error([](json& j) { j["skips"][0]["bytes_per_sample"] = 0; }),
            "m.json: $.skips[0].bytes_per_sample: expected an integer >= 1, got 0");
}

// Beyond pulse/base/limits.hpp a byte sum could overflow (9.2e18 activation bytes once
// "fit" a 32 GB device) or a time be absurd: refused, each with its path.
TEST(ModelLoader, FieldsWithinLimits) {
  EXPECT_EQ(
      mutated_model_error([](json& j) { j["layers"][0]["activation_bytes_per_sample"] = 9.2e18; }),
      "m.json: $.layers[0].activation_bytes_per_sample (layer \"enc\"): expected an integer >= "
      "0, got 9.2e+18");
  EXPECT_EQ(mutated_model_error(
                [](json& j) { j["layers"][0]["output_bytes_per_sample"] = (1LL << 40) + 1; }),
            "m.json: $.layers[0].output_bytes_per_sample (layer \"enc\"): expected an integer <= "
            "1099511627776 (pulse-plan's limit), got 1099511627777");
  EXPECT_EQ(
      mutated_model_error([](json& j) { j["layers"][0]["output_bytes_per_sample"] = 1LL << 40; }),
      "<loaded without error>");
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][2]["params"] = 1LL << 62; }),
            "m.json: $.layers[2].params (layer \"dec\"): expected an integer <= 1099511627776 "
            "(pulse-plan's limit), got 4611686018427387904");
  EXPECT_EQ(mutated_model_error([](json& j) { j["skips"][0]["bytes_per_sample"] = 1LL << 41; }),
            "m.json: $.skips[0].bytes_per_sample: expected an integer <= 1099511627776 "
            "(pulse-plan's limit), got 2199023255552");
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][1]["forward_s"]["GPU"][0] = 3601; }),
            "m.json: $.layers[1].forward_s.GPU[0] (layer \"mid\"): expected a number <= 3600 "
            "(pulse-plan's limit), got 3601");
}

// A model beyond the layer limit gets one line, not one per skip naming a layer not read.
TEST(ModelLoader, LayerLimit) {
  const std::string message = mutated_model_error([](json& j) {
    json layers = json::array();
    for (int i = 0; i < 4097; ++i) {
      json l = j["layers"][0];
      std::string name = "l";
      name += std::to_string(i);
      l["name"] = name;
      layers.push_back(l);
    }
    j["layers"] = layers;
  });
  EXPECT_EQ(message,
            "m.json: $.layers: expected at most 4096 layers (pulse-plan's limit: "
            "docs/limits.md), got 4097");
}

TEST(ModelLoader, ParamsMustBeAnInteger) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][1]["params"] = 1.5; }),
            "m.json: $.layers[1].params (layer \"mid\"): expected an integer >= 0, got 1.5");
}

TEST(ModelLoader, BackwardWeightFractionRange) {
  // Both ends of the open interval get the same wording.
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][0]["backward_weight_fraction"] = 1; }),
            "m.json: $.layers[0].backward_weight_fraction (layer \"enc\"): expected a number "
            "strictly between 0 and 1, got 1");
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][0]["backward_weight_fraction"] = 0; }),
            "m.json: $.layers[0].backward_weight_fraction (layer \"enc\"): expected a number "
            "strictly between 0 and 1, got 0");
}

// --- Timing and per-layer times -------------------------------------------------------

TEST(ModelLoader, TimesArrayOfTheWrongLength) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][1]["forward_s"]["GPU"] = {0.003}; }),
            "m.json: $.layers[1].forward_s.GPU (layer \"mid\"): expected an array of 2 times, "
            "one per $.timing.microbatch_sizes entry, got an array of 1");
}

TEST(ModelLoader, DeviceTypeMissingFromALayer) {
  // Two device types; every layer has both except layer 2's backward_s.
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["timing"]["device_types"] = {"GPU", "NPU"};
              for (auto& layer : j["layers"]) {
                layer["forward_s"]["NPU"] = layer["forward_s"]["GPU"];
                layer["backward_s"]["NPU"] = layer["backward_s"]["GPU"];
              }
              j["layers"][2]["backward_s"].erase("NPU");
            }),
            "m.json: $.layers[2].backward_s (layer \"dec\"): missing times for device type "
            "\"NPU\"");
}

TEST(ModelLoader, DeviceTypeNotListedInTiming) {
  // A type in a layer's times that $.timing.device_types does not list. The key is not an
  // identifier, so the path quotes it.
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["layers"][0]["forward_s"]["V100-SXM2"] = {0.001, 0.002};
            }),
            "m.json: $.layers[0].forward_s[\"V100-SXM2\"] (layer \"enc\"): device type not listed "
            "in $.timing.device_types");
}

TEST(ModelLoader, MisspelledDeviceTypeInALayer) {
  // A typo gives one line with a suggestion (not also "missing times for GPU").
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["layers"][0]["forward_s"]["GPu"] = j["layers"][0]["forward_s"]["GPU"];
              j["layers"][0]["forward_s"].erase("GPU");
            }),
            "m.json: $.layers[0].forward_s.GPu (layer \"enc\"): device type not listed in "
            "$.timing.device_types; did you mean \"GPU\"?");
}

TEST(ModelLoader, DuplicateDeviceType) {
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["timing"]["device_types"] = {"GPU", "GPU"};
            }),
            "m.json: $.timing.device_types[1]: duplicate device type \"GPU\"");
}

TEST(ModelLoader, MicrobatchSizesStrictlyIncreasing) {
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["timing"]["microbatch_sizes"] = {2, 1};
            }),
            "m.json: $.timing.microbatch_sizes[1]: microbatch sizes must be strictly increasing, "
            "got 1 after 2");
  // Equal sizes are not increasing either (times arrays lengthened to match).
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["timing"]["microbatch_sizes"] = {1, 2, 2};
              for (auto& layer : j["layers"]) {
                layer["forward_s"]["GPU"].push_back(0.01);
                layer["backward_s"]["GPU"].push_back(0.02);
              }
            }),
            "m.json: $.timing.microbatch_sizes[2]: microbatch sizes must be strictly increasing, "
            "got 2 after 2");
}

TEST(ModelLoader, MicrobatchSizesEmpty) {
  // With no sizes the per-layer times are not checked (that error suffices).
  EXPECT_EQ(mutated_model_error([](json& j) { j["timing"]["microbatch_sizes"] = json::array(); }),
            "m.json: $.timing.microbatch_sizes: expected at least one microbatch size");
}

TEST(ModelLoader, BadMicrobatchSizeIsReportedOnce) {
  // With a broken size list the per-layer time arrays are not checked against it: the one
  // real error is the only line.
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["timing"]["microbatch_sizes"] = {0, 2};
            }),
            "m.json: $.timing.microbatch_sizes[0]: expected an integer from 1 to 1048576, got 0");
}

TEST(ModelLoader, MicrobatchSizeAboveTheLimit) {
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["timing"]["microbatch_sizes"] = {1, 2000000};
            }),
            "m.json: $.timing.microbatch_sizes[1]: expected an integer from 1 to 1048576, got "
            "2000000");
}

TEST(ModelLoader, MicrobatchSizeWrittenAsIntegralFloat) {
  // As for params (1e6), an integral float is an integer; a fractional one is not.
  const auto fine = parse_model_profile(model_with([](json& j) {
                                          j["timing"]["microbatch_sizes"] = {1.0, 2};
                                        }),
                                        "m.json");
  ASSERT_TRUE(fine.ok()) << fine.error().message;
  EXPECT_EQ(fine->microbatch_sizes, (std::vector<int>{1, 2}));
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["timing"]["microbatch_sizes"] = {1.5, 2};
            }),
            "m.json: $.timing.microbatch_sizes[0]: expected an integer from 1 to 1048576, got 1.5");
}

// The spec of the minimal profile's device type.
json gpu_spec() {
  return json::parse(R"({"aliases": ["Test GPU 80GB"], "stack": "test stack",
                        "peak_flops": {"bf16": 1e12}, "memory_bytes_per_s": 1e11,
                        "memory_efficiency": 0.5, "layer_floor_s": 1e-05,
                        "source": "unit test"})");
}

TEST(ModelLoader, DeviceSpecsAreReadForListedTypes) {
  auto r = parse_model_profile(model_with([](json& j) {
                                 j["dtype"] = "bf16";
                                 j["timing"]["device_specs"]["GPU"] = gpu_spec();
                               }),
                               "dir/m.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->dtype, "bf16");
  ASSERT_EQ(r->device_specs.size(), 1u);
  const DeviceSpec* spec = r->device_spec("GPU");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->name, "GPU");
  EXPECT_EQ(spec->where, "m.json $.timing.device_specs.GPU");
  EXPECT_EQ(spec->peak("bf16"), 1e12);
  EXPECT_EQ(r->device_spec("Test GPU 80GB"), nullptr);  // by the listed name only
  // The spec's alias answers for the listed type.
  EXPECT_EQ(r->device_type_index("Test GPU 80GB"), 0);
  EXPECT_EQ(r->device_type_index("Other GPU"), -1);
}

TEST(ModelLoader, DeviceSpecErrors) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["timing"]["device_specs"]["CPU"] = gpu_spec(); }),
            "m.json: $.timing.device_specs.CPU: device type not listed in "
            "$.timing.device_types: a spec says what the device of a type's times is");
  EXPECT_EQ(mutated_model_error([](json& j) { j["timing"]["device_specs"] = json::array(); }),
            "m.json: $.timing.device_specs: expected an object of device type -> device spec, "
            "got an array of 0");
  EXPECT_EQ(mutated_model_error([](json& j) {
              json spec = gpu_spec();
              spec.erase("layer_floor_s");
              spec["memory_bytes_per_s"] = 0;
              j["timing"]["device_specs"]["GPU"] = spec;
            }),
            "m.json: $.timing.device_specs.GPU.memory_bytes_per_s: expected a finite number > 0, "
            "got 0\n"
            "m.json: $.timing.device_specs.GPU: missing required key \"layer_floor_s\"");
}

// --- Layers ---------------------------------------------------------------------------

TEST(ModelLoader, DuplicateLayerNames) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][1]["name"] = "enc"; }),
            "m.json: $.layers[1].name: duplicate layer name \"enc\" (first at $.layers[0])");
}

TEST(ModelLoader, FewerThanTwoLayers) {
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["layers"].erase(1);
              j["layers"].erase(1);
              j["skips"] = json::array();
            }),
            "m.json: $.layers: expected at least 2 layers (a V needs two stages), got 1");
}

TEST(ModelLoader, LayerNotAnObject) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["layers"][1] = "mid"; }),
            "m.json: $.layers[1]: expected an object, got a string \"mid\"");
}

// --- Skips ----------------------------------------------------------------------------

TEST(ModelLoader, SkipEndpointDoesNotExist) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["skips"][0]["producer"] = "enx"; }),
            "m.json: $.skips[0].producer: unknown layer \"enx\"; did you mean \"enc\"?");
  EXPECT_EQ(mutated_model_error([](json& j) { j["skips"][0]["consumer"] = "decoder_block_9"; }),
            "m.json: $.skips[0].consumer: unknown layer \"decoder_block_9\"");
}

TEST(ModelLoader, SkipGoingBackward) {
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["skips"][0]["producer"] = "dec";
              j["skips"][0]["consumer"] = "enc";
            }),
            "m.json: $.skips[0]: producer \"dec\" (layer 2) must come before consumer \"enc\" "
            "(layer 0) in execution order");
}

TEST(ModelLoader, SkipToItself) {
  EXPECT_EQ(mutated_model_error([](json& j) { j["skips"][0]["consumer"] = "enc"; }),
            "m.json: $.skips[0]: producer \"enc\" (layer 0) must come before consumer \"enc\" "
            "(layer 0) in execution order");
}

TEST(ModelLoader, DuplicateSkip) {
  EXPECT_EQ(
      mutated_model_error([](json& j) {
        j["skips"].push_back({{"producer", "enc"}, {"consumer", "mid"}, {"bytes_per_sample", 8}});
        j["skips"].push_back(
            {{"name", "again"}, {"producer", "enc"}, {"consumer", "dec"}, {"bytes_per_sample", 8}});
      }),
      "m.json: $.skips[2]: duplicate skip \"enc\" -> \"dec\" (first at $.skips[0])");
}

// --- Carried tensors ------------------------------------------------------------------

TEST(ModelLoader, CarriedTensorWithUnknownProducer) {
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["carried"] = {{{"name", "temb"},
                               {"producer", "midd"},
                               {"bytes_per_sample", 2560},
                               {"needs_gradient", true}}};
            }),
            "m.json: $.carried[0].producer: unknown layer \"midd\"; did you mean \"mid\"?");
}

TEST(ModelLoader, CarriedTensorProblems) {
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["carried"] = {
                  {{"name", "temb"},
                   {"producer", nullptr},
                   {"bytes_per_sample", 8},
                   {"needs_gradient", true}},
                  {{"name", "temb"}, {"bytes_per_sample", 8}, {"needs_gradient", "yes"}}};
            }),
            "m.json: $.carried[1].name: duplicate carried tensor \"temb\"\n"
            "m.json: $.carried[1]: missing required key \"producer\"\n"
            "m.json: $.carried[1].needs_gradient: expected true or false, got a string \"yes\"");
}

// --- Reporting --------------------------------------------------------------------------

TEST(ModelLoader, SeveralErrorsReportedTogetherInDocumentOrder) {
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["name"] = 5;
              j["timing"]["device_types"] = {"GPU", "GPU"};
              j["layers"][0]["params"] = -1;
              j["layers"][2]["output_bytes_per_sample"] = 0.5;
              j["skips"][0]["consumer"] = "decc";
            }),
            "m.json: $.name: expected a non-empty string, got 5\n"
            "m.json: $.timing.device_types[1]: duplicate device type \"GPU\"\n"
            "m.json: $.layers[0].params (layer \"enc\"): expected an integer >= 0, got -1\n"
            "m.json: $.layers[2].output_bytes_per_sample (layer \"dec\"): expected an integer "
            ">= 0, got 0.5\n"
            "m.json: $.skips[0].consumer: unknown layer \"decc\"; did you mean \"dec\"?");
}

TEST(ModelLoader, ManyErrorsAreCappedWithACount) {
  // 30 layers with a negative params each: 25 lines shown, then a count of the rest.
  const std::string message = mutated_model_error([](json& j) {
    json layers = json::array();
    for (int i = 0; i < 30; ++i) {
      json layer = j["layers"][0];
      layer["name"] = "layer" + std::to_string(i);
      layer["params"] = -1;
      layers.push_back(layer);
    }
    j["layers"] = layers;
    j["skips"] = json::array();
  });
  std::vector<std::string> lines;
  std::istringstream in(message);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 26u) << message;
  EXPECT_EQ(lines[0],
            "m.json: $.layers[0].params (layer \"layer0\"): expected an integer >= 0, got -1");
  EXPECT_EQ(lines[24],
            "m.json: $.layers[24].params (layer \"layer24\"): expected an integer >= 0, got -1");
  EXPECT_EQ(lines[25], "m.json: ... and 5 more errors");
}

TEST(ModelLoader, NonexistentFile) {
  auto r = load_model_profile("/nonexistent/dir/model.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  EXPECT_EQ(r.error().message,
            "/nonexistent/dir/model.json: cannot open file for reading: No such file or "
            "directory");
}

// --- Shipped profiles -------------------------------------------------------------------

TEST(ModelLoader, EveryShippedModelProfileLoads) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kRoot + "/profiles/models")) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    auto r = load_model_profile(entry.path().string());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->file.name, entry.path().filename().string());
    EXPECT_EQ(r->file.sha256, sha256_hex(read_file(entry.path())));
    EXPECT_GE(r->layers.size(), 2u) << entry.path();
    for (const Layer& layer : r->layers) {
      ASSERT_EQ(layer.forward_s.size(), r->device_types.size()) << layer.name;
      for (const auto& t : layer.forward_s) EXPECT_EQ(t.size(), r->microbatch_sizes.size());
    }
  }
  EXPECT_GE(count, 2);  // at least tiny-unet and sd2-unet-512
}

TEST(ModelLoader, TinyUnetValues) {
  auto r = load_model_profile(kRoot + "/profiles/models/tiny-unet.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelProfile& m = *r;
  EXPECT_EQ(m.name, "tiny-unet");
  EXPECT_EQ(m.file.name, "tiny-unet.json");
  EXPECT_EQ(m.provenance.method, "hand-written");
  EXPECT_EQ(m.microbatch_sizes, (std::vector<int>{1, 2}));
  EXPECT_EQ(m.device_types, (std::vector<std::string>{"V100-SXM2", "Ascend-910A"}));
  EXPECT_EQ(m.device_type_index("Ascend-910A"), 1);
  EXPECT_EQ(m.device_type_index("H100"), -1);

  const std::vector<std::string> names = {"embed", "enc0", "enc1", "enc2", "mid0",
                                          "mid1",  "dec2", "dec1", "dec0", "head"};
  // Forward 1,2,3,4,5,5,4,3,2,1 ms at microbatch 1; 1.8x at 2; backward twice forward.
  const std::vector<double> forward_ms = {1, 2, 3, 4, 5, 5, 4, 3, 2, 1};
  ASSERT_EQ(m.layers.size(), 10u);
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    SCOPED_TRACE(l.name);
    EXPECT_EQ(l.name, names[i]);
    EXPECT_EQ(l.params, 1000000);
    EXPECT_EQ(l.activation_bytes_per_sample, 4194304);
    EXPECT_EQ(l.output_bytes_per_sample, 1048576);
    for (int d = 0; d < 2; ++d) {  // both device types get the same times
      ASSERT_EQ(l.forward_s[d].size(), 2u);
      ASSERT_EQ(l.backward_s[d].size(), 2u);
      EXPECT_DOUBLE_EQ(l.forward_s[d][0], forward_ms[i] * 1e-3);
      EXPECT_NEAR(l.forward_s[d][1], 1.8 * forward_ms[i] * 1e-3, 1e-12);
      EXPECT_NEAR(l.backward_s[d][0], 2 * forward_ms[i] * 1e-3, 1e-12);
      EXPECT_NEAR(l.backward_s[d][1], 3.6 * forward_ms[i] * 1e-3, 1e-12);
    }
  }
  EXPECT_EQ(m.total_params(), 10000000);

  // Four nested skips, in file order: embed->head, enc0->dec0, enc1->dec1, enc2->dec2.
  ASSERT_EQ(m.skips.size(), 4u);
  const std::vector<std::pair<int, int>> ends = {{0, 9}, {1, 8}, {2, 7}, {3, 6}};
  for (std::size_t s = 0; s < 4; ++s) {
    EXPECT_EQ(m.skips[s].producer, ends[s].first) << s;
    EXPECT_EQ(m.skips[s].consumer, ends[s].second) << s;
    EXPECT_EQ(m.skips[s].bytes_per_sample, 1048576) << s;
  }
  EXPECT_EQ(m.skips[0].name, "embed->head");
  EXPECT_TRUE(m.carried.empty());
}

// --- Hashing ----------------------------------------------------------------------------

TEST(Sha256, KnownVectors) {
  // FIPS 180-2 test vectors, the same as `printf abc | sha256sum`.
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, ProfileHashIsTheHexDigestOfTheFileBytes) {
  const std::string path = kRoot + "/profiles/models/tiny-unet.json";
  auto r = load_model_profile(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->file.sha256.size(), 64u);
  EXPECT_EQ(r->file.sha256.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(r->file.sha256, sha256_hex(read_file(path)));
  // One more byte (trailing whitespace, still valid JSON) changes the hash.
  std::string text = read_file(path) + " ";
  auto changed = parse_model_profile(text, path);
  ASSERT_TRUE(changed.ok()) << changed.error().message;
  EXPECT_NE(changed->file.sha256, r->file.sha256);
}

// --- Skip names ------------------------------------------------------------------------

// Plans name skips (transfers list the skips they carry by name): two skips may share no
// name, given or default ("producer->consumer"), and the error says which came first.
TEST(ModelLoader, SkipNamesAreUnique) {
  const auto with_skips = [](json skips) {
    return mutated_model_error([&](json& j) {
      j["layers"].push_back(j["layers"][2]);
      j["layers"][3]["name"] = "out";
      j["skips"] = skips;
    });
  };
  EXPECT_EQ(with_skips(json::parse(R"([
      {"name": "s", "producer": "enc", "consumer": "dec", "bytes_per_sample": 1},
      {"name": "s", "producer": "mid", "consumer": "out", "bytes_per_sample": 1}])")),
            "m.json: $.skips[1].name: skip name \"s\" (given) is already the name of $.skips[0] "
            "(given); every skip needs its own name: give one of them another \"name\"");
  EXPECT_EQ(with_skips(json::parse(R"([
      {"producer": "enc", "consumer": "dec", "bytes_per_sample": 1},
      {"name": "enc->dec", "producer": "mid", "consumer": "out", "bytes_per_sample": 1}])")),
            "m.json: $.skips[1].name: skip name \"enc->dec\" (given) is already the name of "
            "$.skips[0] (its default name, producer->consumer); every skip needs its own name: "
            "give one of them another \"name\"");
  EXPECT_EQ(with_skips(json::parse(R"([
      {"name": "mid->out", "producer": "enc", "consumer": "dec", "bytes_per_sample": 1},
      {"producer": "mid", "consumer": "out", "bytes_per_sample": 1}])")),
            "m.json: $.skips[1]: skip name \"mid->out\" (its default name, producer->consumer) "
            "is already the name of $.skips[0] (given); every skip needs its own name: give one "
            "of them another \"name\"");
}

// Default names collide when layer names hold "->": "a->b" + "c" and "a" + "b->c".
TEST(ModelLoader, DefaultSkipNamesThatCollide) {
  const std::string error = mutated_model_error([](json& j) {
    json layers = json::array();
    for (const char* name : {"a", "a->b", "b->c", "c"}) {
      json l = j["layers"][0];
      l["name"] = name;
      layers.push_back(l);
    }
    j["layers"] = layers;
    j["skips"] = json::parse(R"([
        {"producer": "a->b", "consumer": "c", "bytes_per_sample": 1},
        {"producer": "a", "consumer": "b->c", "bytes_per_sample": 1}])");
  });
  EXPECT_EQ(error,
            "m.json: $.skips[1]: skip name \"a->b->c\" (its default name, producer->consumer) is "
            "already the name of $.skips[0] (its default name, producer->consumer); every skip "
            "needs its own name: give one of them another \"name\"");
}

// --- Device types -----------------------------------------------------------------------

// Hundreds of device types are looked up through one index: every layer's times land under
// the right type, and a misspelt key still gets its suggestion (and no second error).
TEST(ModelLoader, ManyDeviceTypes) {
  const std::string text = model_with([](json& j) {
    json types = json::array();
    for (int t = 0; t < 400; ++t) types.push_back(fmt::format("TYPE-{:03}", t));
    j["timing"]["device_types"] = types;
    for (json& l : j["layers"]) {
      for (const char* key : {"forward_s", "backward_s"}) {
        json times = json::object();
        for (int t = 0; t < 400; ++t)
          times[fmt::format("TYPE-{:03}", t)] = {0.001 * (t + 1), 0.002};
        l[key] = times;
      }
    }
  });
  auto m = parse_model_profile(text, "m.json");
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->device_types.size(), 400u);
  EXPECT_EQ(m->device_type_index("TYPE-123"), 123);
  EXPECT_DOUBLE_EQ(m->layers[1].forward_s[123][0], 0.124);
  EXPECT_DOUBLE_EQ(m->layers[2].backward_s[399][0], 0.4);
  json j = json::parse(text);
  j["layers"][0]["forward_s"]["TYPE_123"] = j["layers"][0]["forward_s"]["TYPE-123"];
  j["layers"][0]["forward_s"].erase("TYPE-123");
  EXPECT_EQ(model_error(j.dump()),
            "m.json: $.layers[0].forward_s.TYPE_123 (layer \"enc\"): device type not listed "
            "in $.timing.device_types; did you mean \"TYPE-123\"?");
}

// A name with control bytes is shown printable in messages (the JSON path's note).
TEST(ModelLoader, NamesInMessagesArePrintable) {
  EXPECT_EQ(mutated_model_error([](json& j) {
              j["layers"][1]["name"] = std::string("m\x1b[2J\0id", 8);
              j["layers"][1]["params"] = -1;
            }),
            "m.json: $.layers[1].params (layer \"m\\x1b[2J\\x00id\"): expected an integer >= 0, "
            "got -1");
}
}  // namespace
}  // namespace pulse
