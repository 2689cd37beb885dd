// Schedule pass: the order of operations on every device. F(s, m) and B(s, m) for every
// stage s and microbatch m; with a split backward, B becomes I (input gradient, which
// unblocks the previous stage) and W (weight gradient, free to fill a bubble).
#pragma once

#include <string>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"

namespace pulse {

enum class OpKind { forward, backward, backward_input, backward_weight };

/// 'F', 'B', 'I' or 'W'.
char op_letter(OpKind kind);
/// Per-op letter to kind: 'F', 'B', 'I', 'W'; false for anything else.
bool op_kind_from_letter(char letter, OpKind& kind);

/// Compute time of an op of `kind` on a stage with costs `cost` (I is backward minus its
/// weight-gradient share, W that share). Inline: the list scheduler and the engine ask it for
/// every op they run (tens of millions in a tuned plan).
inline double op_compute_s(const StageCost& cost, OpKind kind) {
  switch (kind) {
    case OpKind::forward:
      return cost.forward_s;
    case OpKind::backward:
      return cost.backward_s;
    case OpKind::backward_input:
      return cost.backward_s - cost.backward_weight_s;
    case OpKind::backward_weight:
      return cost.backward_weight_s;
  }
  return 0;
}

struct Op {
  OpKind kind = OpKind::forward;
  StageId stage = 0;
  int mb = 0;  ///< Microbatch index, 0 .. num_microbatches-1.

  bool operator==(const Op&) const = default;
};

/// Per device, the operations in execution order.
struct Schedule {
  std::vector<std::vector<Op>> device_ops;
  std::string policy;  ///< What produced it, e.g. "v-1f1b-heuristic".
  bool split_backward = false;
};

}  // namespace pulse
