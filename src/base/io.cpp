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

Status write_file_atomically(const std::string& path, std::string_view content) {
  // The temporary file sits beside the target (same file system, so rename is atomic),
  // hidden: "dir/.plan.json.tmp-XXXXXX".
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
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    return internal_error(
        fmt::format("{}: cannot rename the temporary file into place: {}", path, reason));
  }
  return Ok{};
}

Status write_output(const std::string& path, std::string_view content) {
  if (path != "-") return write_file_atomically(path, content);
  std::fwrite(content.data(), 1, content.size(), stdout);
  if (std::fflush(stdout) != 0) {
    return internal_error(fmt::format("stdout: write failed: {}", std::strerror(errno)));
  }
  return Ok{};
}

}  // namespace pulse
