// encode_plan reads a plan back as the reader reads its text, but for the ops, which it takes
// from the plan itself (plan_codec.cpp, read_back_ops): it must refuse exactly what the reader
// refuses, in the reader's words, and accept exactly what the reader accepts.

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pulse/plan/plan_codec.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

// tiny-unet on one DGX-1, the V at pp 2 (4 stages), 4 microbatches.
const Plan& tiny() {
  static const Plan plan = [] {
    auto p = parse_plan(test::tiny_v_plan_text(), "p.json");
    EXPECT_TRUE(p.ok());
    return p.ok() ? *p : Plan{};
  }();
  return plan;
}

// The problems of an error message, one a line, sorted: encode_plan lists the ops' problems
// after the other sections', where the reader lists them in the order of the text.
std::vector<std::string> problems(const std::string& message) {
  std::vector<std::string> out;
  std::istringstream lines(message);
  for (std::string line; std::getline(lines, line);) out.push_back(line);
  std::sort(out.begin(), out.end());
  return out;
}

// encode_plan's verdict on `plan` against the reader's on its text.
void expect_as_the_reader(const Plan& plan, const std::string& what, bool refused) {
  const std::string text = write_plan(plan);
  const auto read = parse_plan(text, "p.json");
  const auto encoded = encode_plan(plan);
  ASSERT_EQ(read.ok(), encoded.ok())
      << what << ": " << (read.ok() ? encoded.error().message : read.error().message);
  EXPECT_EQ(!read.ok(), refused) << what;
  if (read.ok()) {
    EXPECT_EQ(*encoded, text) << what;
    return;
  }
  EXPECT_EQ(encoded.error().kind, ErrorKind::input) << what;
  const std::string prefix = "the plan made is beyond what a plan may state:\n";
  ASSERT_EQ(encoded.error().message.rfind(prefix, 0), 0u) << what;
  EXPECT_EQ(problems(encoded.error().message.substr(prefix.size())), problems(read.error().message))
      << what;
}

TEST(EncodePlan, RefusesWhatTheReaderRefusesInItsWords) {
  Plan base = tiny();
  base.file = "p.json";
  ASSERT_EQ(base.num_stages(), 4);
  ASSERT_EQ(base.parallelism.num_microbatches, 4);
  ASSERT_GE(base.schedule[1].size(), 3u);
  const double late = 1e6;  // the time limit, kMaxSeconds
  struct Case {
    std::string what;
    std::function<void(Plan&)> plant;
    bool refused;
  };
  const std::vector<Case> cases = {
      {"as made", [](Plan&) {}, false},
      {"a stage id past the last", [](Plan& p) { p.schedule[1][2].op.stage = 4; }, true},
      {"a negative stage id", [](Plan& p) { p.schedule[0][0].op.stage = -1; }, true},
      {"a microbatch past the last", [](Plan& p) { p.schedule[1][0].op.mb = 4; }, true},
      {"a negative microbatch", [](Plan& p) { p.schedule[0][1].op.mb = -3; }, true},
      {"a negative start", [](Plan& p) { p.schedule[1][1].start_s = -1e-3; }, true},
      {"an end past the time limit", [](Plan& p) { p.schedule[0][2].end_s = 2e6; }, true},
      // Written to the nanosecond: what rounds to the limit is within it, what rounds past it
      // is not; a time that rounds to -0 reads back as -0, which is not below 0.
      {"an end that rounds to the limit", [&](Plan& p) { p.schedule[0][2].end_s = late + 3e-10; },
       false},
      {"an end just past the limit", [&](Plan& p) { p.schedule[0][2].end_s = late + 2e-9; }, true},
      {"a start that rounds to -0", [](Plan& p) { p.schedule[0][0].start_s = -1e-10; }, false},
      {"the same op twice", [](Plan& p) { p.schedule[1][1].op = p.schedule[1][0].op; }, true},
      {"an op missing", [](Plan& p) { p.schedule[1].pop_back(); }, true},
      {"an op on the other device",
       [](Plan& p) {
         p.schedule[0].push_back(p.schedule[1].back());
         p.schedule[1].pop_back();
       },
       true},
      {"a bad op beside a bad byte count",
       [](Plan& p) {
         p.schedule[1][2].op.stage = 7;
         p.stages[0].params = std::int64_t{1} << 60;
       },
       true},
  };
  for (const Case& c : cases) {
    Plan plan = base;
    c.plant(plan);
    expect_as_the_reader(plan, c.what, c.refused);
  }
}

TEST(EncodePlan, ChecksTheOpsAsWritten) {
  // An op may not end before it starts (check_plan_structure). One made to end a fraction of
  // a nanosecond before its start is written ending at its start, which the reader takes,
  // and so does encode_plan: it checks the times as written, not as made.
  Plan plan = tiny();
  plan.file = "p.json";
  PlanOp& op = plan.schedule[0][1];
  ASSERT_GT(op.start_s, 0);
  op.end_s = op.start_s - 4e-10;
  expect_as_the_reader(plan, "an end within the rounding of its start", false);
  op.end_s = op.start_s - 3e-9;
  expect_as_the_reader(plan, "an end before its start", true);
}

}  // namespace
}  // namespace pulse
