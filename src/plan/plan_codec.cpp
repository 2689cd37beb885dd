// The plan codec's entry points and the IO classes' out-of-line parts. The key lists are in
// plan_sections.cpp.
#include "pulse/plan/plan_codec.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "plan_codec_internal.hpp"
#include "pulse/cost/cost_model.hpp"

namespace pulse {

namespace detail {

// The quanta of the plan's other numbers: ratios (bubble, gap) and rates (samples/s).
constexpr double kRatioTicks = 1e9;
constexpr double kRateTicks = 1e6;

double rounded(double value, Format format) {
  switch (format) {
    case Format::raw:
      return value;
    case Format::seconds:
      return quantize_time(value);
    case Format::ratio:
      return std::round(value * kRatioTicks) / kRatioTicks;
    case Format::rate:
      return std::round(value * kRateTicks) / kRateTicks;
  }
  return value;
}

// --- PlanWriter ------------------------------------------------------------------------

void PlanWriter::groups(std::string_view key, const std::vector<std::vector<RankId>>& groups) {
  ojson array = ojson::array();
  for (const auto& g : groups) array.push_back(g);
  out_[std::string(key)] = array;
}

void PlanWriter::byte_map(std::string_view key,
                          const std::optional<std::map<std::string, std::int64_t>>& values) {
  if (!values) return;
  ojson out = ojson::object();
  for (const auto& [name, bytes] : *values) out[name] = bytes;
  out_[std::string(key)] = out;
}

// --- PlanReader ------------------------------------------------------------------------

namespace {

// Ranks in a plan are bounded well below INT_MAX before they are stored as ints.
constexpr std::int64_t kRankCeiling = 1 << 30;

std::string quoted_choices(const std::vector<std::string_view>& choices) {
  std::string out;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += i + 1 == choices.size() ? " or " : ", ";
    out += fmt::format("\"{}\"", choices[i]);
  }
  return out;
}

}  // namespace

std::string PlanReader::fmt_expected_object(const json& v) {
  return fmt::format("expected an object, got {}", describe(v));
}

void PlanReader::check_stage_count(std::string_view key, std::size_t count) {
  const int S = plan_.parallelism.num_stages;
  if (static_cast<int>(count) != S) {
    check_.fail(path_.key(key),
            fmt::format("expected {} stages ($.parallelism.num_stages), got {}", S, count));
  }
}

int PlanReader::read_index(const json& v, const JsonPath& at, IndexOf of) {
  int limit = 0;
  const char* what = "";
  switch (of) {
    case IndexOf::stage:
    case IndexOf::stage_in_order:
      limit = plan_.num_stages();
      what = "stage id";
      break;
    case IndexOf::device:
      limit = plan_.parallelism.pp;
      what = "pipeline device";
      break;
    case IndexOf::microbatch:
      limit = plan_.parallelism.num_microbatches;
      what = "microbatch";
      break;
  }
  const bool integral = v.is_number_integer() ||
                        (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
  if (!integral || v.get<double>() < 0 || v.get<double>() >= limit) {
    check_.fail(at, limit > 0 ? fmt::format("expected a {} from 0 to {}, got {}", what, limit - 1,
                                        describe(v))
                          : fmt::format("expected a {}, but there are none", what));
    return -1;
  }
  return static_cast<int>(v.get<double>());
}

bool PlanReader::read(std::string_view key, const json& v, int& out, const Spec& spec) {
  const JsonPath at = path_.key(key);
  if (spec.kind == Kind::index && spec.index == IndexOf::stage_in_order) {
    // A stage's id is its position; a wrong one is reported, the position kept.
    const auto id = check_.integer(obj_, path_, key, 0, true);
    if (id && *id != position_) {
      check_.fail(at, fmt::format("expected {} (stages are listed in id order), got {}", position_,
                              *id));
    }
    out = position_;
    return true;
  }
  if (spec.kind == Kind::index) {
    out = read_index(v, at, spec.index);
    return out >= 0;
  }
  const auto n = check_.integer(obj_, path_, key, spec.minimum, true);
  if (!n) return false;
  if (*n > std::numeric_limits<int>::max()) {
    check_.fail(at, fmt::format("expected at most {}, got {}", std::numeric_limits<int>::max(), *n));
    return false;
  }
  out = static_cast<int>(*n);
  return true;
}

bool PlanReader::read(std::string_view key, const json&, std::int64_t& out, const Spec&) {
  const auto n = check_.integer(obj_, path_, key, 0, true);
  if (n) out = *n;
  return n.has_value();
}

bool PlanReader::read(std::string_view key, const json& v, double& out, const Spec& spec) {
  const JsonPath at = path_.key(key);
  std::optional<double> x;
  if (spec.range == Range::finite) {
    if (v.is_number() && std::isfinite(v.get<double>())) {
      x = v.get<double>();
    } else {
      check_.fail(at, fmt::format("expected a finite number, got {}", describe(v)));
    }
  } else {
    x = check_.number(v, at, 0.0, spec.range == Range::positive);
  }
  if (x) out = *x;
  return x.has_value();
}

bool PlanReader::read(std::string_view key, const json&, bool& out, const Spec&) {
  const auto b = check_.boolean(obj_, path_, key, true);
  if (b) out = *b;
  return b.has_value();
}

bool PlanReader::read(std::string_view key, const json& v, std::string& out, const Spec& spec) {
  const JsonPath at = path_.key(key);
  if (spec.kind == Kind::note) {
    if (!v.is_string()) {
      check_.fail(at, fmt::format("expected a string, got {}", describe(v)));
      return false;
    }
    out = v.get<std::string>();
    return true;
  }
  const auto s = check_.string(obj_, path_, key, true);
  if (!s) return false;
  if (spec.kind == Kind::sha256 &&
      (s->size() != 64 || !std::all_of(s->begin(), s->end(), [](char ch) {
        return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
      }))) {
    check_.fail(at, fmt::format("expected 64 lowercase hex digits, got {}", describe(v)));
    return false;
  }
  if (spec.kind == Kind::choice &&
      std::find(spec.choices.begin(), spec.choices.end(), *s) == spec.choices.end()) {
    check_.fail(at, fmt::format("expected {}, got \"{}\"", quoted_choices(spec.choices), *s));
    return false;
  }
  out = *s;
  return true;
}

bool PlanReader::read(std::string_view key, const json&, OpKind& out, const Spec& spec) {
  const auto s = check_.string(obj_, path_, key, true);
  if (!s) return false;
  if (s->size() != 1 || !op_kind_from_letter((*s)[0], out)) {
    check_.fail(path_.key(key), fmt::format("expected {}, got \"{}\"", quoted_choices(spec.choices), *s));
    return false;
  }
  return true;
}

void PlanReader::list(std::string_view key, std::vector<std::string>& values, const Spec& spec) {
  const bool required = need_of<std::vector<std::string>>(spec) == Need::required;
  const json* list = check_.array(obj_, path_, key, required);
  if (!list) return;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& v = (*list)[i];
    if (!v.is_string()) {
      check_.fail(path_.key(key).at(i), fmt::format("expected a string, got {}", describe(v)));
      continue;
    }
    values.push_back(v.get<std::string>());
  }
  if (spec.noun && values.empty()) {
    check_.fail(path_.key(key), fmt::format("expected at least one {}", spec.noun));
  }
}

void PlanReader::list(std::string_view key, std::vector<std::int64_t>& values, const Spec& spec) {
  const bool required = need_of<std::vector<std::int64_t>>(spec) == Need::required;
  const json* list = check_.array(obj_, path_, key, required);
  if (!list) return;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& v = (*list)[i];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
      check_.fail(path_.key(key).at(i), fmt::format("expected an integer >= 0, got {}", describe(v)));
      values.push_back(0);
      continue;
    }
    values.push_back(v.get<std::int64_t>());
  }
}

