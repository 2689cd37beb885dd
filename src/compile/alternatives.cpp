// Level 0 as one table (alternatives.hpp): the rows, the comparison, the record.

#include "alternatives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "passes.hpp"
#include "pulse/base/units.hpp"
#include "pulse/profile/recompute.hpp"

namespace pulse::detail {

const char* axis_name(Axis axis) {
  switch (axis) {
    case Axis::own:
      return "own";
    case Axis::strategy:
      return "strategy";
    case Axis::sharding:
      return "sharding";
    case Axis::recompute:
      return "recompute";
  }
  return "";
}

std::vector<Alternative> levels_of(const PlanOptions& options) {
  if (options.recompute != "auto") return {{Axis::own, "", options, options, Adoption::yes}};
  std::vector<Alternative> out;
  for (const char* mode : {"none", "selective", "full"}) {
    PlanOptions o = options;
    o.recompute = mode;
    out.push_back({Axis::recompute, mode, o, o, Adoption::yes});
  }
  return out;
}

std::vector<Alternative> level_rows(const PlanOptions& options, int devices) {
  std::vector<Alternative> rows{
      {Axis::own, strategy_name(options.strategy), options, options, Adoption::yes}};
  if (options.strategy != Strategy::pulse) return rows;
  // A family or a cut asked for is pulse's answer; a baseline's only when it has none.
  const bool narrowed = options.family || !options.cuts.empty();
  for (Strategy s :
       {Strategy::v_naive, Strategy::one_f_one_b, Strategy::one_f_one_b_direct, Strategy::gpipe}) {
    PlanOptions o = options;
    o.strategy = s;
    o.family.reset();
    o.cuts.clear();  // each baseline's own cut, to compare the given one with
    o.progress = nullptr;
    rows.push_back({Axis::strategy, strategy_name(s), o, options,
                    narrowed ? Adoption::fallback : Adoption::yes});
  }
  if (devices < 2) return rows;
  // Pulse plans without a pipeline only where the user left pp open.
  const bool open = !options.family && !options.pp;
  for (int zero : {2, 3}) {
    PlanOptions o = options;
    o.family.reset();
    o.pp = 1;
    o.dp.reset();
    o.memory.zero_stage = zero;
    o.progress = nullptr;
    PlanOptions stated = options;
    stated.memory.zero_stage = zero;
    rows.push_back({Axis::sharding, fmt::format("ZeRO-{}", zero), o, stated,
                    open ? Adoption::yes : Adoption::no});
  }
  return rows;
}

std::int64_t largest_peak_bytes(const CompiledPlan& p) {
  std::int64_t peak = 0;
  for (const DeviceTimeline& d : p.timeline.devices) peak = std::max(peak, d.peak.total());
  return peak;
}

bool faster_plan(const CompiledPlan& a, const CompiledPlan& b) {
  if (a.evaluation.samples_per_s != b.evaluation.samples_per_s) {
    return a.evaluation.samples_per_s > b.evaluation.samples_per_s;
  }
  return p2p_bytes(a) < p2p_bytes(b);
}

namespace {

// One level being planned: its options (scales resolved), the profiles it plans on, its
// rows.
struct Level {
  Alternative alternative;
  PlannedInputs inputs;
  int device_type = 0;
  std::vector<Alternative> rows;
};

// A level's plan kept, and which record row it came from.
struct LevelPlan {
  CompiledPlan plan;
  std::size_t row = 0;
};

// The row as the record states it: its axis values, before any figure.
AlternativeAnswer stated_row(const Alternative& row) {
  AlternativeAnswer a;
  a.axis = axis_name(row.axis);
  a.label = row.label;
  a.strategy = strategy_name(row.options.strategy);
  a.recompute = row.options.recompute;
  a.zero_stage = row.options.memory.zero_stage;
  a.precision = row.options.memory.precision;
  a.adoptable = row.adoption == Adoption::yes;
  return a;
}

void state_figures(AlternativeAnswer& a, const CompiledPlan& p) {
  a.feasible = true;
  a.pp = p.pp;
  a.dp = p.dp;
  a.microbatch_size = p.microbatch_size;
  a.family = p.family->name;
  a.iteration_s = p.evaluation.iteration_s;
  a.samples_per_s = p.evaluation.samples_per_s;
  a.peak_memory_bytes = largest_peak_bytes(p);
  a.p2p_bytes_per_iteration = p2p_bytes(p);
  a.configuration = fmt::format("pp {} x dp {}, microbatch {}", p.pp, p.dp, p.microbatch_size);
}

// A row's figures, or why it has none (then the degrees its options fix, if any).
AlternativeAnswer answer_of(const Alternative& row, const Result<CompiledPlan>& plan, int devices) {
  AlternativeAnswer a = stated_row(row);
  if (plan) {
    state_figures(a, *plan);
    return a;
  }
  const PlanOptions& o = row.options;
  a.pp = o.pp;
  if (o.pp) a.dp = o.dp.value_or(std::max(1, devices / *o.pp));
  a.reason = plan.error().message;
  return a;
}

// The plan of `row` as pulse's answer: what it states; a sharded plan puts the search of the
// plan it replaces beside its own.
CompiledPlan adopted(const Alternative& row, CompiledPlan plan,
                     const std::optional<CompiledPlan>& before) {
  if (row.axis == Axis::sharding) {
    plan.candidates =
        merged_search(plan, before ? &*before : nullptr, row.options.memory.zero_stage);
  }
  plan.options = row.stated;
  plan.strategy = row.stated.strategy;
  return plan;
}

CompileInputs inputs_of(const Level& level, const PlanOptions& options, CompileCache& cache) {
  return {level.inputs.model, level.inputs.cluster, &options, level.device_type, &cache};
}

// The request against the profiles (what compile_plan checked before any pass ran): the
// level's profiles, its device type, the one configuration the options fix.
Status prepare(const JobInputs& job, Level& level, CompileCache& cache) {
  PlanOptions& options = level.alternative.options;
  if (auto s = scale_inputs(*job.model, *job.cluster, options, level.inputs); !s) return s;
  auto device_type = check_request(*level.inputs.model, *level.inputs.cluster, options);
  if (!device_type) return device_type.error();
  level.device_type = *device_type;
  if (options.pp && options.microbatch_size) {  // one configuration: its errors as they are
    const int devices = level.inputs.cluster->num_devices();
    const int dp = options.dp.value_or(std::max(1, devices / *options.pp));
    const CompileInputs in = inputs_of(level, options, cache);
    if (auto config = resolve_config(in, *options.pp, dp, *options.microbatch_size); !config) {
      return config.error();
    }
  }
  level.alternative.stated = options;
  level.rows = level_rows(options, level.inputs.cluster->num_devices());
  return Ok{};
}

// The comparison within a level: every row planned, the fastest that may be adopted kept
// (ties: the earlier row), with its memory curve; rows recorded in order.
Result<LevelPlan> plan_level(const Level& level, CompileCache& cache, PassClock& clock,
                             std::vector<AlternativeAnswer>& record) {
  const int devices = level.inputs.cluster->num_devices();
  std::optional<CompiledPlan> best;
  std::size_t best_row = 0;
  std::optional<Error> own_error;
  for (const Alternative& row : level.rows) {
    Result<CompiledPlan> plan = tune(inputs_of(level, row.options, cache), clock);  // level 1
    if (!plan && plan.error().kind == ErrorKind::internal) return plan.error();
    if (&row == &level.rows.front() && !plan) own_error = plan.error();
    AlternativeAnswer a = answer_of(row, plan, devices);
    a.adoptable = a.adoptable || (row.adoption == Adoption::fallback && own_error);
    if (plan && a.adoptable && (!best || faster_plan(*plan, *best))) {
      best = adopted(row, std::move(*plan), best);
      best_row = record.size();
    }
    record.push_back(std::move(a));
  }
  if (!best) return *own_error;
  // Its curve under its own options (a sharded plan's ZeRO stage).
  const PlanOptions kept_options = best->options;
  if (auto curved = memory_curve_pass(inputs_of(level, kept_options, cache), *best, clock);
      !curved) {
    return curved.error();
  }
  best->derived_times = level.inputs.derived_times;
  return LevelPlan{std::move(*best), best_row};
}

// No plan of the level is faster than `bound`: the least bound of its rows' searches.
Result<double> level_bound(const Level& level, CompileCache& cache, PassClock& clock) {
  double bound = std::numeric_limits<double>::infinity();
  for (const Alternative& row : level.rows) {
    auto b = tune_lower_bound(inputs_of(level, row.options, cache), clock);
    if (!b) return b.error();
    bound = std::min(bound, *b);
  }
  return bound;
}

// Why a level of axis recompute is not planned, if it is not: no plan of it can beat `kept`
// (one already kept is never replaced by one no faster, and a later level loses ties).
Result<std::optional<std::string>> not_planned(const Level& level, const CompiledPlan* kept,
                                               CompileCache& cache, PassClock& clock) {
  if (!kept) return std::optional<std::string>{};
  auto bound = level_bound(level, cache, clock);
  if (!bound) return bound.error();
  // A relative margin far above the rounding of either figure: a level within it is planned.
  if (!std::isfinite(*bound) || *bound <= kept->evaluation.iteration_s * (1 + 1e-9)) {
    return std::optional<std::string>{};
  }
  return std::optional<std::string>{fmt::format(
      "not planned: its lower bound on time, {}, is above the plan kept so far ({}, {})",
      format_seconds(*bound), kept->options.recompute,
      format_seconds(kept->evaluation.iteration_s))};
}

// The comparison across levels, in order: what is kept so far, and the record.
struct Across {
  std::optional<LevelPlan> kept;
  std::size_t kept_level_row = 0;
  std::optional<Error> first_error;
  std::vector<AlternativeAnswer> record;
};

// One level of a job: prepared, screened, planned and recorded. An error that ends the job.
Status run_level(const JobInputs& job, const Alternative& alternative, Across& across,
                 CompileCache& cache, PassClock& clock) {
  const bool searched = alternative.axis == Axis::recompute;
  const std::size_t level_row = across.record.size();
  AlternativeAnswer row = stated_row(alternative);
  if (searched) {
    const std::string& mode = alternative.label;
    row.recomputed_layers =
        static_cast<int>(recomputed_layers(mode, *job.model, 0, job.model->layers.size()).size());
    if (mode != "none" && row.recomputed_layers == 0) {
      row.reason = "recomputes no layer of this model";
      across.record.push_back(std::move(row));
      return Ok{};
    }
    across.record.push_back(row);
  }
  Level level{alternative, {}, 0, {}};
  Result<LevelPlan> planned = LevelPlan{};
  if (Status s = prepare(job, level, cache); !s) {
    planned = s.error();
  } else {
    const CompiledPlan* kept = across.kept ? &across.kept->plan : nullptr;
    auto why_not = searched ? not_planned(level, kept, cache, clock)
                            : Result<std::optional<std::string>>{std::nullopt};
    if (!why_not) return why_not.error();
    if (*why_not) {
      across.record[level_row].reason = **why_not;
      return Ok{};
    }
    planned = plan_level(level, cache, clock, across.record);
  }
  if (!planned) {
    // A bad request is bad under every mode: its error as it is.
    if (!searched || planned.error().kind != ErrorKind::infeasible) return planned.error();
    across.record[level_row].reason = planned.error().message;
    if (!across.first_error) across.first_error = planned.error();
    return Ok{};
  }
  if (searched) state_figures(across.record[level_row], planned->plan);
  if (!across.kept || faster_plan(planned->plan, across.kept->plan)) {
    across.kept = std::move(*planned);
    across.kept_level_row = level_row;
  }
  return Ok{};
}

}  // namespace

Result<CompiledPlan> compare_alternatives(const JobInputs& job, CompileCache& cache,
                                          PassClock& clock) {
  Across across;
  const std::vector<Alternative> levels = levels_of(*job.options);
  for (const Alternative& level : levels) {
    if (Status s = run_level(job, level, across, cache, clock); !s) return s.error();
  }
  if (!across.kept) return *across.first_error;
  across.record[across.kept->row].chosen = true;
  if (levels.front().axis == Axis::recompute) across.record[across.kept_level_row].chosen = true;
  CompiledPlan plan = std::move(across.kept->plan);
  plan.alternatives = std::move(across.record);
  state_verdicts(plan);
  return plan;
}

}  // namespace pulse::detail
