#include "pulse/base/io.hpp"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include <filesystem>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/evp.h>

namespace pulse {

namespace fs = std::filesystem;

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

namespace {

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

// Writes `content` to a hidden temporary file beside `path` (same file system, so the rename
// that follows is atomic): "dir/.plan.json.tmp-XXXXXX". Returns the temporary's name.
Result<std::string> write_temporary(const std::string& path, std::string_view content) {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  // At most 200 bytes of the name: with ".tmp-XXXXXX" and the backup's ".old" (commit), a
  // name of 255 bytes, the most most file systems allow, still has room for both.
  std::string temp = dir + "." + name.substr(0, 200) + ".tmp-XXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) {
    return internal_error(fmt::format("{}: cannot create a temporary file beside it: {}", path,
                                      std::strerror(errno)));
  }
  if (!write_all(fd, content)) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(temp.c_str());
    return internal_error(fmt::format("{}: write failed: {}", path, reason));
  }
  // mkstemp creates 0600; give the file the mode an ordinary open() would.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    return internal_error(fmt::format("{}: write failed: {}", path, reason));
  }
  return temp;
}

Status write_in_place(const std::string& path, std::string_view content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0 || !write_all(fd, content)) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return internal_error(fmt::format("{}: write failed: {}", path, reason));
  }
  ::close(fd);
  return Ok{};
}

Status write_stdout(std::string_view content) {
  std::fwrite(content.data(), 1, content.size(), stdout);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    return internal_error(fmt::format("stdout: write failed: {}", std::strerror(errno)));
  }
  return Ok{};
}

// A temporary waiting to be renamed over its target, and what the rename replaced.
struct Pending {
  std::string target;
  std::string temp;
  std::string backup;    ///< A hard link to the file the rename replaced; empty if none.
  bool existed = false;  ///< A file was there (if there is no backup, it cannot be put back).
};

// Renames every temporary into place. When one rename fails, the ones before it are undone:
// each replaced file is put back from its hard link, each new file removed.
Status commit(std::vector<Pending>& pending) {
  auto undo = [&](std::size_t failed) {
    for (std::size_t j = 0; j < pending.size(); ++j) {
      const Pending& p = pending[j];
      if (j < failed) {
        if (!p.backup.empty()) {
          std::rename(p.backup.c_str(), p.target.c_str());
        } else if (!p.existed) {
          ::unlink(p.target.c_str());
        }
      } else {
        ::unlink(p.temp.c_str());
        if (!p.backup.empty()) ::unlink(p.backup.c_str());
      }
    }
  };
  for (std::size_t i = 0; i < pending.size(); ++i) {
    Pending& p = pending[i];
    p.backup = p.temp + ".old";
    if (::link(p.target.c_str(), p.backup.c_str()) != 0) {
      // No file there (ENOENT), or a file system without hard links: nothing to put back.
      p.existed = errno != ENOENT;
      p.backup.clear();
    } else {
      p.existed = true;
    }
    if (std::rename(p.temp.c_str(), p.target.c_str()) != 0) {
      const std::string reason = std::strerror(errno);
      undo(i);
      return internal_error(
          fmt::format("{}: cannot rename the temporary file into place: {}", p.target, reason));
    }
  }
  for (const Pending& p : pending) {
    if (!p.backup.empty()) ::unlink(p.backup.c_str());
  }
  return Ok{};
}

}  // namespace

// A rename would put a regular file in place of a special one, so it is written in place.
bool is_special_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

Status write_file_atomically(const std::string& path, std::string_view content) {
  return write_outputs({{path, content}});
}

Status write_output(const std::string& path, std::string_view content) {
  return write_outputs({{path, content}});
}

Status write_outputs(const std::vector<Output>& outputs) {
  std::vector<bool> stream;  // written in place: stdout or a special file
  for (const Output& o : outputs) stream.push_back(o.path == "-" || is_special_file(o.path));
  std::vector<Pending> pending;
  auto discard = [&] {
    for (const Pending& p : pending) ::unlink(p.temp.c_str());
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (stream[i]) continue;
    auto temp = write_temporary(outputs[i].path, outputs[i].content);
    if (!temp) {
      discard();
      return temp.error();
    }
    pending.push_back({outputs[i].path, std::move(*temp), "", false});
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!stream[i]) continue;
    const Output& o = outputs[i];
    if (auto s = o.path == "-" ? write_stdout(o.content) : write_in_place(o.path, o.content); !s) {
      discard();
      return s;
    }
  }
  return commit(pending);
}

// --- Checking outputs before the work ----------------------------------------------------

namespace {

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

std::string described(const NamedPath& p) {
  return p.option.empty() ? "the output without -o" : p.option + " " + p.path;
}

// Why one output cannot be written, or "" when it can.
std::string unwritable(const NamedPath& out) {
  if (out.path.empty()) return fmt::format("{} needs a file name", out.option);
  std::error_code ec;
  const fs::path path(out.path);
  if (fs::is_directory(path, ec)) {
    return fmt::format("{} is a directory; give a file name", described(out));
  }
  if (is_special_file(out.path)) {  // written in place: no temporary beside it
    if (::access(out.path.c_str(), W_OK) != 0) {
      return fmt::format("{}: cannot write it: {}", described(out), std::strerror(errno));
    }
    return "";
  }
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (out.path.size() >= PATH_MAX) {
    return fmt::format("{}...: the path has {} bytes; the system allows {}",
                       described(out).substr(0, 80), out.path.size(), PATH_MAX - 1);
  }
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  const std::string name = path.filename().native();
  if (name_max > 0 && name.size() > static_cast<std::size_t>(name_max)) {
    return fmt::format("{}: the file name has {} bytes; the file system allows {}", described(out),
                       name.size(), name_max);
  }
  const fs::file_status status = fs::status(dir, ec);
  if (!fs::exists(status)) {
    return fmt::format("{}: directory {} does not exist", described(out), dir.native());
  }
  if (!fs::is_directory(status)) {
    return fmt::format("{}: {} is not a directory", described(out), dir.native());
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return fmt::format("{}: cannot create files in directory {}: {}", described(out), dir.native(),
                       std::strerror(errno));
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
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    for (std::size_t j = 0; j < i; ++j) {
      const NamedPath& earlier = outputs[j];
      if (out.path == "-" && earlier.path == "-") {
        return usage_error(
            fmt::format("{}: {} and {} both write to stdout; give one of them a "
                        "file name",
                        command, described(earlier), described(out)));
      }
      if (out.path != "-" && earlier.path != "-" && same_file(out.path, earlier.path)) {
        return usage_error(
            fmt::format("{}: {} and {} name the same file; give each output its "
                        "own name",
                        command, described(earlier), described(out)));
      }
    }
    if (out.path == "-") continue;
    for (const NamedPath& in : inputs) {
      if (in.path != "-" && same_file(out.path, in.path)) {
        return usage_error(
            fmt::format("{}: {} is the same file as {} {}: writing it would "
                        "destroy an input; give another name",
                        command, described(out), in.option, in.path));
      }
    }
    if (const std::string why = unwritable(out); !why.empty()) {
      return usage_error(fmt::format("{}: {}", command, why));
    }
  }
  return Ok{};
}

}  // namespace pulse
