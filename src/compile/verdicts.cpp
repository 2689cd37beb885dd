// The plan's verdicts as views of level 0's record (alternatives.hpp): each baseline's own
// answer (`partition.versus.baselines`), pipeline or not (`pipeline_or_not`: the plan against
// sharded data parallelism alone, in numbers), the recomputation modes (`recompute_search`).
// Each reads the rows of the record and the plan kept, nothing else.

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "alternatives.hpp"
#include "pulse/base/units.hpp"

namespace pulse::detail {

namespace {

using Rows = std::vector<const AlternativeAnswer*>;

// The layout a row planned ("none" when the job planned none).
std::string layout_of(const AlternativeAnswer& a) {
  return a.sequence.value_or("none");
}

// The rows of the level the plan was kept from (its recomputation mode and sequence layout),
// of one axis.
Rows rows_of(const CompiledPlan& plan, Axis axis) {
  Rows out;
  const std::string layout = plan.options.sequence.label();
  for (const AlternativeAnswer& a : plan.alternatives) {
    if (a.axis == axis_name(axis) &&
        (axis == Axis::recompute ||
         (a.recompute == plan.options.recompute && layout_of(a) == layout))) {
      out.push_back(&a);
    }
  }
  return out;
}

// Each baseline's own answer. None when neither the level's own search nor any baseline had
// a plan (the plan kept is then a sharded one, with nothing of the kind to compare).
std::vector<BaselineAnswer> baselines_of(const CompiledPlan& plan) {
  const Rows own = rows_of(plan, Axis::own);
  const Rows strategies = rows_of(plan, Axis::strategy);
  const auto feasible = [](const AlternativeAnswer* a) { return a->feasible; };
  std::vector<BaselineAnswer> out;
  if (std::none_of(own.begin(), own.end(), feasible) &&
      std::none_of(strategies.begin(), strategies.end(), feasible)) {
    return out;
  }
  for (const AlternativeAnswer* a : strategies) {
    out.push_back(
        {a->label, a->feasible, a->samples_per_s, a->p2p_bytes_per_iteration, a->configuration});
  }
  return out;
}

ShardedAnswer sharded_of(const AlternativeAnswer& a) {
  ShardedAnswer s;
  s.zero_stage = a.zero_stage;
  s.dp = a.dp.value_or(1);
  s.feasible = a.feasible;
  s.microbatch_size = a.microbatch_size;
  s.iteration_s = a.iteration_s;
  s.samples_per_s = a.samples_per_s;
  s.peak_memory_bytes = a.peak_memory_bytes;
  s.reason = a.reason;
  if (a.step_s && a.iteration_s) {  // pp 1: its frozen work all before the step
    s.step_s = a.step_s;
    s.frozen_s = *a.step_s - *a.iteration_s;
  }
  return s;
}

std::string verdict_of(const CompiledPlan& p) {
  if (p.pp > 1) return "pipeline";
  return p.options.memory.zero_stage >= 2 ? "sharded data parallel" : "data parallel";
}

// One answer in words: "pp 4 x dp 2, microbatch 4, at 678.21 ms per iteration", or with
// frozen encoders weighed, "..., at 812.5 ms per step (iteration 678.21 ms + 134.29 ms of
// frozen encoding before it)". Answers are compared by `time_s`: the step when it is known.
struct Described {
  std::string what;
  double time_s = 0;
};

struct Times {
  double iteration_s = 0;
  std::optional<double> step_s;
};

Described described(int pp, int dp, int zero, int microbatch_size, Times t,
                    const std::string& layout = "none") {
  std::string what =
      pp > 1 ? fmt::format("pp {} x dp {}", pp, dp) : fmt::format("data parallel over {}", dp);
  if (zero > 0) what += fmt::format(" (ZeRO-{})", zero);
  if (layout != "none") what += " x " + layout;
  if (t.step_s) {
    return {fmt::format("{}, microbatch {}, at {} per step (iteration {} + {} of frozen "
                        "encoding before it)",
                        what, microbatch_size, format_seconds(*t.step_s),
                        format_seconds(t.iteration_s), format_seconds(*t.step_s - t.iteration_s)),
            *t.step_s};
  }
  return {fmt::format("{}, microbatch {}, at {} per iteration", what, microbatch_size,
                      format_seconds(t.iteration_s)),
          t.iteration_s};
}

Described described(const CompiledPlan& p) {
  return described(p.pp, p.dp, p.options.memory.zero_stage, p.microbatch_size,
                   {p.evaluation.iteration_s, p.step_s}, p.options.sequence.label());
}

double time_of(const AlternativeAnswer& a) {
  return a.step_s.value_or(*a.iteration_s);
}

// The layout verdict, when the job planned sequence layouts: the plan's layout against the
// fastest adoptable row of the other kind (with a layout when the plan has none, without
// one when it has one), in numbers.
void state_layout(const CompiledPlan& plan, PipelineOrNot& v) {
  const std::string mine = plan.options.sequence.label();
  const AlternativeAnswer* best = nullptr;
  bool planned = false;
  for (const AlternativeAnswer& a : plan.alternatives) {
    planned = planned || a.sequence.has_value();
    const bool row = a.axis == axis_name(Axis::own) || a.axis == axis_name(Axis::sharding);
    if (!row || !a.feasible || !a.adoptable || (layout_of(a) == "none") != (mine != "none")) {
      continue;
    }
    if (!best || time_of(a) < time_of(*best)) best = &a;
  }
  if (!planned) return;
  const Described kept = described(plan);
  v.layout = kept.what;
  const char* other = mine == "none" ? "with" : "without";
  if (!best) {
    // None of the other kind has figures: none fits, or a level of it was not planned, its
    // lower bound being above this plan (the level's row says so).
    const bool bounded = std::any_of(
        plan.alternatives.begin(), plan.alternatives.end(), [&](const AlternativeAnswer& a) {
          return a.sequence && (*a.sequence == "none") != (mine != "none") && a.reason &&
                 a.reason->starts_with("not planned: its lower bound");
        });
    v.layout_note =
        bounded ? fmt::format(
                      "{}: no plan {} sequence parallelism can beat it, a lower bound "
                      "says (alternatives[] says which)",
                      kept.what, other)
                : fmt::format("{}: no plan {} sequence parallelism fits (alternatives[] says why)",
                              kept.what, other);
    return;
  }
  const Described them = described(*best->pp, *best->dp, best->zero_stage, *best->microbatch_size,
                                   {*best->iteration_s, best->step_s}, layout_of(*best));
  v.layout_note = fmt::format("{} beats the best {} sequence parallelism, {}, by {:.2f}x",
                              kept.what, other, them.what, them.time_s / kept.time_s);
}

// The best answer of the other kind than `kept`: for a pipeline, the fastest sharded one;
// for data parallelism, the fastest pipelined configuration searched. Those are in the
// kept plan's search: its own, or, for a sharded plan adopted, beside its own those of the
// pipelined plan it replaced (merged_search), in their order. Their ZeRO stage is the
// level's own search's.
std::optional<Described> other_kind(const CompiledPlan& kept,
                                    const std::vector<ShardedAnswer>& sharded, int own_zero) {
  std::optional<Described> best;
  if (kept.pp > 1) {
    for (const ShardedAnswer& a : sharded) {
      if (a.feasible && (!best || a.step_s.value_or(*a.iteration_s) < best->time_s)) {
        best = described(1, a.dp, a.zero_stage, *a.microbatch_size, {*a.iteration_s, a.step_s});
      }
    }
    return best;
  }
  for (const Candidate& c : kept.candidates) {
    if (c.pp > 1 && c.feasible && (!best || c.step_s.value_or(*c.iteration_s) < best->time_s)) {
      best = described(c.pp, c.dp, own_zero, c.microbatch_size, {*c.iteration_s, c.step_s});
    }
  }
  return best;
}

std::string note_of(const CompiledPlan& kept, const std::optional<Described>& other,
                    const std::vector<ShardedAnswer>& sharded) {
  const Described mine = described(kept);
  if (other && other->time_s < mine.time_s) {  // the options ruled the other out
    const PlanOptions& g = kept.given;
    std::vector<std::string> given;
    if (g.zero_given) given.push_back(fmt::format("--zero {}", g.memory.zero_stage));
    if (g.pp) given.push_back(fmt::format("--pp {}", *g.pp));
    if (g.family) given.push_back("--family " + *g.family);
    return fmt::format(
        "{} is {:.2f}x slower than {}, which the options given rule out ({})", mine.what,
        mine.time_s / other->time_s, other->what,
        given.empty() ? std::string("a cut given") : fmt::format("{}", fmt::join(given, ", ")));
  }
  if (other) {
    return fmt::format("{} beats {} by {:.2f}x", mine.what, other->what,
                       other->time_s / mine.time_s);
  }
  if (kept.pp == 1) {
    return fmt::format("{}: no pipelined configuration came close (search[] says why each lost)",
                       mine.what);
  }
  std::string why;
  for (const ShardedAnswer& a : sharded) {
    why += fmt::format("; ZeRO-{}: {}", a.zero_stage, a.reason.value_or(""));
  }
  return fmt::format("{}: sharded data parallelism does not fit{}", mine.what, why);
}

std::optional<PipelineOrNot> pipeline_or_not_of(const CompiledPlan& plan) {
  const Rows rows = rows_of(plan, Axis::sharding);
  const bool layouts = std::any_of(plan.alternatives.begin(), plan.alternatives.end(),
                                   [](const AlternativeAnswer& a) { return a.sequence; });
  if (rows.empty() && !layouts) return std::nullopt;
  PipelineOrNot v;
  for (const AlternativeAnswer* a : rows) v.sharded.push_back(sharded_of(*a));
  const int own_zero = rows_of(plan, Axis::own).front()->zero_stage;
  v.verdict = verdict_of(plan);
  v.note = note_of(plan, other_kind(plan, v.sharded, own_zero), v.sharded);
  state_layout(plan, v);
  return v;
}

RecomputeAnswer mode_of(const AlternativeAnswer& a) {
  RecomputeAnswer m;
  m.mode = a.label;
  m.layers = a.recomputed_layers.value_or(0);
  m.feasible = a.feasible;
  m.pp = a.pp;
  m.microbatch_size = a.microbatch_size;
  m.iteration_s = a.iteration_s;
  m.samples_per_s = a.samples_per_s;
  m.peak_memory_bytes = a.peak_memory_bytes;
  m.reason = a.reason;
  return m;
}

// "full: pp 16, microbatch 1, 59.938 s per iteration, 8.13x faster than none (487.064 s)".
std::string note_of(const RecomputeSearch& s) {
  const auto chosen = std::find_if(s.modes.begin(), s.modes.end(),
                                   [&](const RecomputeAnswer& a) { return a.mode == s.chosen; });
  const RecomputeAnswer* runner_up = nullptr;
  for (const RecomputeAnswer& a : s.modes) {
    if (!a.feasible || a.mode == s.chosen) continue;
    if (!runner_up || *a.samples_per_s > *runner_up->samples_per_s) runner_up = &a;
  }
  std::string out = fmt::format("{}: pp {}, microbatch {}, {:.3f} s per iteration", chosen->mode,
                                *chosen->pp, *chosen->microbatch_size, *chosen->iteration_s);
  if (!runner_up) return out + "; no other mode planned (modes[] says why)";
  return out + fmt::format(", {:.2f}x the throughput of {} ({:.3f} s per iteration)",
                           *chosen->samples_per_s / *runner_up->samples_per_s, runner_up->mode,
                           *runner_up->iteration_s);
}

std::optional<RecomputeSearch> recompute_search_of(const CompiledPlan& plan) {
  const Rows rows = rows_of(plan, Axis::recompute);
  if (rows.empty()) return std::nullopt;
  RecomputeSearch s;
  for (const AlternativeAnswer* a : rows) s.modes.push_back(mode_of(*a));
  s.chosen = plan.options.recompute;
  s.note = note_of(s);
  return s;
}

}  // namespace

std::vector<Candidate> merged_search(const CompiledPlan& sharded, const CompiledPlan* before,
                                     int zero) {
  std::vector<Candidate> out = sharded.candidates;
  for (Candidate& c : out) c.zero_stage = c.zero_stage.value_or(zero);
  if (before) {
    for (Candidate c : before->candidates) {
      if (c.chosen) {
        c.chosen = false;
        c.reason = fmt::format("slower than data parallel over {} (ZeRO-{}), microbatch {}",
                               sharded.dp, zero, sharded.microbatch_size);
      }
      out.push_back(std::move(c));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.chosen != b.chosen) return a.chosen;
    if (a.feasible != b.feasible) return a.feasible;
    return a.feasible && step_rate(a) > step_rate(b);
  });
  return out;
}

void state_verdicts(CompiledPlan& plan) {
  plan.baselines = baselines_of(plan);
  plan.pipeline_or_not = pipeline_or_not_of(plan);
  plan.recompute_search = recompute_search_of(plan);
}

}  // namespace pulse::detail
