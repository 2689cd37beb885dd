// Output files appear atomically and together: each is written to a temporary file beside its
// target, and only when every one of a command's outputs is written are they renamed into
// place. A failed run leaves no file behind and every existing file as it was. Before a
// command does any work, check_output_paths refuses outputs that could not be written or
// that would destroy one of its inputs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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

/// One of several outputs of a command: a path as write_output takes it, and its text.
struct Output {
  std::string path;
  std::string_view content;
};

/// Whether `path` exists and is neither a regular file nor a directory (/dev/null, a named
/// pipe): such an output is written in place, as stdout is, never replaced by a rename.
bool is_special_file(const std::string& path);

/// Outputs that belong together (a plan and its trace, a CSV and its side file): every file
/// is written to its temporary first; then "-" goes to stdout, and an existing file that is
/// not a regular one (/dev/null, a pipe) is written in place, as stdout is; only then are the
/// temporaries renamed into place. A failure at any step leaves every existing file as it
/// was: a rename that fails undoes the renames before it (the files they replaced are kept
/// as hard links until the last rename is done).
Status write_outputs(const std::vector<Output>& outputs);

/// A file named on a command line: the option that names it ("--model", "-o"; empty for an
/// output that goes to stdout because no option names one) and the path as given.
struct NamedPath {
  std::string option;
  std::string path;
};

/// What check_output_paths holds every output to, before the command does any work; each
/// failure is a usage error (exit 2) naming the command, the option and the path:
///   - an output is not the file of an input, through any spelling (./x, a/../x), symbolic
///     link or hard link (std::filesystem::equivalent, else weakly_canonical paths);
///   - no two outputs are one file, and at most one goes to stdout ("-");
///   - an output is not an existing directory; its directory exists, is a directory, and
///     the command may create files in it (where the temporary goes); a special file
///     (/dev/null, a pipe), written in place, need only be writable itself.
/// Paths are handled as bytes, so a name that is not valid UTF-8 is checked like any other.
Status check_output_paths(std::string_view command, const std::vector<NamedPath>& inputs,
                          const std::vector<NamedPath>& outputs);

}  // namespace pulse
