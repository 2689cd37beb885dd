#include "pulse/profile/scaling.hpp"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "pulse/base/limits.hpp"

namespace pulse {

namespace {

constexpr std::string_view kRangeLow = "range-low";
constexpr std::string_view kRangeHigh = "range-high";

// A number that fills `text` exactly.
std::optional<double> whole_number(std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

std::optional<double> parse_scale(std::string_view text) {
  const std::optional<double> v = whole_number(text);
  if (!v || !std::isfinite(*v) || !(*v > 0)) return std::nullopt;
  return v;
}

Result<std::optional<TimeRange>> parse_time_range(std::string_view line) {
  if (line.substr(0, kTimeRangePrefix.size()) != kTimeRangePrefix) {
    return std::optional<TimeRange>{};
  }
  const auto malformed = [&](std::string_view why) {
    return input_error(
        fmt::format("\"{}\": {}; expected \"{}DEVICE: xLOW to xHIGH\" with 0 < "
                    "LOW <= HIGH",
                    line, why, kTimeRangePrefix));
  };
  const std::string_view rest = line.substr(kTimeRangePrefix.size());
  const std::size_t colon = rest.find(": x");
  if (colon == std::string_view::npos || colon == 0) return malformed("no \"DEVICE: x\"");
  const std::string_view numbers = rest.substr(colon + 3);
  const std::size_t to = numbers.find(" to x");
  if (to == std::string_view::npos) return malformed("no \" to x\"");
  std::string_view high_text = numbers.substr(to + 5);
  high_text = high_text.substr(0, high_text.find(' '));
  const std::optional<double> low = parse_scale(numbers.substr(0, to));
  const std::optional<double> high = parse_scale(high_text);
  if (!low || !high) return malformed("LOW and HIGH must be positive numbers");
  if (*low > *high) return malformed("LOW is above HIGH");
  return std::optional<TimeRange>{TimeRange{std::string(rest.substr(0, colon)), *low, *high}};
}

Result<TimeRange> stated_time_range(const ModelProfile& model, std::string_view device_type) {
  std::optional<TimeRange> found;
  std::size_t found_at = 0;
  const std::vector<std::string>& lines = model.provenance.assumptions;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string where = fmt::format("{}: $.provenance.assumptions[{}]", model.file.path, i);
    auto range = parse_time_range(lines[i]);
    if (!range) return input_error(fmt::format("{}: {}", where, range.error().message));
    if (!*range || (*range)->device_type != device_type) continue;
    if (found) {
      return input_error(
          fmt::format("{}: a second time range for {} (the first is "
                      "assumptions[{}])",
                      where, device_type, found_at));
    }
    found = **range;
    found_at = i;
  }
  if (!found) {
    return input_error(
        fmt::format("{}: model {} states no time range for {} (a "
                    "provenance.assumptions line \"{}{}: xLOW to xHIGH\")",
                    model.file.path, model.name, device_type, kTimeRangePrefix, device_type));
  }
  return *found;
}

Result<CostScales> parse_compute_scale(std::string_view text, std::string_view option) {
  CostScales scales;
  if (text == kRangeLow || text == kRangeHigh) {
    scales.compute_from = std::string(text);
    return scales;
  }
  const std::optional<double> v = parse_scale(text);
  if (!v) {
    return usage_error(fmt::format("{} must be a positive, finite number, {} or {}, got \"{}\"",
                                   option, kRangeLow, kRangeHigh, text));
  }
  scales.compute = *v;
  return scales;
}

Status resolve_compute_scale(CostScales& scales, const ModelProfile& model,
                             std::string_view device_type, std::string_view option) {
  if (scales.compute_from.empty()) return Ok{};
  auto range = stated_time_range(model, device_type);
  if (!range) {
    return input_error(
        fmt::format("{} {}: {}", option, scales.compute_from, range.error().message));
  }
  scales.compute = scales.compute_from == kRangeLow ? range->low : range->high;
  return Ok{};
}

Status check_scale_limit(std::string_view command, std::string_view option, double factor) {
  if (factor >= kMinScale && factor <= kMaxScale) return Ok{};
  return usage_error(
      fmt::format("{}: {} must be from {:g} to {:g} (the what-if factor limit), "
                  "got {:g}",
                  command, option, kMinScale, kMaxScale, factor));
}

void scale_times(ModelProfile& model, std::string_view device_type, double factor) {
  const int t = model.device_type_index(device_type);
  if (t < 0 || factor == 1) return;
  for (Layer& layer : model.layers) {
    for (double& s : layer.forward_s[t]) s *= factor;
    for (double& s : layer.backward_s[t]) s *= factor;
  }
  for (FrozenComponent& c : model.frozen) {
    for (double& s : c.forward_s[t]) s *= factor;
  }
}

void scale_links(ClusterProfile& cluster, double factor) {
  if (factor == 1) return;
  for (LinkClass& link : cluster.link_classes) {
    link.bandwidth_bytes_per_s *= factor;
    link.latency_s /= factor;
  }
}

void apply_scales(const CostScales& scales, ModelProfile& model, ClusterProfile& cluster) {
  scale_times(model, cluster.device_type, scales.compute);
  scale_links(cluster, scales.links);
}

void apply_headroom(double fraction, ClusterProfile& cluster) {
  if (fraction >= 1 || !(fraction > 0)) return;
  const auto usable = static_cast<std::int64_t>(
      std::floor(fraction * static_cast<double>(cluster.usable_memory())));
  cluster.reserved_bytes = cluster.memory_bytes - usable;
}

}  // namespace pulse
