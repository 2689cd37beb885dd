#include "pulse/cost/pipeline_links.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace pulse {
namespace {

const LinkClass kSelf{"self", 0, 0};
const LinkClass kNv{"NV2", 50e9, 2e-6};
const LinkClass kIb{"IB", 12.5e9, 5e-6};

// Four devices on two nodes: NV2 inside a node, IB between them.
PipelineLinks two_nodes() {
  PipelineLinks links(4, kSelf);
  for (std::size_t a = 0; a < 4; ++a) {
    for (std::size_t b = 0; b < 4; ++b) {
      if (a != b) links.set(a, b, a / 2 == b / 2 ? kNv : kIb);
    }
  }
  return links;
}

TEST(PipelineLinks, ReadsBackWhatWasSet) {
  const PipelineLinks links = two_nodes();
  ASSERT_EQ(links.size(), 4u);
  EXPECT_EQ(links[0][1], kNv);
  EXPECT_EQ(links[1][2], kIb);
  EXPECT_EQ(links.at(3, 2), kNv);
  EXPECT_EQ(links[2][2], kSelf);
  EXPECT_EQ(links[0].size(), 4u);
}

TEST(PipelineLinks, ACopyChangedLeavesTheOriginalAsItWas) {
  const PipelineLinks original = two_nodes();
  PipelineLinks copy = original;
  EXPECT_EQ(copy, original);
  copy.set(0, 1, kIb);
  EXPECT_EQ(copy[0][1], kIb);
  EXPECT_EQ(original[0][1], kNv);
  EXPECT_FALSE(copy == original);
  copy.set(0, 1, kNv);  // back: equal again, though the two tables are not one
  EXPECT_EQ(copy, original);
}

TEST(PipelineLinks, EqualityIsLinkByLinkWhateverOrderTheClassesCameIn) {
  // The same links set in another order keep their classes in another order.
  PipelineLinks other(4, kSelf);
  for (std::size_t a = 4; a-- > 0;) {
    for (std::size_t b = 4; b-- > 0;) {
      if (a != b) other.set(a, b, a / 2 == b / 2 ? kNv : kIb);
    }
  }
  EXPECT_EQ(other, two_nodes());
  other.set(3, 0, LinkClass{"IB", 12.5e9, 6e-6});  // one latency differs
  EXPECT_FALSE(other == two_nodes());
  EXPECT_FALSE(PipelineLinks(3, kSelf) == PipelineLinks(4, kSelf));
  EXPECT_EQ(PipelineLinks(), PipelineLinks(0, kSelf));
}

TEST(PipelineLinks, ClassesBetweenDevicesLeaveOutTheDiagonal) {
  const std::vector<LinkClass> classes = two_nodes().classes_between_devices();
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_TRUE((classes[0] == kNv && classes[1] == kIb) || (classes[0] == kIb && classes[1] == kNv));
  EXPECT_TRUE(PipelineLinks(1, kSelf).classes_between_devices().empty());
}

TEST(PipelineLinks, RowsMustBeSquare) {
  EXPECT_EQ(PipelineLinks({{kSelf, kNv}, {kNv, kSelf}}),
            PipelineLinks({{kSelf, kNv}, {kNv, kSelf}}));
  EXPECT_EQ(PipelineLinks({{kSelf, kNv}, {kIb, kSelf}})[1][0], kIb);
  EXPECT_THROW(PipelineLinks({{kSelf, kNv}, {kNv}}), std::invalid_argument);
}

}  // namespace
}  // namespace pulse
