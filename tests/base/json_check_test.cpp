#include "pulse/base/json_check.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace pulse {
namespace {

TEST(JsonPath, QuotesKeysThatAreNotIdentifiers) {
  const JsonPath p = JsonPath{}.key("layers").at(3).key("forward_s").key("V100-SXM2");
  EXPECT_EQ(p.str(), "$.layers[3].forward_s[\"V100-SXM2\"]");
}

// A file of exactly the limit is read; one byte more, or a stream without end, is refused
// as soon as the limit is passed (not after reading it all).
TEST(ReadTextFile, StopsAtItsLimit) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "pulse-read-limit-test.txt").string();
  {
    std::ofstream out(path, std::ios::binary);
    out << "0123456789";
  }
  auto ten = read_text_file(path, 10, "a limit of ten");
  ASSERT_TRUE(ten.ok()) << ten.error().message;
  EXPECT_EQ(*ten, "0123456789");
  auto nine = read_text_file(path, 9, "a limit of nine");
  ASSERT_FALSE(nine.ok());
  EXPECT_EQ(nine.error().kind, ErrorKind::input);
  EXPECT_EQ(nine.error().message, path + ": more than 9 bytes (a limit of nine)");
  std::remove(path.c_str());
  // An endless stream of bytes no JSON text holds is not read up to the limit: the read
  // ends with the first 1 MiB piece, which the parser then refuses.
  if (std::filesystem::is_character_file("/dev/zero")) {
    auto zero = read_text_file("/dev/zero", 3 << 20, "three MiB");
    ASSERT_TRUE(zero.ok()) << zero.error().message;
    EXPECT_EQ(zero->size(), std::size_t{1} << 20);
  }
  auto empty = read_text_file("", 10, "ten");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "an input's file name is empty; expected the path of a file");
}

// The read stops after the piece holding a control byte, wherever it is in the piece, and
// not for tab, newline or return; a file without one is read whole.
TEST(ReadTextFile, StopsAfterThePieceWithAByteNoJsonTextHolds) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "pulse-read-control-test.txt").string();
  const std::size_t piece = std::size_t{1} << 20;
  auto write = [&](std::size_t at, char byte) {
    std::string text(3 * piece, ' ');
    text[at] = byte;
    std::ofstream(path, std::ios::binary) << text;
  };
  write(piece + 5, '\x01');  // in the second piece: two pieces read
  auto two = read_text_file(path, 4 * piece, "four MiB");
  ASSERT_TRUE(two.ok()) << two.error().message;
  EXPECT_EQ(two->size(), 2 * piece);
  write(0, '\0');
  EXPECT_EQ(read_text_file(path, 4 * piece, "four MiB")->size(), piece);
  for (char fine : {'\t', '\n', '\r', '\x7f'}) {
    write(7, fine);
    EXPECT_EQ(read_text_file(path, 4 * piece, "four MiB")->size(), 3 * piece);
  }
  // Past the limit before any such byte: refused by the limit as before.
  write(3 * piece - 1, '\x02');
  auto over = read_text_file(path, 2 * piece, "two MiB");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().message, path + ": more than 2097152 bytes (two MiB)");
  std::remove(path.c_str());
}

// A key twice in one object is refused with its path, at any depth and inside arrays; the
// same key in two different objects is fine.
TEST(ParseJson, AKeyTwiceInOneObjectIsRefused) {
  EXPECT_TRUE(
      parse_json(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}]})", "f.json").ok());
  const auto top = parse_json(R"({"name": "x", "layers": [], "name": "y"})", "f.json");
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.error().kind, ErrorKind::input);
  EXPECT_EQ(top.error().message,
            "f.json: $.name: this key appears twice in one object; which value counts would be "
            "a guess");
  const auto deep =
      parse_json(R"({"a": 1, "b": {"c": [1, [2], {"d": 2, "e": {}, "d": 3}]}})", "f.json");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().message,
            "f.json: $.b.c[2].d: this key appears twice in one object; which value counts would "
            "be a guess");
}

// The counts are checked as the values arrive: the first value past a limit ends the parse,
// with its path and the limit named.
TEST(ParseJson, LimitsAreCheckedWhileParsing) {
  JsonLimits limits;
  limits.max_depth = 3;
  limits.max_members = 4;
  limits.max_values = 20;
  limits.why = "test limits";
  EXPECT_TRUE(parse_json(R"({"a": [[1, 2, 3, 4]], "b": {"c": 1}})", "f.json", limits).ok());
  EXPECT_EQ(parse_json(R"({"a": [[[1]]]})", "f.json", limits).error().message,
            "f.json: $.a[0][0]: more than 3 arrays and objects inside one another (test limits)");
  EXPECT_EQ(parse_json(R"({"a": [1, 2, 3, 4, 5]})", "f.json", limits).error().message,
            "f.json: $.a[4]: more than 4 elements in one array (test limits)");
  EXPECT_EQ(
      parse_json(R"({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})", "f.json", limits).error().message,
      "f.json: $.e: more than 4 keys in one object (test limits)");
  EXPECT_EQ(
      parse_json(R"([[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]])", "f.json", limits)
          .error()
          .message,
      "f.json: $[3][2]: more than 20 values in the document (test limits)");
}

// The parse builds the same document nlohmann's own parser does, and the errors keep their
// form: a syntax error after a duplicate key is the one reported; a number too large is
// located at its first byte.
TEST(ParseJson, BuildsWhatNlohmannBuilds) {
  const std::string text =
      R"({"s": "x\u00e9\n", "n": [0, -1, 18446744073709551615, 1.5e300, true, null],)"
      R"( "o": {"b": {}, "a": []}})";
  auto parsed = parse_json(text, "f.json");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(*parsed, json::parse(text));
  EXPECT_EQ(parse_json("{\"a\": 1, \"a\": 2,\n \"b\": }", "f.json").error().message,
            "f.json:2:7: malformed JSON: syntax error while parsing value - unexpected '}'; "
            "expected '[', '{', or a literal");
  EXPECT_EQ(parse_json("{\"a\":\n  [1, 1e999]}", "f.json").error().message,
            "f.json:2:7: number 1e999 is out of range for a double");
}

// Long arrays of small objects (the case that was quadratic) come back whole.
TEST(ParseJson, LongArraysOfObjects) {
  std::string text = "{\"junk\": [";
  for (int i = 0; i < 200000; ++i) text += (i ? ",{\"a\":" : "{\"a\":") + std::to_string(i) + "}";
  text += "]}";
  auto parsed = parse_json(text, "f.json");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  ASSERT_EQ((*parsed)["junk"].size(), 200000u);
  EXPECT_EQ((*parsed)["junk"][199999]["a"], 199999);
}

// A checker keeps the messages it shows and counts the rest.
TEST(JsonChecker, KeepsTheShownErrorsAndCountsTheRest) {
  JsonChecker check("f.json");
  for (int i = 0; i < 1000; ++i) check.fail(JsonPath{}.at(i), "bad");
  EXPECT_EQ(check.error_count(), 1000u);
  EXPECT_TRUE(check.full());
  const std::string message = check.error().message;
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 25);
  EXPECT_NE(message.find("f.json: ... and 975 more errors"), std::string::npos);
}
}  // namespace
}  // namespace pulse
