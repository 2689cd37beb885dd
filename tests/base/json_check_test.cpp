#include "pulse/base/json_check.hpp"

#include <gtest/gtest.h>

namespace pulse {
namespace {

TEST(JsonPath, QuotesKeysThatAreNotIdentifiers) {
  const JsonPath p = JsonPath{}.key("layers").at(3).key("forward_s").key("V100-SXM2");
  EXPECT_EQ(p.str(), "$.layers[3].forward_s[\"V100-SXM2\"]");
}

}  // namespace
}  // namespace pulse