void PlanReader::list(std::string_view key, std::vector<int>& values, const Spec& spec) {
  const bool required = need_of<std::vector<int>>(spec) == Need::required;
  const json* list = check_.array(obj_, path_, key, required);
  if (!list) return;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& v = (*list)[i];
    const JsonPath at = path_.key(key).at(i);
    if (spec.kind == Kind::index) {
      const int x = read_index(v, at, spec.index);
      if (x >= 0) values.push_back(x);
      continue;
    }
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
      check_.fail(at, fmt::format("expected an integer >= 0, got {}", describe(v)));
      continue;
    }
    values.push_back(static_cast<int>(std::min(v.get<std::int64_t>(), kRankCeiling)));
  }
}

void PlanReader::groups(std::string_view key, std::vector<std::vector<RankId>>& groups) {
  const json* list = check_.array(obj_, path_, key, true);
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    PlanReader element(check_, (*list)[i], path_.key(key).at(i), plan_);
    std::vector<RankId> group;
    element.list_elements((*list)[i], group);
    groups.push_back(std::move(group));
  }
}

void PlanReader::list_elements(const json& array, std::vector<int>& out) {
  if (!array.is_array()) {
    check_.fail(path_, fmt::format("expected an array, got {}", describe(array)));
    return;
  }
  for (std::size_t i = 0; i < array.size(); ++i) {
    const json& v = array[i];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
      check_.fail(path_.at(i), fmt::format("expected an integer >= 0, got {}", describe(v)));
      continue;
    }
    out.push_back(static_cast<int>(std::min(v.get<std::int64_t>(), kRankCeiling)));
  }
}

