// The cost model's small pieces: a layer's time at any microbatch size, and what a device
// must hold per parameter. Everything per microbatch is derived here, once.
#pragma once

#include <cstdint>
#include <vector>

#include "pulse/profile.hpp"

namespace pulse {

/// Seconds for a microbatch of `b` samples, from times measured at `sizes`: linear between
/// sizes, per-sample scaling of the nearest size outside them.
double interpolate_time(const std::vector<double>& times, const std::vector<int>& sizes, int b);

/// Whether `b` is one of the profiled sizes (otherwise plans say the time is interpolated).
bool is_profiled_size(const std::vector<int>& sizes, int b);

/// Per-parameter bytes of the training state. Defaults: mixed-precision Adam, 16 bytes per
/// parameter (fp16 weights 2 + fp16 gradients 2 + fp32 master, m and v 12; ZeRO paper).
struct MemoryModel {
  double weight_bytes_per_param = 2;
  double gradient_bytes_per_param = 2;
  double optimizer_bytes_per_param = 12;
  /// 0: every replica holds all optimizer state; 1: ZeRO-1, sharded over the dp replicas.
  int zero_stage = 0;

  double optimizer_share(int dp) const {
    return zero_stage >= 1 && dp > 1 ? optimizer_bytes_per_param / dp : optimizer_bytes_per_param;
  }
  std::int64_t weight_bytes(std::int64_t params) const {
    return scaled(params, weight_bytes_per_param);
  }
  std::int64_t gradient_bytes(std::int64_t params) const {
    return scaled(params, gradient_bytes_per_param);
  }
  std::int64_t optimizer_bytes(std::int64_t params, int dp) const {
    return scaled(params, optimizer_share(dp));
  }
  /// Weights + gradients + optimizer state; the one formula partition and simulator share.
  std::int64_t static_bytes(std::int64_t params, int dp) const {
    return weight_bytes(params) + gradient_bytes(params) + optimizer_bytes(params, dp);
  }

 private:
  static std::int64_t scaled(std::int64_t params, double per_param) {
    return static_cast<std::int64_t>(static_cast<double>(params) * per_param);
  }
};

}  // namespace pulse
