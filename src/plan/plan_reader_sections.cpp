// The plan reader's later sections: what crosses devices, the schedule, the predictions
// and the rank map.
#include <algorithm>

#include <fmt/format.h>

#include "plan_reader_internal.hpp"

namespace pulse::detail {

void PlanParser::carried(const json& root) {
  for (const auto& [obj, path] : objects(root, JsonPath{}, "carried")) {
    PlanCarried k;
    k.name = text(*obj, path, "name");
    if (const json* prod = c_.member(*obj, path, "producer", true); prod && !prod->is_null()) {
      k.producer = text(*obj, path, "producer");
    }
    k.bytes_per_sample = bytes(*obj, path, "bytes_per_sample");
    k.needs_gradient = flag(*obj, path, "needs_gradient");
    p_.carried.push_back(std::move(k));
  }
}

Bytes read_bytes(JsonChecker& c, const json& obj, const JsonPath& path, std::string_view key) {
  Bytes b;
  const json* v = c.member(obj, path, key, true);
  if (!v) return b;
  const JsonPath bp = path.key(key);
  if (!v->is_object()) {
    c.fail(bp, fmt::format("expected an object, got {}", describe(*v)));
    return b;
  }
  b.activation = c.integer(*v, bp, "activation", 0).value_or(0);
  b.skip = c.integer(*v, bp, "skip", 0).value_or(0);
  b.carried = c.integer(*v, bp, "carried", 0).value_or(0);
  return b;
}

void PlanParser::transfers(const json& root) {
  const int P = p_.parallelism.pp, S = p_.num_stages();
  for (const auto& [obj, path] : objects(root, JsonPath{}, "transfers")) {
    PlanTransfer t;
    t.from_stage = std::max(0, index(*obj, path, "from_stage", S, "stage id"));
    t.to_stage = std::max(0, index(*obj, path, "to_stage", S, "stage id"));
    t.from_device = index(*obj, path, "from_device", P, "pipeline device", false);
    t.to_device = index(*obj, path, "to_device", P, "pipeline device", false);
    t.kind = text(*obj, path, "kind", false);
    t.forward = read_bytes(c_, *obj, path, "forward_bytes_per_microbatch");
    t.backward = read_bytes(c_, *obj, path, "backward_bytes_per_microbatch");
    t.forward_s = seconds(*obj, path, "forward_s", false);
    t.backward_s = seconds(*obj, path, "backward_s", false);
    t.has_times = obj->contains("forward_s") && obj->contains("backward_s");
    if (obj->contains("forward_messages"))
      t.forward_messages = integer(*obj, path, "forward_messages", 0);
    if (obj->contains("backward_messages"))
      t.backward_messages = integer(*obj, path, "backward_messages", 0);
    t.forward_link = text(*obj, path, "forward_link", false);
    t.backward_link = text(*obj, path, "backward_link", false);
    t.skips = strings(*obj, path, "skips", false);
    p_.transfers.push_back(std::move(t));
  }
}

void PlanParser::cost_model(const json& root) {
  const json* o = section(root, JsonPath{}, "cost_model", false);
  if (!o) return;
  const JsonPath path = JsonPath{}.key("cost_model");
  PlanCostModel& m = p_.cost_model;
  m.present = true;
  m.overlap_comm = flag(*o, path, "overlap_comm");
  m.allreduce = text(*o, path, "allreduce");
  if ((*o).contains("allreduce") && (*o)["allreduce"].is_string() && m.allreduce != "ring" &&
      m.allreduce != "hierarchical") {
    c_.fail(path.key("allreduce"),
            fmt::format("expected \"ring\" or \"hierarchical\", got \"{}\"", m.allreduce));
  }
}

void PlanParser::schedule(const json& root) {
  const int P = p_.parallelism.pp;
  p_.schedule.assign(P, {});
  std::vector<bool> seen(P, false);
  bool any_split = false;
  for (const auto& [obj, path] : objects(root, JsonPath{}, "schedule")) {
    const int d = index(*obj, path, "device", P, "pipeline device");
    if (d >= 0 && seen[d]) {
      c_.fail(path.key("device"), fmt::format("device {} is listed twice", d));
    }
    const json* ops = c_.array(*obj, path, "ops", true);
    if (d < 0 || seen[d] || !ops) continue;
    seen[d] = true;
    schedule_ops(*ops, path.key("ops"), p_.schedule[d]);
    for (const PlanOp& o : p_.schedule[d]) {
      any_split |= o.op.kind == OpKind::backward_input || o.op.kind == OpKind::backward_weight;
    }
  }
  p_.schedule_info.split_backward = any_split;
  const json* info = section(root, JsonPath{}, "schedule_info");
  if (!info) return;
  const JsonPath ip = JsonPath{}.key("schedule_info");
  p_.schedule_info.policy = text(*info, ip, "policy", false);
  p_.schedule_info.split_backward =
      c_.boolean(*info, ip, "split_backward", false).value_or(any_split);
  p_.schedule_info.makespan_s = seconds(*info, ip, "makespan_s", false);
}

void PlanParser::schedule_ops(const json& ops, const JsonPath& path, std::vector<PlanOp>& out) {
  const int S = p_.num_stages(), M = p_.parallelism.num_microbatches;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const json& o = ops[i];
    const JsonPath op = path.at(i);
    if (!o.is_object()) {
      c_.fail(op, fmt::format("expected an object, got {}", describe(o)));
      continue;
    }
    PlanOp x;
    const std::string letter = text(o, op, "op");
    if (!letter.empty() && (letter.size() != 1 || !op_kind_from_letter(letter[0], x.op.kind))) {
      c_.fail(op.key("op"),
              fmt::format("expected \"F\", \"B\", \"I\" or \"W\", got \"{}\"", letter));
    }
    x.op.stage = index(o, op, "stage", S, "stage id");
    x.op.microbatch = index(o, op, "mb", M, "microbatch");
    x.start_s = seconds(o, op, "start_s");
    x.end_s = seconds(o, op, "end_s");
    if (x.op.stage >= 0 && x.op.microbatch >= 0) out.push_back(x);
  }
}

