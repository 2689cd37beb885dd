// Output files appear atomically and together: each is written to a temporary file beside its
// target, and only when every one of a command's outputs is written are they renamed into
// place. A failed run leaves no file behind and every existing file as it was. Before a
// command does any work, check_output_paths refuses outputs that could not be written or
// that would destroy one of its inputs.
//
// What an output path names decides how it is written:
//   - "-", /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: the process's own
//     descriptor, written directly (not atomically: a pipe or a terminal has no rename), in
//     order with whatever else goes there; never replaced, whatever file the shell
//     redirected it to;
//   - a character device or a named pipe (/dev/null, a FIFO): opened and written in place;
//   - a regular file, or no file yet: replaced atomically; through a symbolic link, the
//     file at the end of the link is replaced and the link stays a link;
//   - a block device, a socket, a directory, the standard input, a loop of links: refused.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pulse/base/result.hpp"

namespace pulse {

/// The file name without directories.
std::string base_name(const std::string& path);

/// Hex SHA-256 of a byte string.
std::string sha256_hex(std::string_view bytes);

/// Writes `content` to `path` as write_outputs does.
Status write_file_atomically(const std::string& path, std::string_view content);

/// Where a command writes a named output: "-" is stdout (the Unix convention), anything
/// else as the header says.
Status write_output(const std::string& path, std::string_view content);

/// Takes an output's text a piece at a time, in order; false where the write failed (errno
/// says why), after which it takes nothing more.
using TextSink = std::function<bool(std::string_view)>;

/// One of several outputs of a command: a path as write_output takes it, and its text.
struct Output {
  using Producer = std::function<Status(const TextSink&)>;
  Output(std::string path, std::string_view content) : path(std::move(path)), content(content) {}
  Output(std::string path, Producer produce) : path(std::move(path)), produce(std::move(produce)) {}

  std::string path;
  std::string_view content;
  /// Where set, the text instead: it hands the text to the sink in pieces, so that a text of
  /// gigabytes is never held whole (a plan at pp 512 over 2048 layers is 0.4 GB). An error
  /// it returns stops the outputs as a failed write does (nothing is replaced); where the
  /// sink refused a piece, the write's own error is reported.
  Producer produce;
};

/// Whether output `path` is written in place rather than replaced by a rename: a descriptor
/// (/dev/stdout, /dev/fd/N) or an existing file, at the end of its links, that is neither a
/// regular file nor a directory (/dev/null, a named pipe).
bool is_special_file(const std::string& path);

/// Outputs that belong together (a plan and its trace, a CSV and its side file): every file
/// is written to its temporary first (with the mode of the file it replaces); then the
/// descriptors and the files written in place; only then are the temporaries renamed into
/// place, with the ending signals held off (process.hpp). A failure at any step leaves every
/// existing file as it was: a rename that fails undoes the renames before it (the files they
/// replaced are kept as hard links until the last rename is done); a signal removes the
/// temporaries. A failed write is an internal error (exit 3) naming the output ("stdout" for
/// "-"); a directory that refuses the temporary is a usage error (exit 2).
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
///   - no two outputs go to one descriptor ("-" and /dev/stdout are both stdout);
///   - an output's links end within 40 hops, at no block device, socket, standard input or
///     directory; the file there, if any, is writable; its directory exists, is a directory,
///     and a temporary file can be created in it (tried, and removed); a special file
///     (/dev/null, a pipe), written in place, need only be writable itself.
/// Paths are handled as bytes, so a name that is not valid UTF-8 is checked like any other.
Status check_output_paths(std::string_view command, const std::vector<NamedPath>& inputs,
                          const std::vector<NamedPath>& outputs);

}  // namespace pulse
