#include "pulse/cost/cost_model.hpp"

#include <algorithm>
#include <cmath>

namespace pulse {

double transfer_time(const LinkClass& link, int messages, std::int64_t bytes) {
  return messages * link.latency_s + static_cast<double>(bytes) / link.bandwidth_bytes_per_s;
}

double device_load(double compute_s, double send_s, bool overlap_comm) {
  return overlap_comm ? std::max(compute_s, send_s) : compute_s + send_s;
}

double quantize_time(double t) {
  return std::round(t * kTimeTicksPerSecond) / kTimeTicksPerSecond;
}

}  // namespace pulse
