// The plan codec's entry points and the IO classes' out-of-line parts. The key lists are in
// plan_sections.cpp.
#include "pulse/plan/plan_codec.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "plan_codec_internal.hpp"
#include "pulse/cost/cost_model.hpp"
#include "pulse/plan/plan_check.hpp"

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

// --- PlanReader ------------------------------------------------------------------------

namespace {

// The limits every value of its kind has (plan_check.hpp), as messages name them.
constexpr const char* kTimeLimit = "the time limit, 11.6 days";
constexpr const char* kByteLimit = "the byte count limit, 2^53";
constexpr const char* kRankLimit = "the rank limit";

// "expected at most 1024 (the pipeline degree limit), got 2147483647", or "" within bounds.
std::string beyond(double value, std::optional<double> least, std::optional<double> most,
                   const char* limit) {
  if (most && value > *most) {
    return fmt::format("expected at most {} ({}), got {}", *most, limit, value);
  }
  if (least && value < *least) {
    return fmt::format("expected at least {} ({}), got {}", *least, limit, value);
  }
  return "";
}

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
      check_.fail(
          at, fmt::format("expected {} (stages are listed in id order), got {}", position_, *id));
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
    check_.fail(at,
                fmt::format("expected at most {}, got {}", std::numeric_limits<int>::max(), *n));
    return false;
  }
  if (const std::string why = beyond(static_cast<double>(*n), {}, spec.most, spec.limit);
      !why.empty()) {
    check_.fail(at, why);
    return false;
  }
  out = static_cast<int>(*n);
  return true;
}

