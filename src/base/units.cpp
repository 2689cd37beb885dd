#include "pulse/base/units.hpp"

#include <cmath>

#include <fmt/format.h>

namespace pulse {

std::string format_bytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double mag = std::fabs(b);
  if (mag >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (mag >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (mag >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string format_seconds(double seconds) {
  const double mag = std::fabs(seconds);
  if (mag >= 1.0) return fmt::format("{:.3f} s", seconds);
  if (mag >= 1e-3) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

}  // namespace pulse
