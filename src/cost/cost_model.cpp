#include "pulse/cost/cost_model.hpp"

#include <cmath>

namespace pulse {

double quantize_time(double t) {
  return std::round(t * kTimeTicksPerSecond) / kTimeTicksPerSecond;
}

}  // namespace pulse
