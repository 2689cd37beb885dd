#include "pulse/partition/partition.hpp"

#include <fmt/format.h>

namespace pulse {

Status validate_request(const PartitionRequest& r) {
  if (r.graph == nullptr) return usage_error("partition: no layer graph");
  if (r.pp < 1) return usage_error(fmt::format("partition: pp must be at least 1, got {}", r.pp));
  if (static_cast<int>(r.links.size()) != r.pp) {
    return usage_error(
        fmt::format("partition: links among {} devices for pp {}", r.links.size(), r.pp));
  }
  if (static_cast<int>(r.inflight.size()) != r.pp) {
    return usage_error(
        fmt::format("partition: {} in-flight counts for pp {}", r.inflight.size(), r.pp));
  }
  if (r.dp < 1) return usage_error(fmt::format("partition: dp must be at least 1, got {}", r.dp));
  if (r.waves < 1) {
    return usage_error(fmt::format("partition: waves must be at least 1, got {}", r.waves));
  }
  return Ok{};
}

}  // namespace pulse
