// The profiles' own queries; loading and checking them is model_loader.cpp's and
// cluster_loader.cpp's.
#include "pulse/profile/profile.hpp"

#include "pulse/profile/derive.hpp"

#include <algorithm>

namespace pulse {

std::optional<double> DeviceSpec::peak(const std::string& precision) const {
  const auto it = peak_flops.find(precision);
  if (it == peak_flops.end()) return std::nullopt;
  return it->second;
}

bool DeviceSpec::names(std::string_view type) const {
  return name == type || std::find(aliases.begin(), aliases.end(), type) != aliases.end();
}

int ModelProfile::device_type_index(std::string_view type) const {
  auto it = std::find(device_types.begin(), device_types.end(), type);
  // Another name of the same device: an alias the profile's own spec of a listed type gives,
  // or one derive.hpp knows ("NVIDIA H200" for "H200-SXM").
  if (it == device_types.end()) {
    it = std::find_if(device_types.begin(), device_types.end(), [&](const std::string& t) {
      const DeviceSpec* spec = device_spec(t);
      return (spec && spec->names(type)) || same_device(t, type);
    });
  }
  return it == device_types.end() ? -1 : static_cast<int>(it - device_types.begin());
}

const DeviceSpec* ModelProfile::device_spec(std::string_view type) const {
  for (const DeviceSpec& spec : device_specs) {
    if (spec.name == type) return &spec;
  }
  return nullptr;
}

std::int64_t ModelProfile::total_params() const {
  std::int64_t total = 0;
  for (const auto& l : layers) total += l.params;
  return total;
}

bool ClusterProfile::names_device(std::string_view type) const {
  return type == device_type || (device_spec && device_spec->names(type)) ||
         same_device(device_type, type);
}

const LinkClass& ClusterProfile::link(RankId a, RankId b) const {
  if (node_of(a) != node_of(b)) return link_classes.at(inter_node);
  return link_classes.at(intra_node.at(local_of(a)).at(local_of(b)));
}

double interpolate_time(const std::vector<double>& times, const std::vector<int>& sizes, int b) {
  return interpolate_time_at(times, sizes, static_cast<double>(b));
}

double interpolate_time_at(const std::vector<double>& times, const std::vector<int>& sizes,
                           double b) {
  if (sizes.size() == 1 || b <= sizes.front()) return times.front() * b / sizes.front();
  if (b >= sizes.back()) return times.back() * b / sizes.back();
  const auto hi = std::upper_bound(sizes.begin(), sizes.end(), b) - sizes.begin();
  const auto lo = hi - 1;
  if (sizes[lo] == b) return times[lo];
  const double w = (b - sizes[lo]) / (sizes[hi] - sizes[lo]);
  return times[lo] + w * (times[hi] - times[lo]);
}

bool is_profiled_size(const std::vector<int>& sizes, int b) {
  return std::find(sizes.begin(), sizes.end(), b) != sizes.end();
}

}  // namespace pulse
