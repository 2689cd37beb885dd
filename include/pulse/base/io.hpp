// Output files appear atomically: written to a temporary file beside the target, flushed,
// then renamed over it. A failed run leaves no file behind.
#pragma once

#include <string>
#include <string_view>

#include "pulse/base/result.hpp"

namespace pulse {

/// The file name without directories.
std::string base_name(const std::string& path);

/// Hex SHA-256 of a byte string.
std::string sha256_hex(std::string_view bytes);

/// Writes `content` to `path` atomically (temp file in the same directory, then rename).
Status write_file_atomically(const std::string& path, std::string_view content);

/// Where a command writes a named output: "-" is stdout (the Unix convention), anything
/// else a file written atomically.
Status write_output(const std::string& path, std::string_view content);

}  // namespace pulse
