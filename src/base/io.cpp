#include "pulse/base/io.hpp"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include <filesystem>
#include <optional>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "io_internal.hpp"
#include "pulse/base/process.hpp"

namespace pulse {

namespace fs = std::filesystem;

// The kernel follows at most 40 symbolic links in one path (path_resolution(7)).
constexpr int kMaxLinks = 40;

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// SHA-256 through OpenSSL's EVP interface: a maintained, audited implementation rather
// than a hand-written one (input hashes go into every plan).
std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    return {};
  }
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

namespace detail {

namespace {

// A path that names a descriptor of this process, as the kernel's /proc and /dev links do:
// /dev/stdout, /dev/stderr, /dev/stdin, /dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N for this
// PID. Checked on the path as written and at every link on the way, before the kernel's own
// "magic" link at /proc/self/fd/N (which leads to whatever the descriptor has open, such as
// the file the shell redirected stdout to) is followed.
std::optional<int> descriptor_of(const std::string& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) return std::nullopt;
  const std::string p = absolute.lexically_normal().string();
  if (p == "/dev/stdin") return 0;
  if (p == "/dev/stdout") return 1;
  if (p == "/dev/stderr") return 2;
  for (const std::string& dir :
       {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
        std::string("/proc/thread-self/fd/"), fmt::format("/proc/{}/fd/", ::getpid())}) {
    if (p.size() <= dir.size() || p.compare(0, dir.size(), dir) != 0) continue;
    const std::string number = p.substr(dir.size());
    if (number.size() > 9 || number.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return std::stoi(number);
  }
  return std::nullopt;
}

// The next path after the symbolic link `link`, whose content is `target`.
std::string follow(const std::string& link, const std::string& target) {
  if (!target.empty() && target.front() == '/') return target;
  const auto slash = link.find_last_of('/');
  return slash == std::string::npos ? target : link.substr(0, slash + 1) + target;
}

}  // namespace

std::string descriptor_name(int fd) {
  return fd == 1 ? "stdout" : fd == 2 ? "stderr" : fmt::format("descriptor {}", fd);
}

Result<Destination> resolve_output(const std::string& path, const std::string& shown) {
  if (path == "-") return Destination{Destination::Kind::descriptor, 1, "", false, 0};
  std::string current = path;
  for (int hops = 0; hops <= kMaxLinks; ++hops) {
    if (const auto fd = descriptor_of(current)) {
      if (*fd == 0) {
        return usage_error(
            fmt::format("{} is the standard input; give a file name or - for "
                        "stdout",
                        shown));
      }
      return Destination{Destination::Kind::descriptor, *fd, "", false, 0};
    }
    struct stat st;
    if (::lstat(current.c_str(), &st) != 0) {
      // Nothing there yet (or a directory on the way is missing: the checks say which).
      return Destination{Destination::Kind::file, -1, current, false, 0};
    }
    if (S_ISLNK(st.st_mode)) {
      std::string target(PATH_MAX, '\0');
      const ssize_t n = ::readlink(current.c_str(), target.data(), target.size());
      if (n < 0) return Destination{Destination::Kind::file, -1, current, false, 0};
      target.resize(static_cast<std::size_t>(n));
      current = follow(current, target);
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      return Destination{Destination::Kind::file, -1, current, true, st.st_mode & 0777};
    }
    if (S_ISDIR(st.st_mode))
      return Destination{Destination::Kind::directory, -1, current, false, 0};
    if (S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)) {
      return usage_error(fmt::format("{} is a {}; give a file name", shown,
                                     S_ISBLK(st.st_mode) ? "block device (a disk)" : "socket"));
    }
    return Destination{Destination::Kind::in_place, -1, current, false, 0};
  }
  return usage_error(
      fmt::format("{}: more than {} symbolic links in a row (a loop?)", shown, kMaxLinks));
}

}  // namespace detail

namespace {

using detail::Destination;

// Writes all of `content` to `fd`, retrying short writes; false (errno set) on failure.
bool write_all(int fd, std::string_view content) {
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    written += static_cast<std::size_t>(n);
  }
  return true;
}

// Writes output `o` through `write` (its content, or what its producer hands over). An
// error names the output as `shown`: the write's where it failed, else the producer's.
Status emit(const std::string& shown, const Output& o, const TextSink& write) {
  int failed = 0;
  if (!o.produce) {
    if (!write(o.content)) failed = errno != 0 ? errno : EIO;
  } else {
    const TextSink sink = [&](std::string_view piece) {
      if (failed == 0 && !write(piece)) failed = errno != 0 ? errno : EIO;
      return failed == 0;
    };
    Status produced = o.produce(sink);
    if (failed == 0 && !produced) return produced;
  }
  if (failed == 0) return Ok{};
  return internal_error(fmt::format("{}: write failed: {}", shown, std::strerror(failed)));
}

// A temporary that cannot be created is a place the user chose badly (a read-only or
// pseudo file system, a directory without write permission): exit 2. A full disk or
// quota, or no descriptors left, is the environment's: exit 3, as any write error.
Error creation_error(const std::string& shown, const std::string& dir, int error) {
  const std::string message = fmt::format("{}: cannot create a file in directory {}: {}", shown,
                                          dir.empty() ? "." : dir, std::strerror(error));
  const bool environment = error == ENOSPC || error == EDQUOT || error == EIO || error == EMFILE ||
                           error == ENFILE || error == ENOMEM;
  return environment ? internal_error(message) : usage_error(message);
}

