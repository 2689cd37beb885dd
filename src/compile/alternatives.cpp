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
    case Axis::sequence:
      return "sequence";
  }
  return "";
}

namespace {

// The sequence layouts the options leave open for `model`: pulse's search with pp, dp, the
// family and the cut open, on a model that states sequences.
std::vector<SequenceLayout> open_layouts(const PlanOptions& options, const ModelProfile& model,
                                         const ClusterProfile& cluster) {
  if (options.strategy != Strategy::pulse || options.family || !options.cuts.empty() ||
      options.pp || options.dp || options.sequence_fixed) {
    return {};
  }
  return sequence_layouts(model, cluster);
}

}  // namespace

std::vector<Alternative> levels_of(const PlanOptions& options, const ModelProfile& model,
                                   const ClusterProfile& cluster) {
  const bool searched = options.recompute == "auto";
  std::vector<std::string> modes{options.recompute};
  if (searched) modes = {"none", "selective", "full"};
  const std::vector<SequenceLayout> layouts = open_layouts(options, model, cluster);
  std::vector<Alternative> out;
  for (const std::string& mode : modes) {
    PlanOptions o = options;
    o.recompute = mode;
    if (searched) {
      out.push_back({Axis::recompute, mode, o, o, Adoption::yes});
    } else {
      out.push_back({layouts.empty() ? Axis::own : Axis::sequence, layouts.empty() ? "" : "none", o,
                     o, Adoption::yes});
    }
  }
  for (const SequenceLayout& layout : layouts) {
    for (const std::string& mode : modes) {
      PlanOptions o = options;
      o.recompute = mode;
      o.sequence = layout;
      o.memory.sequence_degree = layout.degree();
      std::string label = layout.label();
      if (searched) label += ", recompute " + mode;
      out.push_back({Axis::sequence, label, o, o, Adoption::yes});
    }
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
    if (!options.sequence.none()) break;  // the baselines are the plain model's
    PlanOptions o = options;
    o.strategy = s;
    o.family.reset();
    o.cuts.clear();  // each baseline's own cut, to compare the given one with
    o.progress = nullptr;
    rows.push_back({Axis::strategy, strategy_name(s), o, options,
                    narrowed ? Adoption::fallback : Adoption::yes});
  }
  // One group over every device still shards: ZeRO spans its ranks.
  if (devices < 2 && options.sequence.none()) return rows;
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
  if (row.axis == Axis::sequence || !row.options.sequence.none()) {
    a.sequence = row.options.sequence.label();
  }
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

// One level through the comparison: its record (its own row when the levels are searched,
// then its rows'), its bound, and its plan or why it has none.
struct LevelRun {
  Level level;
  bool searched = false;
  bool open = false;  // prepared: to be planned, or screened by its bound
  double bound = std::numeric_limits<double>::infinity();
  std::vector<AlternativeAnswer> record;
  std::optional<LevelPlan> plan;
  std::optional<Error> error;  // why a searched level has no plan (infeasible)
};

// A level's error: with one level, or when the request is bad (bad under every mode), it
// ends the job as it is; else it is the level's answer.
Status settle(LevelRun& run, Error error) {
  if (!run.searched || error.kind != ErrorKind::infeasible) return error;
  run.record.front().reason = error.message;
  run.error = std::move(error);
  return Ok{};
}

// The level's own row, and its request against the profiles.
Status open_level(const JobInputs& job, const Alternative& alternative, LevelRun& run,
                  CompileCache& cache) {
  run.level.alternative = alternative;
  run.searched = alternative.axis == Axis::recompute || alternative.axis == Axis::sequence;
  if (run.searched) {
    AlternativeAnswer row = stated_row(alternative);
    const std::string& mode = alternative.options.recompute;
    row.recomputed_layers =
        static_cast<int>(recomputed_layers(mode, *job.model, 0, job.model->layers.size()).size());
    const bool idle = mode != "none" && row.recomputed_layers == 0;  // the model of none
    if (idle) row.reason = "recomputes no layer of this model";
    run.record.push_back(std::move(row));
    if (idle) return Ok{};
  }
  if (Status s = prepare(job, run.level, cache); !s) return settle(run, s.error());
  run.open = true;
  return Ok{};
}

// Plans an open level, unless no plan of it can beat `kept`'s: one kept is never replaced by
// one no faster. A relative margin far above the rounding of either figure: a level within
// it is planned.
Status run_level(LevelRun& run, const LevelRun* kept, CompileCache& cache, PassClock& clock) {
  if (kept) {
    const CompiledPlan& plan = kept->plan->plan;
    if (std::isfinite(run.bound) && run.bound > plan.evaluation.iteration_s * (1 + 1e-9)) {
      run.record.front().reason =
          fmt::format("not planned: its lower bound on time, {}, is above the plan of {} ({})",
                      format_seconds(run.bound), plan.options.recompute,
                      format_seconds(plan.evaluation.iteration_s));
      return Ok{};
    }
  }
  Result<LevelPlan> planned = plan_level(run.level, cache, clock, run.record);
  if (!planned) return settle(run, planned.error());
  if (run.searched) state_figures(run.record.front(), planned->plan);
  run.plan = std::move(*planned);
  return Ok{};
}

// The order levels are planned in: as listed; searched levels by their bounds, least first,
// so that the one likeliest to win sets the bar the others are screened against.
Result<std::vector<std::size_t>> planning_order(std::vector<LevelRun>& runs, CompileCache& cache,
                                                PassClock& clock) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].open) continue;
    order.push_back(i);
    if (!runs[i].searched) continue;
    auto bound = level_bound(runs[i].level, cache, clock);
    if (!bound) return bound.error();
    runs[i].bound = *bound;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return runs[a].bound < runs[b].bound; });
  return order;
}

}  // namespace

Result<CompiledPlan> compare_alternatives(const JobInputs& job, CompileCache& cache,
                                          PassClock& clock) {
  const std::vector<Alternative> levels = levels_of(*job.options, *job.model, *job.cluster);
  std::vector<LevelRun> runs(levels.size());  // in place: a level's profiles point into it
  for (std::size_t i = 0; i < levels.size(); ++i) {
    if (Status s = open_level(job, levels[i], runs[i], cache); !s) return s.error();
  }
  auto order = planning_order(runs, cache, clock);
  if (!order) return order.error();
  std::optional<std::size_t> kept;
  for (std::size_t i : *order) {
    if (Status s = run_level(runs[i], kept ? &runs[*kept] : nullptr, cache, clock); !s) {
      return s.error();
    }
    if (!runs[i].plan) continue;
    // The fastest level's plan; of two as fast, the one listed first.
    const CompiledPlan& mine = runs[i].plan->plan;
    if (!kept || faster_plan(mine, runs[*kept].plan->plan) ||
        (!faster_plan(runs[*kept].plan->plan, mine) && i < *kept)) {
      kept = i;
    }
  }
  if (!kept) {
    for (const LevelRun& run : runs) {
      if (run.error) return *run.error;  // the first level's, as listed
    }
    return internal_error("level 0: no level planned and none failed");
  }
  LevelRun& won = runs[*kept];
  won.record[won.plan->row].chosen = true;
  if (won.searched) won.record.front().chosen = true;
  CompiledPlan plan = std::move(won.plan->plan);
  for (LevelRun& run : runs) {
    plan.alternatives.insert(plan.alternatives.end(), run.record.begin(), run.record.end());
  }
  state_verdicts(plan);
  return plan;
}

}  // namespace pulse::detail
