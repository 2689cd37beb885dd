// Arrays parsed as records (json_records.hpp): the same elements, with the same JSON types,
// as the plain parse; anything that is not records is parsed as it is; errors are the plain
// parse's, to the byte.
#include "pulse/base/json_records.hpp"

#include <gtest/gtest.h>

#include <string>

#include "pulse/base/json_check.hpp"

namespace pulse {
namespace {

const JsonRecordPath kOpsPath = {"schedule", "[]", "ops"};

// The document with every array kept as records made an array again.
json with_records_expanded(const json& v) {
  if (JsonRecords::holds(v)) {
    const JsonRecords records(v);
    json out = json::array();
    for (std::size_t i = 0; i < records.size(); ++i) out.push_back(records.at(i));
    return out;
  }
  json out = v;
  if (v.is_object()) {
    for (auto& [key, value] : out.items()) value = with_records_expanded(value);
  } else if (v.is_array()) {
    for (auto& value : out) value = with_records_expanded(value);
  }
  return out;
}

bool has_records(const json& v) {
  if (JsonRecords::holds(v)) return true;
  if (v.is_structured()) {
    for (const auto& value : v) {
      if (has_records(value)) return true;
    }
  }
  return false;
}

json parsed_with_records(const std::string& text) {
  auto parsed = parse_json(text, "f.json", JsonLimits{}, &kOpsPath);
  EXPECT_TRUE(parsed.ok()) << parsed.error().message;
  return parsed.ok() ? *parsed : json();
}

TEST(JsonRecords, KeepFlatObjectsWithTheirTypes) {
  const std::string text =
      R"({"schedule": [{"device": 0, "ops": [)"
      R"({"op": "F", "stage": 0, "mb": 1, "t": 0.5, "neg": -3, "big": 18446744073709551615,)"
      R"( "whole": 2.0, "yes": true, "no": false, "none": null, "s": "x\u00e9\n"},)"
      R"({"op": "B", "stage": 3, "mb": 0, "t": 1e-9, "neg": 4, "big": 0,)"
      R"( "whole": 7, "yes": false, "no": true, "none": 1.5, "s": "F"}]},)"
      R"( {"device": 1, "ops": []}], "other": [{"a": 1}, {"a": 2}]})";
  const json doc = parsed_with_records(text);
  ASSERT_TRUE(JsonRecords::holds(doc["schedule"][0]["ops"]));
  const JsonRecords ops(doc["schedule"][0]["ops"]);
  ASSERT_EQ(ops.size(), 2u);
  // Not on the path, or empty: arrays as the text has them.
  EXPECT_TRUE(doc["schedule"][1]["ops"].is_array());
  EXPECT_TRUE(doc["other"].is_array());
  EXPECT_EQ(with_records_expanded(doc), json::parse(text));
  // The types the text gave: 2.0 stays a float, 7 an integer, -3 a signed one.
  const json first = ops.at(0), second = ops.at(1);
  EXPECT_TRUE(first["stage"].is_number_unsigned());
  EXPECT_TRUE(first["neg"].is_number_integer() && !first["neg"].is_number_unsigned());
  EXPECT_TRUE(first["whole"].is_number_float());
  EXPECT_TRUE(second["whole"].is_number_unsigned());
  EXPECT_EQ(first["big"].get<std::uint64_t>(), 18446744073709551615u);
  EXPECT_TRUE(first["none"].is_null());
  EXPECT_EQ(first["s"], "x\u00e9\n");
  EXPECT_EQ(second["t"].get<double>(), 1e-9);
}

TEST(JsonRecords, WhatIsNotRecordsIsParsedAsItIs) {
  std::string many_strings = R"({"schedule": [{"ops": [)";
  for (int i = 0; i < 300; ++i) {
    many_strings += (i ? ", " : "") + std::string(R"({"op": "s)") + std::to_string(i) + "\"}";
  }
  many_strings += "]}]}";
  const std::string ops_of[] = {
      R"([1, {"a": 1}])",                         // an element that is not an object
      R"([{"a": 1}, 2])",                         // nor later
      R"([{"a": [1]}])",                          // a value that is not a scalar
      R"([{"a": {"b": 1}}])",                     //
      R"([[{"a": 1}]])",                          // an array in the array
      R"([{"a": 1}, {"b": 1}])",                  // other keys
      R"([{"a": 1, "b": 2}, {"b": 2, "a": 1}])",  // in another order
      R"([{"a": 1, "b": 2}, {"a": 1}])",          // fewer
      R"([{"a": 1}, {"a": 1, "b": 2}])",          // more
  };
  std::vector<std::string> texts = {many_strings};
  for (const std::string& ops : ops_of) texts.push_back(R"({"schedule": [{"ops": )" + ops + "}]}");
  for (const std::string& text : texts) {
    const json doc = parsed_with_records(text);
    EXPECT_FALSE(has_records(doc)) << text;
    EXPECT_EQ(doc, json::parse(text)) << text;
  }
  // The control: 256 distinct strings are records still.
  std::string enough = R"({"schedule": [{"ops": [)";
  for (int i = 0; i < 256; ++i) {
    enough += (i ? ", " : "") + std::string(R"({"op": "s)") + std::to_string(i) + "\"}";
  }
  enough += "]}]}";
  const json doc = parsed_with_records(enough);
  EXPECT_TRUE(has_records(doc));
  EXPECT_EQ(with_records_expanded(doc), json::parse(enough));
}

// A duplicate key, a syntax error or a limit inside an array on the path: the message the
// plain parse gives, byte for byte.
TEST(JsonRecords, ErrorsAreThoseOfThePlainParse) {
  auto limited = [](std::size_t depth, std::size_t members, std::size_t values) {
    JsonLimits limits;
    limits.max_depth = depth;
    limits.max_members = members;
    limits.max_values = values;
    limits.why = "test limits";
    return limits;
  };
  const JsonLimits loose = limited(8, 100, 100);
  const std::string one = R"({"schedule": [{"ops": [{"a": 1}]}]})";
  const std::string three_keys = R"({"a": 1, "b": 1, "c": 1})";
  const std::pair<JsonLimits, std::string> cases[] = {
      {loose, R"({"schedule": [{"ops": [{"a": 1, "a": 2}]}]})"},
      {loose, R"({"schedule": [{"ops": [{"a": 1}, {"a": 2, "a": 3}]}]})"},
      {loose, R"({"schedule": [{"ops": [{"a": 1}, {"a": ]}]})"},
      {loose, R"({"schedule": [{"ops": [{"a": 1}, {"a": 1e999}]}]})"},
      {limited(4, 100, 100), one},  // the elements are at depth 5
      {limited(8, 4, 100), R"({"schedule": [{"ops": [{"a": 1}, {"a": 1}, {"a": 1}, {"a": 1}, )"
                           R"({"a": 1}]}]})"},
      {limited(8, 4, 100),
       R"({"schedule": [{"ops": [{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}]}]})"},
      {limited(8, 100, 14), R"({"schedule": [{"ops": [)" + three_keys + ", " + three_keys + ", " +
                                three_keys + ", " + three_keys + "]}]}"},
  };
  for (const auto& [limits, text] : cases) {
    auto plain = parse_json(text, "f.json", limits);
    auto records = parse_json(text, "f.json", limits, &kOpsPath);
    ASSERT_FALSE(plain.ok()) << text;
    ASSERT_FALSE(records.ok()) << text;
    EXPECT_EQ(records.error().message, plain.error().message) << text;
  }
  // The control: a depth of 5 allowed, the same text is records.
  auto deep = parse_json(one, "f.json", limited(5, 100, 100), &kOpsPath);
  ASSERT_TRUE(deep.ok()) << deep.error().message;
  EXPECT_TRUE(has_records(*deep));
}

}  // namespace
}  // namespace pulse