// Writes `content` to a hidden temporary file beside `dest.path` (same file system, so the
// rename that follows is atomic): "dir/.plan.json.tmp-XXXXXX", with the mode of the file it
// replaces (or what an ordinary open() would give). Returns the temporary's name.
Result<std::string> write_temporary(const std::string& shown, const Destination& dest,
                                    const Output& output) {
  const std::string& path = dest.path;
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  // At most 200 bytes of the name: with ".tmp-XXXXXX" and the backup's ".old" (commit), a
  // name of 255 bytes, the most most file systems allow, still has room for both.
  std::string temp = dir + "." + name.substr(0, 200) + ".tmp-XXXXXX";
  const int fd = temporaries::create(temp);
  if (fd < 0) return creation_error(shown, dir, errno);
  mode_t mode = dest.mode;
  if (!dest.exists) {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  if (Status written = emit(shown, output, [fd](std::string_view p) { return write_all(fd, p); });
      !written) {
    ::close(fd);
    temporaries::remove(temp);
    return written.error();
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    temporaries::remove(temp);
    return internal_error(fmt::format("{}: write failed: {}", shown, reason));
  }
  if (::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    temporaries::remove(temp);
    return internal_error(fmt::format("{}: write failed: {}", shown, reason));
  }
  return temp;
}

Status write_in_place(const std::string& shown, const Destination& dest, const Output& output) {
  if (dest.kind == Destination::Kind::descriptor) {
    const int fd = dest.fd;
    return emit(shown == "-" ? "stdout" : shown, output, [fd](std::string_view p) {
      return fd == 1 ? write_to_stdout(p) : write_all(fd, p);
    });
  }
  const int fd = ::open(dest.path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return internal_error(fmt::format("{}: write failed: {}", shown, std::strerror(errno)));
  }
  Status written = emit(shown, output, [fd](std::string_view p) { return write_all(fd, p); });
  ::close(fd);
  return written;
}

// A temporary waiting to be renamed over its target, and what the rename replaced.
struct Pending {
  std::string shown;   ///< The output as the user named it, for messages.
  std::string target;  ///< The file at the end of its links.
  std::string temp;
  std::string backup;    ///< A hard link to the file the rename replaced; empty if none.
  bool existed = false;  ///< A file was there (if there is no backup, it cannot be put back).
};

// Renames every temporary into place, with the ending signals held off so that the outputs
// appear all together or (a rename failing) not at all: the renames before a failed one are
// undone, each replaced file put back from its hard link, each new file removed.
Status commit(std::vector<Pending>& pending) {
  HeldSignals held;
  auto undo = [&](std::size_t failed) {
    for (std::size_t j = 0; j < pending.size(); ++j) {
      const Pending& p = pending[j];
      if (j < failed) {
        if (!p.backup.empty()) {
          temporaries::rename(p.backup, p.target);
        } else if (!p.existed) {
          ::unlink(p.target.c_str());
        }
      } else {
        temporaries::remove(p.temp);
        if (!p.backup.empty()) temporaries::remove(p.backup);
      }
    }
  };
  for (std::size_t i = 0; i < pending.size(); ++i) {
    Pending& p = pending[i];
    p.backup = p.temp + ".old";
    if (temporaries::link(p.target, p.backup) != 0) {
      // No file there (ENOENT), or a file system without hard links: nothing to put back.
      p.existed = errno != ENOENT;
      p.backup.clear();
    } else {
      p.existed = true;
    }
    if (temporaries::rename(p.temp, p.target) != 0) {
      const std::string reason = std::strerror(errno);
      undo(i);
      return internal_error(
          fmt::format("{}: cannot rename the temporary file into place: {}", p.shown, reason));
    }
  }
  for (const Pending& p : pending) {
    if (!p.backup.empty()) temporaries::remove(p.backup);
  }
  return Ok{};
}

}  // namespace

bool is_special_file(const std::string& path) {
  const auto dest = detail::resolve_output(path, path);
  return dest &&
         (dest->kind == Destination::Kind::descriptor || dest->kind == Destination::Kind::in_place);
}

Status write_file_atomically(const std::string& path, std::string_view content) {
  return write_outputs({{path, content}});
}

Status write_output(const std::string& path, std::string_view content) {
  return write_outputs({{path, content}});
}

Status write_outputs(const std::vector<Output>& outputs) {
  std::vector<Destination> dests;
  for (const Output& o : outputs) {
    auto dest = detail::resolve_output(o.path, o.path);
    if (!dest) return dest.error();
    // check_output_paths refused a directory before any work; one made since is left to
    // the rename, which fails and undoes the others.
    if (dest->kind == Destination::Kind::directory) dest->kind = Destination::Kind::file;
    dests.push_back(std::move(*dest));
  }
  std::vector<Pending> pending;
  auto discard = [&] {
    for (const Pending& p : pending) temporaries::remove(p.temp);
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (dests[i].kind != Destination::Kind::file) continue;
    auto temp = write_temporary(outputs[i].path, dests[i], outputs[i]);
    if (!temp) {
      discard();
      return temp.error();
    }
    pending.push_back({outputs[i].path, dests[i].path, std::move(*temp), "", false});
  }
  // Streams after every temporary is complete, so a failure here still changes no file.
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (dests[i].kind == Destination::Kind::file) continue;
    if (auto s = write_in_place(outputs[i].path, dests[i], outputs[i]); !s) {
      discard();
      return s;
    }
  }
  return commit(pending);
}

}  // namespace pulse
