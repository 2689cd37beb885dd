// Names from profiles and plans, and paths from the command line, are bytes someone else
// chose. Before they reach a terminal, a text report, a Graphviz file or a web page, the
// bytes a reader could take for something other than text are spelled out: a layer named
// "a\x1b]0;x\x07" must not retitle the user's terminal, and a NUL must not end a label.
#pragma once

#include <string>
#include <string_view>

namespace pulse {

/// Whether printable() keeps line breaks: a message of several lines keeps its own, a name
/// or a one-line field escapes them too.
enum class LineBreaks { escape, keep };

/// `text` with what is not plain printable text spelled out: the ASCII control characters
/// (NUL to US, tab and newline included, and DEL) and bytes that are not UTF-8 as \xNN; the
/// C1 controls (U+0080-U+009F, which some terminals obey like ESC sequences) and the
/// invisible characters that reorder or hide text (U+200B-U+200F, U+2028-U+202E,
/// U+2060-U+2069, U+FEFF) as \u{XXXX}. Everything else, backslashes included, is unchanged,
/// so ordinary names read as they are.
std::string printable(std::string_view text, LineBreaks breaks = LineBreaks::escape);

/// Whether printable() leaves `text` as it is.
bool is_printable(std::string_view text, LineBreaks breaks = LineBreaks::escape);

/// printable(), then the five characters HTML gives a meaning (& < > " ') as entities: for
/// text and attribute values of a page.
std::string html_text(std::string_view text);

}  // namespace pulse
