#include "pulse/base/result.hpp"

namespace pulse {

int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::infeasible:
      return 1;
    case ErrorKind::usage:
    case ErrorKind::input:
      return 2;
    case ErrorKind::internal:
      return 3;
  }
  return 3;
}

}  // namespace pulse
