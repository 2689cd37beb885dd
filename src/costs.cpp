#include "pulse/costs.hpp"

#include <algorithm>

namespace pulse {

double interpolate_time(const std::vector<double>& times, const std::vector<int>& sizes, int b) {
  if (sizes.size() == 1 || b <= sizes.front()) {
    return times.front() * static_cast<double>(b) / sizes.front();
  }
  if (b >= sizes.back()) return times.back() * static_cast<double>(b) / sizes.back();
  const auto hi = std::upper_bound(sizes.begin(), sizes.end(), b) - sizes.begin();
  const auto lo = hi - 1;
  if (sizes[lo] == b) return times[lo];
  const double w = static_cast<double>(b - sizes[lo]) / (sizes[hi] - sizes[lo]);
  return times[lo] + w * (times[hi] - times[lo]);
}

bool is_profiled_size(const std::vector<int>& sizes, int b) {
  return std::find(sizes.begin(), sizes.end(), b) != sizes.end();
}

}  // namespace pulse