void PlanParser::comm(const json& root) {
  const json* o = section(root, JsonPath{}, "comm");
  if (!o) return;
  const JsonPath cp = JsonPath{}.key("comm");
  p_.comm.p2p_bytes_per_iteration = bytes(*o, cp, "p2p_bytes_per_iteration");
  p_.comm.skip_bytes_per_iteration = bytes(*o, cp, "skip_bytes_per_iteration");
  p_.comm.activation_bytes_per_iteration = bytes(*o, cp, "activation_bytes_per_iteration", false);
  p_.comm.carried_bytes_per_iteration = bytes(*o, cp, "carried_bytes_per_iteration", false);
  p_.comm.allreduce_bytes_per_iteration = bytes(*o, cp, "allreduce_bytes_per_iteration", false);
}

void PlanParser::predicted(const json& root) {
  const json* o = section(root, JsonPath{}, "predicted");
  if (!o) return;
  const JsonPath pp = JsonPath{}.key("predicted");
  PlanPredicted& x = p_.predicted;
  x.iteration_s = c_.number(*o, pp, "iteration_s", 0.0, true).value_or(0.0);
  x.samples_per_s = c_.number(*o, pp, "samples_per_s", 0.0, true).value_or(0.0);
  x.bubble_ratio = seconds(*o, pp, "bubble_ratio");
  x.pipeline_makespan_s = seconds(*o, pp, "pipeline_makespan_s", false);
  x.allreduce_exposed_s = seconds(*o, pp, "allreduce_exposed_s", false);
  x.peak_memory_bytes = integers(*o, pp, "peak_memory_bytes");
  for (const auto& [dev, path] : objects(*o, pp, "devices", false)) {
    PlanDevicePrediction d;
    d.device = std::max(0, index(*dev, path, "device", p_.parallelism.pp, "pipeline device"));
    d.compute_s = seconds(*dev, path, "compute_s", false);
    d.send_s = seconds(*dev, path, "send_s", false);
    d.idle_s = seconds(*dev, path, "idle_s", false);
    d.allreduce_s = seconds(*dev, path, "allreduce_s", false);
    d.peak_memory_bytes = bytes(*dev, path, "peak_memory_bytes", false);
    d.capacity_bytes = bytes(*dev, path, "capacity_bytes", false);
    if (const json* m = section(*dev, path, "memory", false)) {
      const JsonPath mp = path.key("memory");
      d.memory.weights = bytes(*m, mp, "weights", false);
      d.memory.gradients = bytes(*m, mp, "gradients", false);
      d.memory.optimizer = bytes(*m, mp, "optimizer", false);
      d.memory.activations = bytes(*m, mp, "activations", false);
      d.memory.skip_cache = bytes(*m, mp, "skip_cache", false);
    }
    x.devices.push_back(d);
  }
}

void PlanParser::rank_map(const json& root) {
  const json* o = section(root, JsonPath{}, "rank_map");
  if (!o) return;
  const JsonPath rp = JsonPath{}.key("rank_map");
  PlanRankMap& x = p_.rank_map;
  x.world_size = integer(*o, rp, "world_size", 0, false);
  for (const auto& [r, path] : objects(*o, rp, "ranks")) {
    PlanRank k;
    k.rank = integer(*r, path, "rank", 0);
    k.node = integer(*r, path, "node", 0);
    k.local_device = integer(*r, path, "local_device", 0);
    k.dp_index = integer(*r, path, "dp_index", 0);
    k.pipeline_device = integer(*r, path, "pipeline_device", 0);
    x.ranks.push_back(k);
  }
  for (const char* key : {"pipeline_groups", "data_parallel_groups"}) {
    auto& groups =
        std::string_view(key) == "pipeline_groups" ? x.pipeline_groups : x.data_parallel_groups;
    const json* list = c_.array(*o, rp, key, true);
    for (std::size_t i = 0; list && i < list->size(); ++i) {
      const json holder = {{"group", (*list)[i]}};
      std::vector<RankId> group;
      for (std::int64_t v : integers(holder, rp.key(key).at(i), "group")) {
        group.push_back(static_cast<RankId>(std::min<std::int64_t>(v, 1 << 30)));
      }
      groups.push_back(std::move(group));
    }
  }
  for (std::int64_t v : integers(*o, rp, "unused_ranks", false)) {
    x.unused_ranks.push_back(static_cast<RankId>(std::min<std::int64_t>(v, 1 << 30)));
  }
}

}  // namespace pulse::detail
