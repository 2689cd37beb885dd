// check_output_paths (io.hpp): every output is held to what writing it will need before the
// command does any work, following the output's links as the writer will (io_internal.hpp).
#include <climits>
#include <cstring>

#include <filesystem>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "io_internal.hpp"
#include "pulse/base/io.hpp"
#include "pulse/base/process.hpp"

namespace pulse {

namespace fs = std::filesystem;

namespace {

using detail::Destination;

// Whether two paths name one file: the same file (equivalent: same device and inode, through
// any link), or, where either does not exist yet, the same absolute path once symbolic
// links, "." and ".." are resolved (weakly_canonical leaves a relative path relative when no
// part of it exists, so "a.json" and "./a.json" are made absolute first).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool equivalent = fs::equivalent(a, b, ec);
  if (!ec) return equivalent;
  auto resolved = [](const std::string& p, std::error_code& e) {
    const fs::path absolute = fs::absolute(p, e);
    return e ? fs::path() : fs::weakly_canonical(absolute, e);
  };
  std::error_code ea, eb;
  const fs::path ca = resolved(a, ea), cb = resolved(b, eb);
  return !ea && !eb && ca == cb;
}

// Whether descriptor `fd` has the file `path` open (stdout redirected onto an input, as
// `>> model.json` does).
bool descriptor_is_file(int fd, const std::string& path) {
  struct stat a, b;
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && S_ISREG(a.st_mode) &&
         a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

std::string described(const NamedPath& p) {
  return p.option.empty() ? "the output without -o" : p.option + " " + p.path;
}

// Creates and removes a temporary where the writer will put its own: the one test that
// answers for every reason a directory refuses a file (permissions, a read-only or pseudo
// file system such as /proc, root's squashed NFS). "" when it worked.
std::string cannot_create_in(const fs::path& dir) {
  std::string probe = (dir / ".pulse-plan-probe.tmp-XXXXXX").native();
  const int fd = temporaries::create(probe);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  temporaries::remove(probe);
  return "";
}

// Why a regular file (or none yet) at the end of an output's links cannot be written, or "".
std::string unwritable_file(const NamedPath& out, const Destination& dest) {
  if (out.path.size() >= PATH_MAX || dest.path.size() >= PATH_MAX) {
    const std::size_t size = std::max(out.path.size(), dest.path.size());
    return fmt::format("{}...: the path has {} bytes; the system allows {}",
                       described(out).substr(0, 80), size, PATH_MAX - 1);
  }
  const fs::path path(dest.path);
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  const std::string name = path.filename().native();
  if (name_max > 0 && name.size() > static_cast<std::size_t>(name_max)) {
    return fmt::format("{}: the file name has {} bytes; the file system allows {}", described(out),
                       name.size(), name_max);
  }
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (!fs::exists(status)) {
    return fmt::format("{}: directory {} does not exist", described(out), dir.native());
  }
  if (!fs::is_directory(status)) {
    return fmt::format("{}: {} is not a directory", described(out), dir.native());
  }
  // A file its owner made read-only is not replaced behind its back (root may write it).
  if (dest.exists && ::access(dest.path.c_str(), W_OK) != 0) {
    return fmt::format("{}: cannot write it: {}", described(out), std::strerror(errno));
  }
  if (const std::string why = cannot_create_in(dir); !why.empty()) {
    return fmt::format("{}: cannot create files in directory {}: {}", described(out), dir.native(),
                       why);
  }
  return "";
}

// Written in place: no temporary beside it, so only the file itself must be writable. A
// character device is opened to see (a terminal device with no terminal behind it says so
// only then); a named pipe is not, as opening it waits for a reader.
std::string unwritable_in_place(const NamedPath& out, const Destination& dest) {
  if (::access(dest.path.c_str(), W_OK) != 0) {
    return fmt::format("{}: cannot write it: {}", described(out), std::strerror(errno));
  }
  struct stat st;
  if (::stat(dest.path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return "";
  const int fd = ::open(dest.path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return fmt::format("{}: cannot write it: {}", described(out), std::strerror(errno));
  ::close(fd);
  return "";
}

// A descriptor beyond stdout and stderr (/dev/fd/3) must be open for writing: naming one
// that is not is a usage error. stdout or stderr closed is a write error when it is written
// (exit 3), as for "-".
std::string unwritable_descriptor(const NamedPath& out, int fd) {
  if (fd <= 2) return "";
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return fmt::format("{}: descriptor {} is not open", described(out), fd);
  if ((flags & O_ACCMODE) == O_RDONLY) {
    return fmt::format("{}: descriptor {} is open for reading only", described(out), fd);
  }
  return "";
}

// Why one output cannot be written, or "" when it can.
std::string unwritable(const NamedPath& out, const Destination& dest) {
  switch (dest.kind) {
    case Destination::Kind::descriptor:
      return unwritable_descriptor(out, dest.fd);
    case Destination::Kind::directory:
      return fmt::format("{} is a directory; give a file name", described(out));
    case Destination::Kind::in_place:
      return unwritable_in_place(out, dest);
    case Destination::Kind::file:
      break;
  }
  return unwritable_file(out, dest);
}

// Why output `out` collides with `earlier` (two outputs on one descriptor or one file), or "".
std::string collision(const NamedPath& earlier, const Destination& a, const NamedPath& out,
                      const Destination& b) {
  const bool a_fd = a.kind == Destination::Kind::descriptor;
  const bool b_fd = b.kind == Destination::Kind::descriptor;
  if (a_fd && b_fd && a.fd == b.fd) {
    return fmt::format("{} and {} both write to {}; give one of them a file name",
                       described(earlier), described(out), detail::descriptor_name(a.fd));
  }
  if (!a_fd && !b_fd && same_file(a.path, b.path)) {
    return fmt::format("{} and {} name the same file; give each output its own name",
                       described(earlier), described(out));
  }
  return "";
}

}  // namespace

Status check_output_paths(std::string_view command, const std::vector<NamedPath>& inputs,
                          const std::vector<NamedPath>& outputs) {
  for (const NamedPath& in : inputs) {
    if (in.path.empty()) {
      return usage_error(fmt::format("{}: {} needs a file name, got an empty one", command,
                                     in.option.empty() ? "the input" : in.option));
    }
  }
  std::vector<Destination> dests;
  for (const NamedPath& out : outputs) {
    if (out.path.empty())
      return usage_error(fmt::format("{}: {} needs a file name", command, out.option));
    auto dest = detail::resolve_output(out.path, described(out));
    if (!dest) return usage_error(fmt::format("{}: {}", command, dest.error().message));
    for (std::size_t j = 0; j < dests.size(); ++j) {
      if (const std::string why = collision(outputs[j], dests[j], out, *dest); !why.empty()) {
        return usage_error(fmt::format("{}: {}", command, why));
      }
    }
    dests.push_back(*dest);
    for (const NamedPath& in : inputs) {
      const bool same = dest->kind == Destination::Kind::descriptor
                            ? descriptor_is_file(dest->fd, in.path)
                            : same_file(dest->path, in.path);
      if (in.path != "-" && same) {
        return usage_error(
            fmt::format("{}: {} is the same file as {} {}: writing it would "
                        "destroy an input; give another name",
                        command, described(out), in.option, in.path));
      }
    }
    if (const std::string why = unwritable(out, *dest); !why.empty()) {
      return usage_error(fmt::format("{}: {}", command, why));
    }
  }
  return Ok{};
}

}  // namespace pulse
