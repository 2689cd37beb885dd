#include "pulse/base/io.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/evp.h>


namespace pulse {

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

// Writes `content` to a hidden temporary file beside `path` (same file system, so the rename
// that follows is atomic): "dir/.plan.json.tmp-XXXXXX". Returns the temporary's name.
Result<std::string> write_temporary(const std::string& path, std::string_view content) {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string temp = dir + "." + name + ".tmp-XXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) {
    return internal_error(fmt::format("{}: cannot create a temporary file beside it: {}", path,
                                      std::strerror(errno)));
  }
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string reason = std::strerror(errno);
      ::close(fd);
      ::unlink(temp.c_str());
      return internal_error(fmt::format("{}: write failed: {}", path, reason));
    }
    written += static_cast<std::size_t>(n);
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

Status rename_into_place(const std::string& temp, const std::string& path) {
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    return internal_error(
        fmt::format("{}: cannot rename the temporary file into place: {}", path, reason));
  }
  return Ok{};
}

Status write_stdout(std::string_view content) {
  std::fwrite(content.data(), 1, content.size(), stdout);
  if (std::fflush(stdout) != 0) {
    return internal_error(fmt::format("stdout: write failed: {}", std::strerror(errno)));
  }
  return Ok{};
}

}  // namespace

Status write_file_atomically(const std::string& path, std::string_view content) {
  auto temp = write_temporary(path, content);
  if (!temp) return temp.error();
  return rename_into_place(*temp, path);
}

Status write_output(const std::string& path, std::string_view content) {
  return path == "-" ? write_stdout(content) : write_file_atomically(path, content);
}

Status write_outputs(const std::vector<Output>& outputs) {
  std::vector<std::string> temps;
  auto discard = [&] {
    for (const std::string& t : temps) ::unlink(t.c_str());
  };
  for (const Output& o : outputs) {
    if (o.path == "-") continue;
    auto temp = write_temporary(o.path, o.content);
    if (!temp) {
      discard();
      return temp.error();
    }
    temps.push_back(std::move(*temp));
  }
  for (const Output& o : outputs) {
    if (o.path != "-") continue;
    if (auto s = write_stdout(o.content); !s) {
      discard();
      return s;
    }
  }
  std::size_t next = 0;
  for (const Output& o : outputs) {
    if (o.path == "-") continue;
    if (auto s = rename_into_place(temps[next], o.path); !s) {
      temps.erase(temps.begin(), temps.begin() + static_cast<std::ptrdiff_t>(next) + 1);
      discard();
      return s;
    }
    ++next;
  }
  return Ok{};
}

}  // namespace pulse
