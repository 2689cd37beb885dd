#include "pulse/cost/pipeline_links.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace pulse {
namespace {

const LinkClass kSelfLink{"self", 0, 0};
const LinkClass kNvLink{"NV2", 50e9, 2e-6};
const LinkClass kIbLink{"IB", 12.5e9, 5e-6};

// Four devices on two nodes: NV2 inside a node, IB between them.
PipelineLinks nv_and_ib_links() {
  PipelineLinks links(4, kSelfLink);
  for (std::size_t a = 0; a < 4; ++a) {
    for (std::size_t b = 0; b < 4; ++b) {
      if (a != b) links.set(a, b, a / 2 == b / 2 ? kNvLink : kIbLink);
    }
  }
  return links;
}

TEST(PipelineLinks, ReadsBackWhatWasSet) {
  const PipelineLinks links = nv_and_ib_links();
  ASSERT_EQ(links.size(), 4u);
  EXPECT_EQ(links[0][1], kNvLink);
  EXPECT_EQ(links[1][2], kIbLink);
  EXPECT_EQ(links.at(3, 2), kNvLink);
  EXPECT_EQ(links[2][2], kSelfLink);
  EXPECT_EQ(links[0].size(), 4u);
}

TEST(PipelineLinks, ACopyChangedLeavesTheOriginalAsItWas) {
  const PipelineLinks original = nv_and_ib_links();
  PipelineLinks copy = original;
  EXPECT_EQ(copy, original);
  copy.set(0, 1, kIbLink);
  EXPECT_EQ(copy[0][1], kIbLink);
  EXPECT_EQ(original[0][1], kNvLink);
  EXPECT_FALSE(copy == original);
  copy.set(0, 1, kNvLink);  // back: equal again, though the two tables are not one
  EXPECT_EQ(copy, original);
}

TEST(PipelineLinks, EqualityIsLinkByLinkWhateverOrderTheClassesCameIn) {
  // The same links set in another order keep their classes in another order.
  PipelineLinks other(4, kSelfLink);
  for (std::size_t a = 4; a-- > 0;) {
    for (std::size_t b = 4; b-- > 0;) {
      if (a != b) other.set(a, b, a / 2 == b / 2 ? kNvLink : kIbLink);
    }
  }
  EXPECT_EQ(other, nv_and_ib_links());
  other.set(3, 0, LinkClass{"IB", 12.5e9, 6e-6});  // one latency differs
  EXPECT_FALSE(other == nv_and_ib_links());
  EXPECT_FALSE(PipelineLinks(3, kSelfLink) == PipelineLinks(4, kSelfLink));
  EXPECT_EQ(PipelineLinks(), PipelineLinks(0, kSelfLink));
}

TEST(PipelineLinks, ClassesBetweenDevicesLeaveOutTheDiagonal) {
  const std::vector<LinkClass> classes = nv_and_ib_links().classes_between_devices();
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_TRUE((classes[0] == kNvLink && classes[1] == kIbLink) ||
              (classes[0] == kIbLink && classes[1] == kNvLink));
  EXPECT_TRUE(PipelineLinks(1, kSelfLink).classes_between_devices().empty());
}

TEST(PipelineLinks, RowsMustBeSquare) {
  EXPECT_EQ(PipelineLinks({{kSelfLink, kNvLink}, {kNvLink, kSelfLink}}),
            PipelineLinks({{kSelfLink, kNvLink}, {kNvLink, kSelfLink}}));
  EXPECT_EQ(PipelineLinks({{kSelfLink, kNvLink}, {kIbLink, kSelfLink}})[1][0], kIbLink);
  EXPECT_THROW(PipelineLinks({{kSelfLink, kNvLink}, {kNvLink}}), std::invalid_argument);
}

}  // namespace
}  // namespace pulse
