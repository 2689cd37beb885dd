#include "pulse/base/text.hpp"

#include <cstdint>

#include <fmt/format.h>

namespace pulse {

namespace {

// One UTF-8 sequence at the front of `s`: its code point and length, or length 0 when the
// bytes are not UTF-8 (a stray continuation byte, an overlong form, a surrogate, a code point
// above U+10FFFF, a sequence cut short). The ranges are RFC 3629's table of valid sequences.
struct Decoded {
  std::uint32_t code_point = 0;
  std::size_t length = 0;
};

Decoded decode(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  std::uint32_t cp = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    cp = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    cp = lead & 0x0f;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    cp = lead & 0x07;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return {};
  }
  if (s.size() < length) return {};
  for (std::size_t i = 1; i < length; ++i) {
    const unsigned char b = byte(i);
    if (b < (i == 1 ? low : 0x80) || b > (i == 1 ? high : 0xbf)) return {};
    cp = (cp << 6) | (b & 0x3f);
  }
  return {cp, length};
}

// Code points that print nothing or move other text: C1 controls, zero-width characters,
// line and paragraph separators, bidirectional embeddings, overrides and isolates, word
// joiners and invisible operators, the byte-order mark.
bool invisible(std::uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x200b && cp <= 0x200f) ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff;
}

bool ascii_control(unsigned char c, LineBreaks breaks) {
  if (c == '\n') return breaks == LineBreaks::escape;
  return c < 0x20 || c == 0x7f;
}

// Calls `plain(begin, length)` for runs of bytes kept as they are and `escaped(text)` for
// each spelled-out character, in order.
template <class Plain, class Escaped>
void scan(std::string_view text, LineBreaks breaks, Plain plain, Escaped escaped) {
  std::size_t run = 0, i = 0;
  auto flush = [&] {
    if (i > run) plain(run, i - run);
  };
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (!ascii_control(c, breaks)) {
        ++i;
        continue;
      }
      flush();
      escaped(fmt::format("\\x{:02x}", c));
      run = ++i;
      continue;
    }
    const Decoded d = decode(text.substr(i));
    if (d.length > 0 && !invisible(d.code_point)) {
      i += d.length;
      continue;
    }
    flush();
    escaped(d.length > 0 ? fmt::format("\\u{{{:04x}}}", d.code_point)
                         : fmt::format("\\x{:02x}", c));
    run = i += d.length > 0 ? d.length : 1;
  }
  flush();
}

}  // namespace

std::string printable(std::string_view text, LineBreaks breaks) {
  std::string out;
  out.reserve(text.size());
  scan(
      text, breaks, [&](std::size_t at, std::size_t n) { out.append(text, at, n); },
      [&](const std::string& e) { out += e; });
  return out;
}

bool is_printable(std::string_view text, LineBreaks breaks) {
  bool clean = true;
  scan(
      text, breaks, [](std::size_t, std::size_t) {}, [&](const std::string&) { clean = false; });
  return clean;
}

std::string html_text(std::string_view text) {
  std::string out;
  for (char c : printable(text)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace pulse