bool PlanReader::read(std::string_view key, const json&, std::int64_t& out, const Spec&) {
  const auto n = check_.integer(obj_, path_, key, 0, true);
  if (!n) return false;
  if (*n > kMaxBytes) {
    check_.fail(path_.key(key), beyond(static_cast<double>(*n), {}, kMaxBytes, kByteLimit));
    return false;
  }
  out = *n;
  return true;
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
  if (!x) return false;
  // Times have the time limit whatever their spec says; other numbers the spec's bounds.
  const std::string why = spec.format == Format::seconds
                              ? beyond(*x, {}, kMaxSeconds, kTimeLimit)
                              : beyond(*x, spec.least, spec.most, spec.limit);
  if (!why.empty()) {
    check_.fail(at, why);
    return false;
  }
  out = *x;
  return true;
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
    check_.fail(path_.key(key),
                fmt::format("expected {}, got \"{}\"", quoted_choices(spec.choices), *s));
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
      check_.fail(path_.key(key).at(i),
                  fmt::format("expected an integer >= 0, got {}", describe(v)));
      values.push_back(0);
      continue;
    }
    if (v.get<std::int64_t>() > kMaxBytes) {
      check_.fail(path_.key(key).at(i),
                  beyond(static_cast<double>(v.get<std::int64_t>()), {}, kMaxBytes, kByteLimit));
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
    const auto n = static_cast<double>(v.get<std::int64_t>());
    const double most = spec.most.value_or(std::numeric_limits<int>::max());
    if (const std::string why = beyond(n, {}, most, spec.limit ? spec.limit : "an int");
        !why.empty()) {
      check_.fail(at, why);
      continue;
    }
    values.push_back(static_cast<int>(v.get<std::int64_t>()));
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

void PlanReader::groups(std::string_view key,
                        std::optional<std::vector<std::vector<RankId>>>& groups) {
  if (!obj_.is_object() || !obj_.contains(std::string(key))) return;
  this->groups(key, groups.emplace());
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
    if (v.get<std::int64_t>() >= kMaxRanks) {
      check_.fail(path_.at(i), fmt::format("expected a rank below {} ({}), got {}", kMaxRanks,
                                           kRankLimit, v.get<std::int64_t>()));
      continue;
    }
    out.push_back(static_cast<int>(v.get<std::int64_t>()));
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
    const auto n = check_.integer(*v, path_.key(key), name, 0, true);
    if (n && *n > kMaxBytes) {
      check_.fail(path_.key(key).key(name),
                  beyond(static_cast<double>(*n), {}, kMaxBytes, kByteLimit));
    } else if (n) {
      out[name] = *n;
    }
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

void KeyLister::groups(std::string_view key,
                       const std::optional<std::vector<std::vector<RankId>>>&) {
  add(key, "array", false);
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

// The plan's text: the keys `keys(writer)` writes, as the plan's object. `expected_bytes`
// is reserved: a guess costs nothing where it is too high (pages never written are never
// held), and the text is not copied as it grows (at pp 512, 0.5 GB copied to 1 GB).
// With a sink, the text is handed to it as it is written, the last piece too.
template <class Fn>
PlanText text_of(Fn&& keys, std::size_t expected_bytes = 0, bool without_ops = false,
                 const TextSink* sink = nullptr) {
  PlanText out;
  out.without_ops = without_ops;
  out.sink = sink;
  out.text.reserve(sink ? PlanText::kPieceBytes * 2 : expected_bytes);
  PlanWriter::object_text(out, 0, keys);
  out.text += '\n';
  if (sink) out.hand_over();
  return out;
}

ojson figures(const Plan& plan) {
  return ojson::parse(text_of([&](PlanWriter& io) { figure_keys(io, plan); }).text);
}

}  // namespace

}  // namespace detail

namespace {

// What a plan's text takes, about: 89 bytes an op (at pp 1024 over 2048 layers, 0.37 GB for
// 4.2 million ops with everything else), a little over.
std::size_t expected_bytes(const Plan& plan) {
  return (std::size_t{1} << 20) + 96 * plan.num_ops();
}

}  // namespace

std::string write_plan(const Plan& plan) {
  return detail::text_of([&](detail::PlanWriter& io) { detail::plan_keys(io, plan); },
                         expected_bytes(plan))
      .text;
}

namespace {

// The limits that bind several degrees at once, checked before anything they size is read:
// the ranks (pp x dp) and the schedule's ops (stages x microbatches x at least F and B).
void check_degree_products(JsonChecker& check, const PlanParallelism& x) {
  const JsonPath at = JsonPath{}.key("parallelism");
  const std::int64_t ranks = static_cast<std::int64_t>(x.pp) * x.dp;
  if (ranks > kMaxRanks) {
    check.fail(at, fmt::format("pp {} x dp {} is {} ranks; expected at most {} (the rank limit)",
                               x.pp, x.dp, ranks, kMaxRanks));
  }
  const std::int64_t ops = std::int64_t{2} * x.num_stages * x.num_microbatches;
  if (ops > kMaxOps) {
    check.fail(at, fmt::format("num_stages {} x num_microbatches {} x 2 (F and B) is {} ops; "
                               "expected at most {} (the op limit)",
                               x.num_stages, x.num_microbatches, ops, kMaxOps));
  }
}

// The schedule's ops with a split backward are 3 per stage and microbatch: within the op
// limit too (the degrees allowed for 2).
void check_op_count(JsonChecker& check, const Plan& plan) {
  if (!plan.split_backward()) return;
  const std::int64_t ops = std::int64_t{3} * plan.num_stages() * plan.parallelism.num_microbatches;
  if (ops > kMaxOps) {
    check.fail(JsonPath{}.key("parallelism"),
               fmt::format("num_stages {} x num_microbatches {} x 3 (F, I and W) is {} ops; "
                           "expected at most {} (the op limit)",
                           plan.num_stages(), plan.parallelism.num_microbatches, ops, kMaxOps));
  }
}

// What the tools compute from a plan's byte counts, each within the byte limit too, so that
// no sum or product of them overflows an int64 in the replay, the figures or the exports
// (every count is at most 2^53, but bytes per sample x microbatch_size, or traffic x
// num_microbatches x dp, need not be): a microbatch's skip and carried tensors, an
// iteration's point-to-point traffic and all-reduce, the state and the activations of all
// stages with every microbatch in flight. Computed in long double, which holds them exactly
// enough to compare.
void check_byte_totals(JsonChecker& check, const Plan& plan) {
  using Wide = long double;
  const PlanParallelism& x = plan.parallelism;
  const Wide M = x.num_microbatches, dp = x.dp, b = x.microbatch_size;
  auto within = [&](const JsonPath& at, const std::string& what, Wide total) {
    if (total <= static_cast<Wide>(kMaxBytes)) return;
    check.fail(at, fmt::format("{} come to {:.4g} bytes; expected at most {} ({})", what,
                               static_cast<double>(total), kMaxBytes, detail::kByteLimit));
  };
  const std::string per_microbatch = fmt::format("x microbatch_size {}", x.microbatch_size);
  Wide activations = 0;
  for (std::size_t i = 0; i < plan.skips.size(); ++i) {
    const Wide bytes = static_cast<Wide>(plan.skips[i].bytes_per_sample) * b;
    within(JsonPath{}.key("skips").at(i).key("bytes_per_sample"),
           "bytes_per_sample " + per_microbatch, bytes);
    activations += bytes * M;
  }
  for (std::size_t i = 0; i < plan.carried.size(); ++i) {
    within(JsonPath{}.key("carried").at(i).key("bytes_per_sample"),
           "bytes_per_sample " + per_microbatch,
           static_cast<Wide>(plan.carried[i].bytes_per_sample) * b);
  }
  Wide traffic = 0;
  for (const PlanTransfer& t : plan.transfers) {
    traffic += static_cast<Wide>(t.forward.total()) + static_cast<Wide>(t.backward.total());
  }
  within(JsonPath{}.key("transfers"),
         fmt::format("an iteration's point-to-point bytes (every transfer both ways x "
                     "num_microbatches {} x dp {})",
                     x.num_microbatches, x.dp),
         traffic * M * dp);
  const MemoryModel m = plan.memory();
  Wide state = 0, gradients = 0;
  for (const PlanStage& s : plan.stages) {
    const Wide params = static_cast<Wide>(s.params.value_or(0));
    state += params *
             (m.weight_bytes_per_param + m.gradient_bytes_per_param + m.optimizer_bytes_per_param);
    gradients += params * m.gradient_bytes_per_param;
    activations += static_cast<Wide>(s.activation_bytes_per_microbatch.value_or(0)) * M;
  }
  within(JsonPath{}.key("stages"),
         "the weights, gradients and optimizer state of every stage (params x "
         "the bytes per parameter of $.chosen.memory, or of $.options.memory in a v1 plan)",
         state);
  within(JsonPath{}.key("stages"),
         fmt::format("an iteration's all-reduce bytes (2 x dp {} x every stage's gradients)", x.dp),
         2 * dp * gradients);
  within(JsonPath{}.key("stages"),
         fmt::format("the activations and skip tensors of every stage with all {} microbatches "
                     "in flight",
                     x.num_microbatches),
         activations);
}

}  // namespace

namespace {

// parse_plan's first half: the text's keys read into a plan, every problem of shape and of
// each value's limits recorded in `check`. An error where nothing more can be read (not
// JSON, not a plan, degrees unreadable or over a limit).
Result<Plan> read_keys(std::string_view text, const std::string& file, JsonChecker& check) {
  // The ops, most of a plan, parsed as records (json_records.hpp): a plan at pp 512 is
  // 0.4 GB of text, and its ops would be 2.5 GB as a document.
  static const JsonRecordPath kOps = {"schedule", "[]", "ops"};
  auto root = parse_json(text, file, JsonLimits{}, &kOps);
  if (!root) return root.error();
  if (!root->is_object()) {
    check.fail(JsonPath{}, fmt::format("expected a plan object, got {}", describe(*root)));
    return check.error();
  }
  const json* tag = check.member(*root, JsonPath{}, "schema", true);
  if (tag && *tag != kPlanSchema && *tag != kPlanSchemaV1) {
    const std::string value = tag->is_string() ? tag->get<std::string>() : "";
    const bool model = value.rfind("pulse.model/", 0) == 0;
    const bool profile = model || value.rfind("pulse.cluster/", 0) == 0;
    check.fail(JsonPath{}.key("schema"),
               profile ? fmt::format("this is a {} profile (\"{}\"), expected a plan (\"{}\")",
                                     model ? "model" : "cluster", value, kPlanSchema)
                       : fmt::format("expected \"{}\" or \"{}\" (the versions this "
                                     "pulse-plan reads), got {}",
                                     kPlanSchema, kPlanSchemaV1, describe(*tag)));
    return check.error();
  }
  Plan plan;
  plan.file = file;
  if (tag) plan.schema = tag->get<std::string>();  // a v1 plan writes back as v1
  // The degrees first: they bound every index and size everything read after them, so a
  // plan whose degrees are unreadable or over a limit is refused before the rest is read
  // (its other problems would be echoes of theirs).
  if (root->contains("parallelism")) {
    detail::PlanReader degrees(check, *root, JsonPath{}, plan);
    detail::degree_keys(degrees, plan);
    if (check.ok()) check_degree_products(check, plan.parallelism);
    if (!check.ok()) return check.error();
  }
  detail::PlanReader io(check, *root, JsonPath{}, plan);
  detail::plan_keys(io, plan);
  return plan;
}

// parse_plan's second half: the limits that bind values of several sections, then the
// structure and the claims.
Result<Plan> check_read(Plan plan, JsonChecker& check, PlanCheck checks) {
  if (check.ok()) check_op_count(check, plan);
  if (check.ok()) check_byte_totals(check, plan);
  if (!check.ok()) return check.error();
  if (checks == PlanCheck::structure) {
    for (const PlanProblem& p : check_plan_structure(plan)) check.fail(p.path, p.message);
    if (!check.ok()) return check.error();
    for (const PlanProblem& p : check_plan_claims(plan)) check.fail(p.path, p.message);
    if (!check.ok()) return check.error();
  }
  return plan;
}

}  // namespace

Result<Plan> parse_plan(std::string_view text, const std::string& file, PlanCheck checks) {
  JsonChecker check(file);
  auto plan = read_keys(text, file, check);
  if (!plan) return plan.error();
  return check_read(std::move(*plan), check, checks);
}

namespace {

// Where a number of the plan's text is not finite (`bad`): JSON has none, and no plan is
// written.
Error not_finite(const std::pair<JsonPath, double>& bad) {
  return internal_error(
      fmt::format("the plan made has {} at {}; a plan holds finite numbers "
                  "only, so none is written",
                  bad.second, bad.first.str()));
}

// The first time of an op that is not finite, with its path.
std::optional<std::pair<JsonPath, double>> op_not_finite(const Plan& plan) {
  for (std::size_t d = 0; d < plan.schedule.size(); ++d) {
    for (std::size_t k = 0; k < plan.schedule[d].size(); ++k) {
      const PlanOp& op = plan.schedule[d][k];
      for (const auto& [key, t] : {std::pair{"start_s", op.start_s}, {"end_s", op.end_s}}) {
        if (!std::isfinite(t)) {
          return std::pair{JsonPath{}.key("schedule").at(d).key("ops").at(k).key(key), t};
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace

Status check_encodable(const Plan& plan) {
  // What the reader would refuse (a time over the limit, an op missing) is refused here, so
  // that no command writes a plan the others cannot read. The plan is read back as the
  // reader reads its text, all but the ops (at pp 512 over 2048 layers 4.2 million, whose
  // 0.6 GB of text, seven lines an op as plans were then written, took 4 s to read back):
  // the rest from the text without them, the ops from the plan (read_back_ops), then every
  // check the reader makes of the whole. A number that is not finite is the planner's
  // error, named first.
  const std::string file = plan.file.empty() ? "the plan" : plan.file;
  const detail::PlanText rest =
      detail::text_of([&](detail::PlanWriter& io) { detail::plan_keys(io, plan); }, 0, true);
  if (rest.non_finite) return not_finite(*rest.non_finite);
  if (auto bad = op_not_finite(plan)) return not_finite(*bad);
  JsonChecker check(file);
  auto read = read_keys(rest.text, file, check);
  if (read) {
    detail::read_back_ops(plan, *read, check);
    read = check_read(std::move(*read), check, PlanCheck::structure);
  }
  if (!read) {
    return input_error("the plan made is beyond what a plan may state:\n" + read.error().message);
  }
  return Ok{};
}

Status stream_plan(const Plan& plan, const TextSink& sink) {
  const detail::PlanText out = detail::text_of(
      [&](detail::PlanWriter& io) { detail::plan_keys(io, plan); }, 0, false, &sink);
  if (out.non_finite) return not_finite(*out.non_finite);
  return Ok{};
}

Result<std::string> encode_plan(const Plan& plan) {
  if (Status s = check_encodable(plan); !s) return s.error();
  return write_plan(plan);
}

Result<std::string> read_plan_text(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > static_cast<std::uintmax_t>(kMaxPlanFileBytes)) {
    return input_error(
        fmt::format("{}: the file has {} bytes; a plan has at most {} (1 GiB, the "
                    "plan file limit)",
                    path, size, kMaxPlanFileBytes));
  }
  return read_text_file(path, kMaxPlanFileBytes, "the plan file limit, 1 GiB");
}

Result<Plan> load_plan(const std::string& path, PlanCheck checks) {
  auto text = read_plan_text(path);
  if (!text) return text.error();
  return parse_plan(*text, path, checks);
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
