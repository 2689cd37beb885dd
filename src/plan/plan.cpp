#include "pulse/plan/plan.hpp"

#include <fmt/format.h>

#include "pulse/base/io.hpp"

namespace pulse {

PlanMemoryOptions::PlanMemoryOptions(const MemoryModel& memory, bool zero_given)
    : precision(memory.precision),
      weight_bytes_per_param(memory.weight_bytes_per_param),
      gradient_bytes_per_param(memory.gradient_bytes_per_param),
      optimizer_bytes_per_param(memory.optimizer_bytes_per_param) {
  if (zero_given) zero_stage = memory.zero_stage;
}

MemoryModel PlanMemoryOptions::model() const {
  MemoryModel m;
  m.precision = precision;
  m.weight_bytes_per_param = weight_bytes_per_param;
  m.gradient_bytes_per_param = gradient_bytes_per_param;
  m.optimizer_bytes_per_param = optimizer_bytes_per_param;
  m.zero_stage = zero_stage.value_or(0);
  return m;
}

MemoryModel Plan::memory() const {
  return chosen ? chosen->memory : options.memory.model();
}

std::string Plan::recompute() const {
  return chosen ? chosen->recompute : options.recompute.value_or("none");
}

std::string Plan::verdict() const {
  if (pp() > 1) return "pipeline";
  return memory().zero_stage >= 2 ? "sharded data parallel" : "data parallel";
}

std::string Plan::mode() const {
  const MemoryModel m = memory();
  std::string out = fmt::format("ZeRO-{}", m.zero_stage);
  if (const std::string r = recompute(); r != "none") out += ", recompute " + r;
  if (m.precision != MemoryModel{}.precision) out += ", precision " + m.precision;
  return out;
}

std::string Plan::layout() const {
  // With sequence parallelism, the ranks that share each sample: " x Ulysses 4 x ring 2".
  std::string sequence;
  if (const auto& q = parallelism.sequence; q && q->degree > 1) {
    if (q->ulysses > 1) sequence += fmt::format(" x Ulysses {}", q->ulysses);
    if (q->ring > 1) sequence += fmt::format(" x ring {}", q->ring);
  }
  if (pp() == 1) {
    return fmt::format("data parallel x {}{}, {}, no pipeline", parallelism.dp, sequence, mode());
  }
  const bool family = strategy() == "pulse" && partition.family;
  return fmt::format("pp {} x dp {}{}, {} stages{}, {}", pp(), parallelism.dp, sequence,
                     num_stages(), family ? fmt::format(" ({})", *partition.family) : "", mode());
}

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
  return shape() == "V";
}

std::string Plan::shape() const {
  const int P = pp(), S = num_stages();
  auto on = [&](const StageLayout& layout) {
    for (StageId s = 0; s < S; ++s) {
      if (stages[s].device != layout.device[s]) return false;
    }
    return true;
  };
  if (S == P && on(sequential_layout(std::vector<LayerId>(S + 1, 0), P))) return "chain";
  if (P > 0 && S % (2 * P) == 0 && S > 0) {
    const int waves = S / (2 * P);
    if (on(wave_layout(std::vector<LayerId>(S + 1, 0), P, waves))) {
      return waves == 1 ? std::string("V") : fmt::format("W{}", waves);
    }
  }
  return "other";
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

std::string stages_digest(const std::vector<PlanStage>& stages) {
  // One line per stage; names are joined by a byte no JSON string of a layer name needs
  // (a name with a 0x1f in it still hashes unambiguously: the count leads).
  std::string text;
  const auto time = [](const std::optional<double>& t) {
    return t ? fmt::format("{:.9f}", *t) : std::string("-");
  };
  for (const PlanStage& s : stages) {
    text += fmt::format("{} {} {} {} {} {}", s.id, s.device, time(s.forward_s), time(s.backward_s),
                        time(s.backward_weight_s), s.layers.size());
    for (const std::string& l : s.layers) text += fmt::format("\x1f{}:{}", l.size(), l);
    text += '\n';
  }
  return sha256_hex(text);
}

}  // namespace pulse
