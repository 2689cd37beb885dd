// The plan job's option table (plan_options.hpp): one record per option, read and checked
// here and nowhere else.

#include "pulse/compile/plan_options.hpp"

#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "pulse/base/defaults.hpp"
#include "pulse/base/limits.hpp"
#include "pulse/profile/recompute.hpp"
#include "pulse/profile/scaling.hpp"
#include "pulse/simulate/frozen.hpp"

namespace pulse {

namespace {

// An integer as an integer, anything else as fmt prints it ("inf", "0.5").
std::string number_text(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e18) {
    return fmt::format("{}", static_cast<long long>(v));
  }
  return fmt::format("{}", v);
}

std::optional<double> as_number(const std::optional<int>& v) {
  if (!v) return std::nullopt;
  return *v;
}
std::optional<double> as_number(double v) {
  return v;
}

// A value stored as given: in the job (the files) or in its options.
template <auto member, class T>
Status store(const OptionValue& value, PlanJob& job) {
  job.*member = std::get<T>(value);
  return Ok{};
}
template <auto member, class T>
Status store_option(const OptionValue& value, PlanJob& job) {
  job.options.*member = std::get<T>(value);
  return Ok{};
}

// An integer or a number held to the record's bounds.
template <auto member>
Status check_within(const OptionRecord& self, const PlanOptions& options) {
  return self.within(as_number(options.*member));
}

const std::string& text_of(const OptionValue& v) {
  return std::get<std::string>(v);
}

// --activation-budget: a byte count, bare or with a binary unit, or a fraction of the
// device's usable memory written with a decimal point. Anything else is a usage error.
Status read_activation_budget(const OptionValue& value, PlanJob& job) {
  const std::string& text = text_of(value);
  PlanOptions& o = job.options;
  const Error bad = usage_error(fmt::format(
      "plan: --activation-budget must be a byte count (such as 8589934592 or 8GiB) or a "
      "fraction of the device's usable memory in (0, 1] with a decimal point (such as 0.5), "
      "got \"{}\"",
      text));
  if (text.find_first_of(".eE") != std::string::npos) {
    char* end = nullptr;
    const double f = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(f > 0 && f <= 1)) return bad;
    o.activation_budget_fraction = f;
    return Ok{};
  }
  const std::size_t digits = text.find_first_not_of("0123456789");
  if (text.empty() || digits == 0 || text.size() > 24) return bad;
  const std::string unit = digits == std::string::npos ? "" : text.substr(digits);
  const std::pair<const char*, int> units[] = {{"", 0},     {"B", 0},    {"KiB", 10},
                                               {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  for (const auto& [name, shift] : units) {
    if (unit != name) continue;
    const long double count = std::strtold(text.substr(0, digits).c_str(), nullptr);
    const long double bytes = count * std::pow(2.0L, shift);
    if (bytes < 1 || bytes > 9.0e18L) return bad;
    o.activation_budget_bytes = static_cast<std::int64_t>(bytes);
    return Ok{};
  }
  return bad;
}

Status check_activation_budget(const OptionRecord&, const PlanOptions& o) {
  if (o.activation_budget_bytes && o.activation_budget_fraction) {
    return usage_error("plan: --activation-budget is a byte count or a fraction, not both");
  }
  if (o.activation_budget_bytes && *o.activation_budget_bytes < 1) {
    return usage_error(fmt::format("plan: --activation-budget must be at least 1 byte, got {}",
                                   *o.activation_budget_bytes));
  }
  const std::optional<double>& f = o.activation_budget_fraction;
  if (f && !(*f > 0 && *f <= 1)) {
    return usage_error(
        fmt::format("plan: --activation-budget as a fraction must be in (0, 1], got {}", *f));
  }
  return Ok{};
}

Status read_strategy(const OptionValue& value, PlanJob& job) {
  if (const auto s = parse_strategy(text_of(value))) {
    job.options.strategy = *s;
    return Ok{};
  }
  return usage_error(
      fmt::format("plan: --strategy must be one of {} (sequential means 1f1b), got \"{}\"",
                  strategy_names(), text_of(value)));
}

std::string family_names(Strategy s) {
  std::string names;
  for (const Family& f : families(s)) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

Status check_family(const OptionRecord&, const PlanOptions& o) {
  if (!o.family) return Ok{};
  if (o.strategy != Strategy::pulse) {
    return usage_error(fmt::format("plan: --family applies to --strategy pulse, not {}",
                                   strategy_name(o.strategy)));
  }
  if (!find_family(*o.family)) {
    return usage_error(
        fmt::format("plan: --family {} is not a family of strategy {} (families: {})", *o.family,
                    strategy_name(o.strategy), family_names(o.strategy)));
  }
  return Ok{};
}

// --cuts: layer names separated by commas, each starting a stage after the first.
Status read_cuts(const OptionValue& value, PlanJob& job) {
  const std::string& text = text_of(value);
  std::vector<std::string> names;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    names.push_back(text.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const std::string& n : names) {
    if (n.empty()) {
      return usage_error(fmt::format(
          "plan: --cuts must be layer names separated by commas (the first layer of each stage "
          "after the first), got \"{}\"",
          text));
    }
  }
  job.options.cuts = std::move(names);
  return Ok{};
}

// The rules that need no model; check_request holds the names to the model's layers.
Status check_cuts(const OptionRecord&, const PlanOptions& o) {
  std::map<std::string, int> seen;
  for (const std::string& n : o.cuts) {
    if (n.empty()) return usage_error("plan: --cuts names an empty layer");
    if (++seen[n] > 1) {
      return usage_error(fmt::format("plan: --cuts names layer {} twice", n));
    }
  }
  return Ok{};
}

Status read_compute_scale(const OptionValue& value, PlanJob& job) {
  auto parsed = parse_compute_scale(text_of(value));
  if (!parsed) return usage_error("plan: " + parsed.error().message);
  job.options.scales.compute = parsed->compute;
  job.options.scales.compute_from = parsed->compute_from;
  return Ok{};
}

Status read_link_scale(const OptionValue& value, PlanJob& job) {
  const std::optional<double> links = parse_scale(text_of(value));
  if (!links) {
    return usage_error(fmt::format(
        "plan: --link-scale must be a positive, finite number, got \"{}\"", text_of(value)));
  }
  job.options.scales.links = *links;
  return Ok{};
}

// A range word is read from the model's time range first (compile_plan checks it then).
Status check_compute_scale(const OptionRecord&, const PlanOptions& o) {
  if (!o.scales.compute_from.empty()) return Ok{};
  return check_scale_limit("plan", "--compute-scale", o.scales.compute);
}

Status check_link_scale(const OptionRecord&, const PlanOptions& o) {
  return check_scale_limit("plan", "--link-scale", o.scales.links);
}

Status check_zero(const OptionRecord&, const PlanOptions& o) {
  const int zero = o.memory.zero_stage;
  if (zero >= 0 && zero <= 3) return Ok{};
  return usage_error(fmt::format("plan: --zero must be 0, 1, 2 or 3, got {}", zero));
}

// MemoryModel::set_precision's names (include/pulse/cost/memory.hpp), for the messages.
constexpr const char* kPrecisionNames = "mixed (or bf16-mixed), fp16-mixed, bf16, fp32 or fp64";

Status read_precision(const OptionValue& value, PlanJob& job) {
  if (job.options.memory.set_precision(text_of(value))) return Ok{};
  return usage_error(
      fmt::format("plan: --precision must be {}, got \"{}\"", kPrecisionNames, text_of(value)));
}

// A library caller may set the bytes per parameter by hand; the name must still be one, and
// the bytes its (a plan states both, and a runtime trains by the name).
Status check_precision(const OptionRecord&, const PlanOptions& o) {
  if (!MemoryModel{}.set_precision(o.memory.precision)) {
    return usage_error(fmt::format("plan: --precision must be {}, got \"{}\"", kPrecisionNames,
                                   o.memory.precision));
  }
  const std::string wrong = o.memory.precision_contradiction();
  if (wrong.empty()) return Ok{};
  return usage_error(fmt::format("plan: {}; set the bytes with MemoryModel::set_precision", wrong));
}

Status check_headroom(const OptionRecord&, const PlanOptions& o) {
  if (!o.headroom || (*o.headroom > 0 && *o.headroom <= 1)) return Ok{};
  return usage_error(
      fmt::format("plan: --headroom must be a fraction in (0, 1] of the usable memory, got {}",
                  number_text(*o.headroom)));
}

Status read_headroom(const OptionValue& value, PlanJob& job) {
  job.options.headroom = std::get<double>(value);
  return Ok{};
}

Status check_recompute(const OptionRecord&, const PlanOptions& o) {
  if (is_recompute_mode(o.recompute) || o.recompute == "auto") return Ok{};
  return usage_error(
      fmt::format("plan: --recompute must be none, selective, full or auto, got "
                  "\"{}\"",
                  o.recompute));
}

Status check_frozen(const OptionRecord&, const PlanOptions& o) {
  if (o.frozen == "auto" || parse_frozen_placement(o.frozen)) return Ok{};
  return usage_error(fmt::format(
      "plan: --frozen must be auto, cached, before_step or bubbles, got \"{}\"", o.frozen));
}

// --sequence UxR: Ulysses degree U times ring degree R, each 1 to the rank limit.
Status read_sequence(const OptionValue& value, PlanJob& job) {
  const std::string& text = text_of(value);
  const std::size_t x = text.find('x');
  const Error bad = usage_error(fmt::format(
      "plan: --sequence must be ULYSSESxRING, two whole numbers from 1 to {} (4x1: Ulysses 4, "
      "1x2: ring 2, 8x2, 1x1: none), got \"{}\"",
      kMaxRanks, text));
  if (x == std::string::npos || x == 0 || x + 1 == text.size() || text.size() > 16) return bad;
  const std::string u = text.substr(0, x), r = text.substr(x + 1);
  if (u.find_first_not_of("0123456789") != std::string::npos ||
      r.find_first_not_of("0123456789") != std::string::npos) {
    return bad;
  }
  const long long ulysses = std::stoll(u), ring = std::stoll(r);
  if (ulysses < 1 || ring < 1 || ulysses * ring > kMaxRanks) return bad;
  PlanOptions& o = job.options;
  o.sequence = {static_cast<int>(ulysses), static_cast<int>(ring)};
  o.memory.sequence_degree = o.sequence.degree();
  o.sequence_fixed = true;
  return Ok{};
}

Status read_zero(const OptionValue& value, PlanJob& job) {
  job.options.memory.zero_stage = std::get<int>(value);
  return Ok{};
}

Status read_exhaustive(const OptionValue& value, PlanJob& job) {
  if (std::get<bool>(value)) job.options.tuner_top_k = 0;
  return Ok{};
}

// A record's parts, so that each reads as one statement in make_table.
OptionRecord option(const char* name, const char* value_name, OptionKind kind, std::string help,
                    OptionRead read, OptionCheck check = nullptr) {
  OptionRecord r;
  r.name = name;
  r.value_name = value_name;
  r.kind = kind;
  r.help = std::move(help);
  r.read = read;
  r.check = check;
  return r;
}
OptionRecord required(OptionRecord r) {
  r.required = true;
  return r;
}
OptionRecord with_default(OptionRecord r, OptionValue value) {
  r.default_value = std::move(value);
  return r;
}
OptionRecord bounded(OptionRecord r, std::optional<double> least, std::optional<double> most,
                     const char* unit = "") {
  r.least = least;
  r.most = most;
  r.unit = unit;
  return r;
}

// What to plan: the inputs, the strategy, the cut and the degrees.
std::vector<OptionRecord> what_to_plan() {
  using K = OptionKind;
  return {
      required(option("model", "FILE", K::text, "model profile (pulse.model/v1)",
                      store<&PlanJob::model_path, std::string>)),
      required(option("cluster", "FILE", K::text, "cluster profile (pulse.cluster/v2, or v1)",
                      store<&PlanJob::cluster_path, std::string>)),
      with_default(option("strategy", "NAME", K::text, "pulse, v-naive, 1f1b, 1f1b-direct or gpipe",
                          read_strategy),
                   std::string("pulse")),
      option("family", "NAME", K::text,
             fmt::format("pulse only: plan this one family ({}) instead of searching them all",
                         family_names(Strategy::pulse)),
             store_option<&PlanOptions::family, std::string>, check_family),
      option("cuts", "L1,L2,...", K::text,
             "plan this cut: the first layer of each stage after the first, in model order "
             "(S - 1 names for S stages; pp follows from S), re-costed on the cluster; the "
             "placement, degrees and schedule are still searched",
             read_cuts, check_cuts),
      option("partition-from", "PLAN", K::text,
             "plan the cut of this plan's stages (a plan edited by hand, or made for another "
             "cluster), as --cuts does",
             store<&PlanJob::partition_from_path, std::string>),
      option("buckets", "FILE", K::text,
             "plan for resolution buckets (pulse.buckets/v1, docs/buckets.md): one partition "
             "for every bucket, each bucket its own microbatch size and schedule; the plan's "
             "throughput is the share-weighted figure",
             store<&PlanJob::buckets_path, std::string>),
      bounded(option("pp", "N", K::integer,
                     "pipeline degree (default: search); devices beyond pp x dp stay idle",
                     store_option<&PlanOptions::pp, int>, check_within<&PlanOptions::pp>),
              1, kMaxPipelineDegree),
      bounded(option("dp", "N", K::integer,
                     "data-parallel degree (default: devices / pp, rounded down)",
                     store_option<&PlanOptions::dp, int>, check_within<&PlanOptions::dp>),
              1, {}),
      bounded(option("microbatch-size", "B", K::integer, "samples per microbatch (default: search)",
                     store_option<&PlanOptions::microbatch_size, int>,
                     check_within<&PlanOptions::microbatch_size>),
              1, {}),
      bounded(option("global-batch", "G", K::integer,
                     fmt::format("samples per iteration (default: {} per device of the "
                                 "cluster, used or not)",
                                 kDefaultSamplesPerDevice),
                     store_option<&PlanOptions::global_batch, int>,
                     check_within<&PlanOptions::global_batch>),
              1, kMaxGlobalBatch, " samples"),
  };
}

// How the job trains and is costed: sharding, precision, recomputation, the scales.
std::vector<OptionRecord> how_it_trains() {
  using K = OptionKind;
  return {
      with_default(option("zero", "0-3", K::integer,
                          "sharded data parallelism: 1 shards optimizer state over the "
                          "data-parallel replicas (ZeRO-1), 2 gradients too (ZeRO-2), 3 "
                          "weights too (ZeRO-3, FSDP full sharding); with --pp 1 the plan is "
                          "sharded data parallelism alone",
                          read_zero, check_zero),
                   0),
      with_default(option("precision", "NAME", K::text,
                          "the training regime, named as pulse-run and pulse-profile name it: "
                          "mixed (alias bf16-mixed): bf16 compute, fp32 master weights and "
                          "Adam state (2 + 2 + 12 bytes per parameter); fp16-mixed: the same "
                          "in fp16 with loss scaling; bf16: pure bf16, Adam state in bf16 "
                          "(2 + 2 + 4); fp32 (4 + 4 + 8); fp64 (8 + 8 + 16)",
                          read_precision, check_precision),
                   std::string("mixed")),
      with_default(option("recompute", "MODE", K::text,
                          "activation recomputation: none, selective (attention blocks keep "
                          "only their input and re-run their forward in backward), full "
                          "(every layer) or auto (plan each, keep the fastest; 3x the "
                          "planning time)",
                          store_option<&PlanOptions::recompute, std::string>, check_recompute),
                   std::string("none")),
      with_default(option("frozen", "WHERE", K::text,
                          "where a model's frozen encoders (its profile's `frozen`) run: "
                          "before_step (every device encodes its samples before the pipeline), "
                          "bubbles (in the pipeline's idle gaps, the rest before the step), "
                          "cached (encoded offline: no step time) or auto (the faster of "
                          "before_step and bubbles that fits)",
                          store_option<&PlanOptions::frozen, std::string>, check_frozen),
                   std::string("auto")),
      option("sequence", "UxR", K::text,
             "sequence-parallel layout inside each pipeline device: Ulysses degree x ring "
             "degree (4x1, 1x2, 8x2; 1x1: none); default: pulse plans each layout worth "
             "planning for a model that states sequences, with pp and dp open",
             read_sequence),
      option("split-backward", "", K::flag,
             "backward as input-gradient (I) and weight-gradient (W) ops",
             store_option<&PlanOptions::split_backward, bool>),
      option("compute-scale", "F", K::text,
             "multiply every compute time of the cluster's device type by F (0.001 to 1000), or "
             "by an end of the profile's time range: range-low, range-high",
             read_compute_scale, check_compute_scale),
      option("link-scale", "F", K::text,
             "make every link F times as fast (0.001 to 1000: bandwidth x F, latency / F)",
             read_link_scale, check_link_scale),
      option("activation-budget", "BYTES|FRACTION", K::text,
             "cap on each device's activation memory: bytes (8589934592, 8GiB, 512MiB) or a "
             "fraction of the device's usable memory in (0, 1], written with a decimal point "
             "(0.5, 1.0; a bare 1 is one byte); default: what the device leaves",
             read_activation_budget, check_activation_budget),
      option("headroom", "F", K::number,
             fmt::format("cap every device's peak memory at F (0 to 1) of its usable memory "
                         "(default {:g}: the allocator's share beyond the profile's reserve; "
                         "1: all of it)",
                         kDefaultHeadroom),
             read_headroom, check_headroom),
  };
}

// The search's limits and the outputs.
std::vector<OptionRecord> search_and_outputs() {
  using K = OptionKind;
  return {
      bounded(with_default(option("solver-nodes", "N", K::integer,
                                  "branch-and-bound nodes per integer program (the deterministic "
                                  "work limit)",
                                  store_option<&PlanOptions::solver_max_nodes, int>,
                                  check_within<&PlanOptions::solver_max_nodes>),
                           kDefaultSolverNodes),
              0, {}),
      bounded(with_default(option("solver-time-limit", "S", K::number,
                                  "CPU-time safety limit of the schedule search, seconds (0: "
                                  "list schedules only)",
                                  store_option<&PlanOptions::solver_max_seconds, double>,
                                  check_within<&PlanOptions::solver_max_seconds>),
                           kDefaultSolverSeconds),
              0, kMaxSolverSeconds, " seconds"),
      option("exhaustive", "", K::flag,
             "give every configuration the full schedule synthesis (slow; for checking the "
             "tuner)",
             read_exhaustive),
      option("fail-on-warning", "", K::flag,
             "treat the plan's warnings (bubble above 50%, a device above 95% of its memory, "
             "one microbatch in flight per device) as failures: exit 1, write nothing",
             store<&PlanJob::fail_on_warning, bool>),
      option("output,o", "FILE", K::text,
             "write the plan here (atomically, with --trace: both or neither) instead of "
             "stdout; - is stdout",
             store<&PlanJob::output_path, std::string>),
      option("trace", "FILE", K::text,
             "also write the simulated timeline as a Chrome trace (chrome://tracing, Perfetto)",
             store<&PlanJob::trace_path, std::string>),
  };
}

std::vector<OptionRecord> make_table() {
  std::vector<OptionRecord> table = what_to_plan();
  for (auto part : {how_it_trains(), search_and_outputs()}) {
    table.insert(table.end(), part.begin(), part.end());
  }
  return table;
}

}  // namespace

std::string OptionRecord::long_name() const {
  const std::string n = name;
  return n.substr(0, n.find(','));
}

Status OptionRecord::within(std::optional<double> value) const {
  if (!value) return Ok{};
  if (least && !(*value >= *least)) {
    return usage_error(fmt::format("plan: --{} must be at least {}, got {}", long_name(),
                                   number_text(*least), number_text(*value)));
  }
  if (most && !(*value <= *most)) {
    return usage_error(fmt::format("plan: --{} {} is above pulse-plan's limit of {}{}", long_name(),
                                   number_text(*value), number_text(*most), unit));
  }
  return Ok{};
}

const std::vector<OptionRecord>& plan_option_table() {
  static const std::vector<OptionRecord> table = make_table();
  return table;
}

Result<PlanJob> read_plan_job(const std::vector<GivenOption>& given) {
  std::map<std::string, const OptionValue*> by_name;
  for (const GivenOption& g : given) by_name[g.name] = &g.value;
  PlanJob job;
  for (const OptionRecord& r : plan_option_table()) {
    const auto it = by_name.find(r.long_name());
    const OptionValue* value = it != by_name.end() ? it->second
                               : r.default_value   ? &*r.default_value
                                                   : nullptr;
    if (!value && r.required) {
      return usage_error(fmt::format("plan: --{} {} is required (see pulse-plan plan --help)",
                                     r.long_name(), r.value_name));
    }
    if (value) {
      if (auto read = r.read(*value, job); !read) return read.error();
    }
  }
  job.options.zero_given = by_name.count("zero") > 0;  // the default is not a choice made
  return job;
}

Status check_plan_options(const PlanOptions& options) {
  for (const OptionRecord& r : plan_option_table()) {
    if (!r.check) continue;
    if (auto checked = r.check(r, options); !checked) return checked.error();
  }
  return Ok{};
}

}  // namespace pulse
