// Level 0 as one table (alternatives.hpp): the rows, the comparison, the record.

#include "alternatives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "certificate.hpp"
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
  // A family asked for is pulse's answer; a baseline's only when it has none. A given cut
  // is the answer or the plan is refused: a baseline plans its own cut, which a plan that
  // records the given one (options.cuts) must not hold.
  const Adoption baseline = !options.cuts.empty() ? Adoption::no
                            : options.family      ? Adoption::fallback
                                                  : Adoption::yes;
  for (Strategy s :
       {Strategy::v_naive, Strategy::one_f_one_b, Strategy::one_f_one_b_direct, Strategy::gpipe}) {
    if (!options.sequence.none()) break;  // the baselines are the plain model's
    PlanOptions o = options;
    o.strategy = s;
    o.family.reset();
    o.cuts.clear();  // each baseline's own cut, to compare the given one with
    o.progress = nullptr;
    rows.push_back({Axis::strategy, strategy_name(s), o, options, baseline});
  }
  // One group over every device still shards: ZeRO spans its ranks.
  if (devices < 2 && options.sequence.none()) return rows;
  // Pulse plans without a pipeline only where the user left pp open and gave no cut, and
  // keeps a ZeRO stage given (--zero): a row at another is weighed, never adopted.
  const bool open = !options.family && !options.pp && options.cuts.empty();
  for (int zero : {2, 3}) {
    const bool kept_to = !options.zero_given || zero == options.memory.zero_stage;
    PlanOptions o = options;
    o.family.reset();
    o.pp = 1;
    o.dp.reset();
    o.memory.zero_stage = zero;
    o.progress = nullptr;
    PlanOptions stated = options;
    stated.memory.zero_stage = zero;
    rows.push_back({Axis::sharding, fmt::format("ZeRO-{}", zero), o, stated,
                    open && kept_to ? Adoption::yes : Adoption::no});
  }
  return rows;
}

std::int64_t largest_peak_bytes(const CompiledPlan& p) {
  std::int64_t peak = 0;
  for (const DeviceTimeline& d : p.timeline.devices) peak = std::max(peak, d.peak.total());
  return peak;
}

bool faster_plan(const CompiledPlan& a, const CompiledPlan& b) {
  if (step_samples_per_s(a) != step_samples_per_s(b)) {
    return step_samples_per_s(a) > step_samples_per_s(b);
  }
  // As fast: the one that leaves more memory (SDXL at 1024 px on one DGX H100: ZeRO-2 runs
  // data parallelism in the time ZeRO-0 does, at 44.85 of 74.67 GiB instead of 74.14).
  if (largest_peak_bytes(a) != largest_peak_bytes(b)) {
    return largest_peak_bytes(a) < largest_peak_bytes(b);
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
  a.step_s = p.step_s;
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

// Whether the level's answer is known before `row` is planned: its own row failed, and
// neither `row` nor any row after it may be adopted (the sharded rows where pp was given),
// so no plan can come out and the record of a level alone goes nowhere (a searched level's
// goes into the plan: it is planned in full). A model that does not fit at the pp asked
// for is refused without planning pp 1 over every device for a record nobody reads. With
// --zero given, the sharded rows are planned all the same: the refusal names the ZeRO stage
// that would fit (`refusal`), which only they can tell.
bool unadoptable_from(const Level& level, const Alternative& row) {
  if (level.alternative.axis == Axis::recompute) return false;
  if (level.alternative.options.zero_given) return false;
  for (const Alternative* r = &row; r != level.rows.data() + level.rows.size(); ++r) {
    if (r->adoption != Adoption::no) return false;
  }
  return true;
}

// Why a level has no plan: its own search's error, and what would fit where a sharding row
// it may not adopt (the options rule it out: --zero or --pp given) has a plan: the options
// are the user's to change, never the planner's.
Error refusal(Error own_error, const std::vector<AlternativeAnswer>& record, std::size_t first,
              const PlanOptions& options) {
  if (own_error.kind != ErrorKind::infeasible) return own_error;
  std::vector<std::string> fits;
  for (std::size_t i = first; i < record.size(); ++i) {
    const AlternativeAnswer& a = record[i];
    if (a.axis != "sharding" || !a.feasible || !a.iteration_s || !a.configuration) continue;
    fits.push_back(fmt::format("ZeRO-{}, {}, {} per iteration (plan with --zero {} --pp 1)",
                               a.zero_stage, *a.configuration, format_seconds(*a.iteration_s),
                               a.zero_stage));
  }
  if (fits.empty()) return own_error;
  own_error.message +=
      fmt::format("; {}sharded data parallelism alone would fit: {}",
                  options.zero_given
                      ? fmt::format("--zero {} was given and is kept; ", options.memory.zero_stage)
                      : "",
                  fmt::join(fits, "; "));
  return own_error;
}

// The comparison within a level: every row planned, the fastest that may be adopted kept
// (ties: the earlier row), with its memory curve; rows recorded in order.
Result<LevelPlan> plan_level(const Level& level, CompileCache& cache, PassClock& clock,
                             std::vector<AlternativeAnswer>& record) {
  const int devices = level.inputs.cluster->num_devices();
  std::optional<CompiledPlan> best;
  std::size_t best_row = 0;
  std::optional<Error> own_error;
  const std::size_t first = record.size();
  for (const Alternative& row : level.rows) {
    if (own_error && !best && unadoptable_from(level, row)) return *own_error;
    // The rows after it are weighed against its figures; its timeline's ops come back once
    // it is kept (at pp 512 over 2048 layers 168 MB of a 1.06 GB peak while they plan).
    if (best) release_timeline_ops(*best);
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
  if (!best) return refusal(*own_error, record, first, level.alternative.options);
  // A synthesized plan's memory curve replays its timeline anew (trim_memory) and weighs
  // it by the figures a released one keeps; any other plan needs its ops back.
  if (best->family->schedule != ScheduleFamily::synthesized) {
    if (Status s = restore_timeline(*best); !s) return s.error();
  }
  // Its curve under its own options (a sharded plan's ZeRO stage).
  const PlanOptions kept_options = best->options;
  if (auto curved = memory_curve_pass(inputs_of(level, kept_options, cache), *best, clock);
      !curved) {
    return curved.error();
  }
  if (auto certified = certificate_pass(inputs_of(level, kept_options, cache), *best, clock);
      !certified) {
    return certified.error();
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
    // Its bound is on the step (tune_lower_bound): it prunes against steps.
    if (std::isfinite(run.bound) && run.bound > step_time_s(plan) * (1 + 1e-9)) {
      // The kept plan by its level's name: its layout among sequence layouts, else its mode.
      const Alternative& k = kept->level.alternative;
      const std::string name = k.axis == Axis::sequence ? k.label : plan.options.recompute;
      run.record.front().reason =
          fmt::format("not planned: its lower bound on time, {}, is above the plan of {} ({})",
                      format_seconds(run.bound), name, format_seconds(step_time_s(plan)));
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
  // As given: the level's options (scales resolved) with the job's mode and ZeRO stage.
  plan.given = won.level.alternative.stated;
  plan.given.recompute = job.options->recompute;
  plan.given.memory = job.options->memory;
  plan.given.zero_given = job.options->zero_given;
  for (LevelRun& run : runs) {
    plan.alternatives.insert(plan.alternatives.end(), run.record.begin(), run.record.end());
  }
  state_verdicts(plan);
  return plan;
}

}  // namespace pulse::detail
