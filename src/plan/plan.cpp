#include "pulse/plan/plan.hpp"

namespace pulse {

bool Plan::split_backward() const {
  if (schedule_info.split_backward) return *schedule_info.split_backward;
  for (const auto& ops : schedule) {
    for (const PlanOp& o : ops) {
      if (o.op.kind == OpKind::backward_input || o.op.kind == OpKind::backward_weight) return true;
    }
  }
  return false;
}

bool Plan::is_v() const {
  if (num_stages() != 2 * pp()) return false;
  for (StageId s = 0; s < num_stages(); ++s) {
    if (stages[s].device != (s < pp() ? s : 2 * pp() - 1 - s)) return false;
  }
  return true;
}

std::vector<std::pair<std::string, StageId>> Plan::layer_stages() const {
  std::vector<std::pair<std::string, StageId>> out;
  for (const PlanStage& s : stages) {
    for (const std::string& l : s.layers) out.emplace_back(l, s.id);
  }
  return out;
}

std::size_t Plan::num_ops() const {
  std::size_t n = 0;
  for (const auto& ops : schedule) n += ops.size();
  return n;
}

}  // namespace pulse