void PlanReader::byte_map(std::string_view key,
                          std::optional<std::map<std::string, std::int64_t>>& values) {
  const json* v = check_.member(obj_, path_, key, false);
  if (!v) return;
  if (!v->is_object()) {
    check_.fail(path_.key(key), fmt_expected_object(*v));
    return;
  }
  std::map<std::string, std::int64_t> out;
  for (const auto& [name, bytes] : v->items()) {
    if (const auto n = check_.integer(*v, path_.key(key), name, 0, true)) out[name] = *n;
  }
  values = std::move(out);
}

// --- KeyLister -------------------------------------------------------------------------

std::string KeyLister::type_of(const Spec& spec) {
  switch (spec.kind) {
    case Kind::count:
    case Kind::bytes:
    case Kind::index:
      return "integer";
    case Kind::number:
      return "number";
    case Kind::flag:
      return "boolean";
    case Kind::text:
    case Kind::note:
    case Kind::choice:
    case Kind::op:
    case Kind::sha256:
      return "string";
  }
  return "";
}

void KeyLister::groups(std::string_view key, const std::vector<std::vector<RankId>>&) {
  add(key, "array", true);
  out_.push_back({path_ + "." + std::string(key) + "[]", "array", false});
  out_.push_back({path_ + "." + std::string(key) + "[][]", "integer", false});
}

void KeyLister::byte_map(std::string_view key,
                         const std::optional<std::map<std::string, std::int64_t>>&) {
  add(key, "object", false);
  out_.push_back({path_ + "." + std::string(key) + ".*", "integer", false});
}

namespace {

// Numbers agree when within a nanosecond or a part in 10^9 (plans state times to the
// nanosecond; a hand-written plan may carry more digits).
bool same_number(double a, double b) {
  return std::abs(a - b) <= kTimeQuantum_s + 1e-9 * std::max(std::abs(a), std::abs(b));
}

void compare(const ojson& plan, const ojson& replay, const std::string& path,
             std::vector<FigureDifference>& out) {
  if (plan.is_object() && replay.is_object()) {
    for (const auto& [key, value] : replay.items()) {
      const std::string at = path + "." + key;
      if (!plan.contains(key)) {
        out.push_back({at, "(absent)", value.dump()});
        continue;
      }
      compare(plan[key], value, at, out);
    }
    for (const auto& [key, value] : plan.items()) {
      if (!replay.contains(key)) out.push_back({path + "." + key, value.dump(), "(absent)"});
    }
    return;
  }
  if (plan.is_array() && replay.is_array() && plan.size() == replay.size()) {
    for (std::size_t i = 0; i < plan.size(); ++i) {
      compare(plan[i], replay[i], fmt::format("{}[{}]", path, i), out);
    }
    return;
  }
  if (plan.is_number() && replay.is_number()) {
    if (!same_number(plan.get<double>(), replay.get<double>())) {
      out.push_back({path, plan.dump(), replay.dump()});
    }
    return;
  }
  if (plan != replay) out.push_back({path, plan.dump(), replay.dump()});
}

ojson figures(const Plan& plan) {
  ojson out = ojson::object();
  PlanWriter io(out);
  figure_keys(io, plan);
  return out;
}

}  // namespace

}  // namespace detail

std::string write_plan(const Plan& plan) {
  detail::ojson out = detail::ojson::object();
  detail::PlanWriter io(out);
  detail::plan_keys(io, plan);
  return out.dump(2, ' ', false, detail::ojson::error_handler_t::replace) + "\n";
}

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
    const bool model = value.rfind("pulse.model/", 0) == 0;
    const bool profile = model || value.rfind("pulse.cluster/", 0) == 0;
    check.fail(JsonPath{}.key("schema"),
               profile ? fmt::format("this is a {} profile (\"{}\"), expected a plan (\"{}\")",
                                     model ? "model" : "cluster", value, kPlanSchema)
                       : fmt::format("expected \"{}\" (the version this pulse-plan reads), got {}",
                                     kPlanSchema, describe(*tag)));
    return check.error();
  }
  Plan plan;
  plan.file = file;
  detail::PlanReader io(check, *root, JsonPath{}, plan);
  detail::plan_keys(io, plan);
  if (!check.ok()) return check.error();
  return plan;
}

Result<Plan> load_plan(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_plan(*text, path);
}

std::vector<PlanKey> plan_keys() {
  std::vector<PlanKey> out;
  detail::KeyLister io(out, "$");
  detail::plan_keys(io, Plan{});
  return out;
}

nlohmann::ordered_json figure_sections(const Plan& plan) {
  return detail::figures(plan);
}

std::vector<FigureDifference> compare_figures(const Plan& plan, const Plan& replay) {
  std::vector<FigureDifference> out;
  detail::compare(detail::figures(plan), detail::figures(replay), "$", out);
  return out;
}

}  // namespace pulse
