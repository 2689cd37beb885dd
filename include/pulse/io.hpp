// Output files appear atomically: written to a temporary file beside the target, flushed,
// then renamed over it. A failed run leaves no file behind.
#pragma once

#include <string>
#include <string_view>

#include "pulse/result.hpp"

namespace pulse {

/// Writes `content` to `path` atomically (temp file in the same directory, then rename).
Status write_file_atomically(const std::string& path, std::string_view content);

/// Where a command writes a named output: "-" is stdout (the Unix convention), anything
/// else a file written atomically.
Status write_output(const std::string& path, std::string_view content);

}  // namespace pulse
