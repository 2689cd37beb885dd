#include "pulse/plan/plan_reader.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "plan_reader_internal.hpp"

namespace pulse {

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

namespace detail {

int PlanParser::index(const json& obj, const JsonPath& path, std::string_view key, int limit,
                      const char* what, bool required) {
  const json* v = c_.member(obj, path, key, required);
  if (!v) return -1;
  const bool integral = v->is_number_integer() ||
                        (v->is_number_float() && v->get<double>() == std::floor(v->get<double>()));
  if (!integral || v->get<double>() < 0 || v->get<double>() >= limit) {
    c_.fail(path.key(key), limit > 0 ? fmt::format("expected a {} from 0 to {}, got {}", what,
                                                   limit - 1, describe(*v))
                                     : fmt::format("expected a {}, but there are none", what));
    return -1;
  }
  return static_cast<int>(v->get<double>());
}

const json* PlanParser::section(const json& obj, const JsonPath& path, std::string_view key,
                                bool required) {
  const json* v = c_.member(obj, path, key, required);
  if (v && !v->is_object()) {
    c_.fail(path.key(key), fmt::format("expected an object, got {}", describe(*v)));
    return nullptr;
  }
  return v;
}

std::vector<std::pair<const json*, JsonPath>> PlanParser::objects(const json& obj,
                                                                  const JsonPath& path,
                                                                  std::string_view key,
                                                                  bool required) {
  std::vector<std::pair<const json*, JsonPath>> out;
  const json* list = c_.array(obj, path, key, required);
  if (!list) return out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const JsonPath ip = path.key(key).at(i);
    if (!(*list)[i].is_object()) {
      c_.fail(ip, fmt::format("expected an object, got {}", describe((*list)[i])));
      continue;
    }
    out.emplace_back(&(*list)[i], ip);
  }
  return out;
}

std::vector<std::string> PlanParser::strings(const json& obj, const JsonPath& path,
                                             std::string_view key, bool required) {
  std::vector<std::string> out;
  const json* list = c_.array(obj, path, key, required);
  if (!list) return out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& v = (*list)[i];
    if (!v.is_string()) {
      c_.fail(path.key(key).at(i), fmt::format("expected a string, got {}", describe(v)));
      continue;
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::vector<std::int64_t> PlanParser::integers(const json& obj, const JsonPath& path,
                                               std::string_view key, bool required) {
  std::vector<std::int64_t> out;
  const json* list = c_.array(obj, path, key, required);
  if (!list) return out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& v = (*list)[i];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
      c_.fail(path.key(key).at(i), fmt::format("expected an integer >= 0, got {}", describe(v)));
      out.push_back(0);
      continue;
    }
    out.push_back(v.get<std::int64_t>());
  }
  return out;
}

void PlanParser::run(const json& root) {
  header(root);
  options(root);
  parallelism(root);
  partition(root);
  stages(root);
  devices(root);
  skips(root);
  carried(root);
  transfers(root);
  schedule(root);
  cost_model(root);
  comm(root);
  predicted(root);
  rank_map(root);
}

void PlanParser::header(const json& root) {
  const JsonPath $;
  if (const json* gen = section(root, $, "generator")) {
    p_.generator =
        text(*gen, $.key("generator"), "name") + " " + text(*gen, $.key("generator"), "version");
  }
  if (const json* in = section(root, $, "inputs")) {
    p_.model = input(*in, $.key("inputs"), "model");
    p_.cluster = input(*in, $.key("inputs"), "cluster");
  }
}

PlanInput PlanParser::input(const json& inputs, const JsonPath& path, std::string_view key) {
  PlanInput in;
  const json* obj = section(inputs, path, key);
  if (!obj) return in;
  const JsonPath ip = path.key(key);
  in.file = text(*obj, ip, "file");
  in.name = text(*obj, ip, "name");
  in.sha256 = text(*obj, ip, "sha256");
  in.provenance = text(*obj, ip, "provenance");
  const bool hex =
      in.sha256.size() == 64 && std::all_of(in.sha256.begin(), in.sha256.end(), [](char ch) {
        return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
      });
  if (!in.sha256.empty() && !hex) {
    c_.fail(ip.key("sha256"),
            fmt::format("expected 64 lowercase hex digits, got {}", describe(json(in.sha256))));
  }
  return in;
}

void PlanParser::options(const json& root) {
  const json* o = section(root, JsonPath{}, "options");
  if (!o) return;
  const JsonPath op = JsonPath{}.key("options");
  p_.strategy = text(*o, op, "strategy", false);  // any name: strategies may be added
  const json* m = section(*o, op, "memory", false);
  if (!m) return;
  const JsonPath mp = op.key("memory");
  MemoryModel& mm = p_.memory;
  mm.weight_bytes_per_param = c_.number(*m, mp, "weight_bytes_per_param", 0.0, false, false)
                                  .value_or(mm.weight_bytes_per_param);
  mm.gradient_bytes_per_param = c_.number(*m, mp, "gradient_bytes_per_param", 0.0, false, false)
                                    .value_or(mm.gradient_bytes_per_param);
  mm.optimizer_bytes_per_param = c_.number(*m, mp, "optimizer_bytes_per_param", 0.0, false, false)
                                     .value_or(mm.optimizer_bytes_per_param);
  mm.zero_stage = integer(*m, mp, "zero_stage", 0, false);
}

void PlanParser::parallelism(const json& root) {
  const json* o = section(root, JsonPath{}, "parallelism");
  if (!o) return;
  const JsonPath pp = JsonPath{}.key("parallelism");
  PlanParallelism& x = p_.parallelism;
  x.pp = integer(*o, pp, "pp", 1);
  x.dp = integer(*o, pp, "dp", 1);
  x.microbatch_size = integer(*o, pp, "microbatch_size", 1);
  x.num_microbatches = integer(*o, pp, "num_microbatches", 1);
  x.global_batch = integer(*o, pp, "global_batch", 1);
  x.num_stages = integer(*o, pp, "num_stages", 1);
  x.devices_used = integer(*o, pp, "devices_used", 0, false);
  x.devices_total = integer(*o, pp, "devices_total", 0, false);
  x.device_type = text(*o, pp, "device_type", false);
}

void PlanParser::partition(const json& root) {
  const json* o = section(root, JsonPath{}, "partition");
  if (!o) return;
  const JsonPath pp = JsonPath{}.key("partition");
  p_.partition.method = text(*o, pp, "method");
  p_.partition.objective_s = seconds(*o, pp, "objective_s");
  p_.partition.lower_bound_s = seconds(*o, pp, "lower_bound_s");
  p_.partition.exact = flag(*o, pp, "exact");
  p_.partition.all_skips_local = flag(*o, pp, "all_skips_local");
}

void PlanParser::stages(const json& root) {
  const int S = p_.parallelism.num_stages;
  const auto list = objects(root, JsonPath{}, "stages");
  if (c_.member(root, JsonPath{}, "stages", false) && root["stages"].is_array() &&
      static_cast<int>(root["stages"].size()) != S) {
    c_.fail(JsonPath{}.key("stages"),
            fmt::format("expected {} stages ($.parallelism.num_stages), got {}", S,
                        root["stages"].size()));
  }
  for (const auto& [obj, path] : list) {
    PlanStage s;
    const int expected = static_cast<int>(p_.stages.size());
    s.id = integer(*obj, path, "id", 0);
    if (s.id != expected && obj->contains("id")) {
      c_.fail(path.key("id"),
              fmt::format("expected {} (stages are listed in id order), got {}", expected, s.id));
    }
    s.id = expected;
    s.device = std::max(0, index(*obj, path, "device", p_.parallelism.pp, "pipeline device"));
    s.side = text(*obj, path, "side", false);
    s.layers = strings(*obj, path, "layers");
    if (obj->contains("layers") && (*obj)["layers"].is_array() && s.layers.empty()) {
      c_.fail(path.key("layers"), "expected at least one layer");
    }
    s.forward_s = seconds(*obj, path, "forward_s", false);
    s.backward_s = seconds(*obj, path, "backward_s", false);
    s.has_times = obj->contains("forward_s") && obj->contains("backward_s");
    if (obj->contains("backward_weight_s")) {
      s.backward_weight_s = seconds(*obj, path, "backward_weight_s");
    }
    s.params = bytes(*obj, path, "params", false);
    s.activation_bytes_per_microbatch = bytes(*obj, path, "activation_bytes_per_microbatch", false);
    p_.stages.push_back(std::move(s));
  }
}

void PlanParser::devices(const json& root) {
  const int P = p_.parallelism.pp, S = p_.num_stages();
  for (const auto& [obj, path] : objects(root, JsonPath{}, "devices")) {
    PlanDevice d;
    d.device = std::max(0, index(*obj, path, "device", P, "pipeline device"));
    const json* list = c_.array(*obj, path, "stages", true);
    for (std::size_t i = 0; list && i < list->size(); ++i) {
      const json holder = {{"stage", (*list)[i]}};
      const int s = index(holder, path.key("stages").at(i), "stage", S, "stage id");
      if (s >= 0) d.stages.push_back(s);
    }
    d.load_s = seconds(*obj, path, "load_s", false);
    d.params = bytes(*obj, path, "params", false);
    d.inflight_limit = integer(*obj, path, "inflight_limit", 0, false);
    d.cached_skips = strings(*obj, path, "cached_skips", false);
    p_.devices.push_back(std::move(d));
  }
}

void PlanParser::skips(const json& root) {
  const int P = p_.parallelism.pp, S = p_.num_stages();
  for (const auto& [obj, path] : objects(root, JsonPath{}, "skips")) {
    PlanSkip k;
    k.producer = text(*obj, path, "producer");
    k.consumer = text(*obj, path, "consumer");
    k.name = text(*obj, path, "name", false);
    if (k.name.empty()) k.name = k.producer + "->" + k.consumer;
    k.bytes_per_sample = bytes(*obj, path, "bytes_per_sample");
    k.producer_stage = std::max(0, index(*obj, path, "producer_stage", S, "stage id"));
    k.consumer_stage = std::max(0, index(*obj, path, "consumer_stage", S, "stage id"));
    k.producer_device = index(*obj, path, "producer_device", P, "pipeline device", false);
    k.consumer_device = index(*obj, path, "consumer_device", P, "pipeline device", false);
    k.local = flag(*obj, path, "local");
    k.route = text(*obj, path, "route", false);
    if (!k.route.empty() && k.route != "local" && k.route != "direct" && k.route != "forwarded") {
      c_.fail(path.key("route"),
              fmt::format("expected \"local\", \"direct\" or \"forwarded\", got \"{}\"", k.route));
    }
    p_.skips.push_back(std::move(k));
  }
}

}  // namespace detail

