// Where an output path leads, shared by the writer (io.cpp) and the checks made before any
// work (output_paths.cpp), so that both follow the same links to the same place.
#pragma once

#include <sys/types.h>

#include <string>

#include "pulse/base/result.hpp"

namespace pulse::detail {

/// What an output path names once its symbolic links are followed.
struct Destination {
  enum class Kind {
    descriptor,  ///< An open descriptor of this process: "-", /dev/stdout, /dev/fd/N ...
    in_place,    ///< A character device or a named pipe: opened and written as it is.
    file,        ///< A regular file, or none yet: a temporary beside it is renamed onto it.
    directory,   ///< An existing directory: refused by the checks.
  };
  Kind kind = Kind::file;
  int fd = -1;          ///< descriptor: its number.
  std::string path;     ///< in_place, file, directory: the path at the end of the links.
  bool exists = false;  ///< file: a file is there now (its mode is kept).
  mode_t mode = 0;      ///< file: that file's permission bits.
};

/// Follows `path` through its symbolic links (at most 40, as the kernel does). Usage errors
/// name `shown` (the option and path as given): a loop of links, a block device (a disk:
/// never written in place), a socket, the standard input.
Result<Destination> resolve_output(const std::string& path, const std::string& shown);

/// "stdout", "stderr", or "descriptor N": how messages name a descriptor output.
std::string descriptor_name(int fd);

}  // namespace pulse::detail
