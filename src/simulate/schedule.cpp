#include "pulse/simulate/schedule.hpp"

namespace pulse {

char op_letter(OpKind kind) {
  switch (kind) {
    case OpKind::forward:
      return 'F';
    case OpKind::backward:
      return 'B';
    case OpKind::backward_input:
      return 'I';
    case OpKind::backward_weight:
      return 'W';
  }
  return '?';
}

bool op_kind_from_letter(char letter, OpKind& kind) {
  for (OpKind k :
       {OpKind::forward, OpKind::backward, OpKind::backward_input, OpKind::backward_weight}) {
    if (op_letter(k) == letter) {
      kind = k;
      return true;
    }
  }
  return false;
}

}  // namespace pulse