Result<Plan> parse_plan(std::string_view text, const std::string& file) {
  auto root = parse_json(text, file);
  if (!root) return root.error();
  JsonChecker check(file);
  if (!root->is_object()) {
    check.fail(JsonPath{}, fmt::format("expected a plan object, got {}", describe(*root)));
    return check.error();
  }
  const json* tag = check.member(*root, JsonPath{}, "schema", true);
  if (tag && *tag != kPlanSchema) {
    const std::string value = tag->is_string() ? tag->get<std::string>() : "";
    const bool profile =
        value.rfind("pulse.model/", 0) == 0 || value.rfind("pulse.cluster/", 0) == 0;
    check.fail(JsonPath{}.key("schema"),
               profile ? fmt::format("this is a {} profile (\"{}\"), expected a plan (\"{}\")",
                                     value.rfind("pulse.model/", 0) == 0 ? "model" : "cluster",
                                     value, kPlanSchema)
                       : fmt::format("expected \"{}\" (the version this pulse-plan reads), got {}",
                                     kPlanSchema, describe(*tag)));
    return check.error();
  }
  Plan plan;
  plan.file = file;
  plan.schema = kPlanSchema;
  detail::PlanParser(check, plan).run(*root);
  if (!check.ok()) return check.error();
  return plan;
}

Result<Plan> load_plan(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_plan(*text, path);
}

}  // namespace pulse
