// An option table's vocabulary (options.hpp).

#include "pulse/base/options.hpp"

namespace pulse {

std::string option_long_name(const char* name) {
  const std::string n = name;
  return n.substr(0, n.find(','));
}

}  // namespace pulse
