#include "pulse/base/json_check.hpp"

#include <gtest/gtest.h>

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
  if (std::filesystem::is_character_file("/dev/zero")) {
    auto zero = read_text_file("/dev/zero", 3 << 20, "three MiB");
    ASSERT_FALSE(zero.ok());
    EXPECT_EQ(zero.error().message, "/dev/zero: more than 3145728 bytes (three MiB)");
  }
  auto empty = read_text_file("", 10, "ten");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "an input's file name is empty; expected the path of a file");
}

// A key twice in one object is refused with its path, at any depth and inside arrays; the
// same key in two different objects is fine.
TEST(ParseJson, AKeyTwiceInOneObjectIsRefused) {
  EXPECT_TRUE(parse_json(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}]})", "f.json")
                  .ok());
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

}  // namespace
}  // namespace pulse
