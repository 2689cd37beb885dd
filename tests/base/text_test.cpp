#include "pulse/base/text.hpp"

#include <gtest/gtest.h>

#include <string>

namespace pulse {
namespace {

using namespace std::string_literals;

// Ordinary names, UTF-8 letters and backslashes stay as they are.
TEST(Printable, LeavesTextAlone) {
  EXPECT_EQ(printable("down_blocks.0 -> up[3]"), "down_blocks.0 -> up[3]");
  EXPECT_EQ(printable("модель \\ 😀"), "модель \\ 😀");
  EXPECT_TRUE(is_printable("модель \\ 😀"));
}

// Every ASCII control byte and DEL, NUL included, is spelled \xNN; a line break too unless
// the text is a message of several lines.
TEST(Printable, SpellsOutControlBytes) {
  EXPECT_EQ(printable("a\0b"s), "a\\x00b");
  EXPECT_EQ(printable("x\x1b]0;pwned\x07y\r\x08z\x7f"), "x\\x1b]0;pwned\\x07y\\x0d\\x08z\\x7f");
  EXPECT_EQ(printable("tab\there\nnext"), "tab\\x09here\\x0anext");
  EXPECT_EQ(printable("one\ntwo", LineBreaks::keep), "one\ntwo");
  EXPECT_EQ(printable("one\r\ntwo", LineBreaks::keep), "one\\x0d\ntwo");
  EXPECT_FALSE(is_printable("a\0b"s));
}

// C1 controls (U+009B is a one-character CSI for some terminals) and the invisible
// characters that reorder text (U+202E, the right-to-left override) as \u{XXXX}.
TEST(Printable, SpellsOutC1AndBidiControls) {
  EXPECT_EQ(printable("a\xc2\x9b"
                      "31mb"),
            "a\\u{009b}31mb");
  EXPECT_EQ(printable("abc\xe2\x80\xae"
                      "fdp.exe"),
            "abc\\u{202e}fdp.exe");
  EXPECT_EQ(printable("\xef\xbb\xbfname"), "\\u{feff}name");
  EXPECT_EQ(printable("zero\xe2\x80\x8bwidth"), "zero\\u{200b}width");
  // U+00A0 (no-break space) and U+2030 (per mille) are printable: the ranges end exactly.
  EXPECT_EQ(printable("\xc2\xa0\xe2\x80\xb0"), "\xc2\xa0\xe2\x80\xb0");
}

// Bytes that are not UTF-8 (a stray continuation byte, an overlong form, a surrogate, a cut
// sequence, beyond U+10FFFF) each as \xNN, so the result is valid UTF-8.
TEST(Printable, SpellsOutBytesThatAreNotUtf8) {
  EXPECT_EQ(printable("\xff.json"), "\\xff.json");
  EXPECT_EQ(printable("a\x80z"), "a\\x80z");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // the surrogate U+D800
  EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");                    // cut short at the end
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // U+110000
  EXPECT_EQ(printable("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");      // U+1F600 is fine
}

// HTML: printable first, then the five characters with a meaning.
TEST(HtmlText, EscapesMarkupAfterControls) {
  EXPECT_EQ(html_text("<script>alert('x')</script>&\"\x1b"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;\\x1b");
  EXPECT_EQ(html_text("a\0b"s), "a\\x00b");
}

}  // namespace
}  // namespace pulse
