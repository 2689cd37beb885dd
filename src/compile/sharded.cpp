// Pipeline or not: the plan against sharded data parallelism alone (pp 1 over every device,
// ZeRO-2 and ZeRO-3), each planned by the same passes as any configuration, and the verdict
// in numbers. Pulse adopts a sharded answer that is faster when the options leave pp open.

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "compile_internal.hpp"
#include "pulse/base/units.hpp"

namespace pulse::detail {

namespace {

// `--pp 1 --zero Z` for the same options (its own cache of plans: their memory differs;
// the layer graphs and placements are the same).
Result<CompiledPlan> sharded_plan(const CompileInputs& in, int zero, PassClock& clock) {
  PlanOptions options = *in.options;
  options.strategy = Strategy::pulse;
  options.family.reset();
  options.pp = 1;
  options.dp.reset();
  options.memory.zero_stage = zero;
  options.progress = nullptr;
  CompileCache cache;
  cache.graphs = in.cache->graphs;
  cache.blind_graphs = in.cache->blind_graphs;
  cache.placements = in.cache->placements;
  CompileInputs b = in;
  b.options = &options;
  b.cache = &cache;
  Result<CompiledPlan> plan = tune(b, clock);
  in.cache->safety_limit_hits += cache.safety_limit_hits;
  return plan;
}

// The search of a sharded plan that replaces `before`: its own configurations (at ZeRO
// stage `zero`), then those of `before`, best first.
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
    return a.feasible && *a.samples_per_s > *b.samples_per_s;
  });
  return out;
}

ShardedAnswer answer_of(int zero, int dp, const Result<CompiledPlan>& plan) {
  ShardedAnswer a;
  a.zero_stage = zero;
  a.dp = dp;
  a.feasible = plan.ok();
  if (!plan) {
    a.reason = plan.error().message;
    return a;
  }
  a.dp = plan->dp;
  a.microbatch_size = plan->microbatch_size;
  a.iteration_s = plan->evaluation.iteration_s;
  a.samples_per_s = plan->evaluation.samples_per_s;
  a.peak_memory_bytes = largest_peak_bytes(*plan);
  return a;
}

std::string verdict_of(const CompiledPlan& p) {
  if (p.pp > 1) return "pipeline";
  return p.options.memory.zero_stage >= 2 ? "sharded data parallel" : "data parallel";
}

// One answer in words: "pp 4 x dp 2, microbatch 4, at 678.21 ms per iteration".
struct Described {
  std::string what;
  double iteration_s = 0;
};

Described described(int pp, int dp, int zero, int microbatch_size, double iteration_s) {
  std::string what =
      pp > 1 ? fmt::format("pp {} x dp {}", pp, dp) : fmt::format("data parallel over {}", dp);
  if (zero > 0) what += fmt::format(" (ZeRO-{})", zero);
  return {fmt::format("{}, microbatch {}, at {} per iteration", what, microbatch_size,
                      format_seconds(iteration_s)),
          iteration_s};
}

Described described(const CompiledPlan& p) {
  return described(p.pp, p.dp, p.options.memory.zero_stage, p.microbatch_size,
                   p.evaluation.iteration_s);
}

// The best answer of the other kind than `kept`: for a pipeline, the fastest sharded one;
// for data parallelism, the fastest pipelined configuration the search found.
std::optional<Described> other_kind(const CompiledPlan& kept, const CompiledPlan* pipelined,
                                    const std::vector<ShardedAnswer>& sharded) {
  std::optional<Described> best;
  if (kept.pp > 1) {
    for (const ShardedAnswer& a : sharded) {
      if (a.feasible && (!best || *a.iteration_s < best->iteration_s)) {
        best = described(1, a.dp, a.zero_stage, *a.microbatch_size, *a.iteration_s);
      }
    }
    return best;
  }
  if (!pipelined) return best;
  for (const Candidate& c : pipelined->candidates) {
    if (c.pp > 1 && c.feasible && (!best || *c.iteration_s < best->iteration_s)) {
      best = described(c.pp, c.dp, pipelined->options.memory.zero_stage, c.microbatch_size,
                       *c.iteration_s);
    }
  }
  return best;
}

std::string note_of(const CompiledPlan& kept, const std::optional<Described>& other,
                    const std::vector<ShardedAnswer>& sharded) {
  const Described mine = described(kept);
  if (other) {
    return fmt::format("{} beats {} by {:.2f}x", mine.what, other->what,
                       other->iteration_s / mine.iteration_s);
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

}  // namespace

std::int64_t largest_peak_bytes(const CompiledPlan& p) {
  std::int64_t peak = 0;
  for (const DeviceTimeline& d : p.timeline.devices) peak = std::max(peak, d.peak.total());
  return peak;
}

Result<CompiledPlan> against_sharded(const CompileInputs& in, Result<CompiledPlan> own,
                                     PassClock& clock) {
  const int devices = in.cluster->num_devices();
  if (devices < 2 || in.options->strategy != Strategy::pulse) return own;
  if (!own && own.error().kind == ErrorKind::internal) return own;
  // Pulse plans without a pipeline only where the user left pp open.
  const bool may_adopt = !in.options->family && !in.options->pp;
  std::optional<CompiledPlan> best;
  if (own) best = std::move(*own);
  // The pulse plan before any sharded answer replaces it: its search has the pipelines.
  std::optional<CompiledPlan> pipelined = best;
  std::vector<ShardedAnswer> answers;
  for (int zero : {2, 3}) {
    Result<CompiledPlan> plan = sharded_plan(in, zero, clock);
    if (!plan && plan.error().kind == ErrorKind::internal) return plan.error();
    answers.push_back(answer_of(zero, devices, plan));
    if (!plan || !may_adopt || (best && !faster_plan(*plan, *best))) continue;
    plan->options = *in.options;
    plan->options.memory.zero_stage = zero;
    if (pipelined) plan->baselines = pipelined->baselines;
    plan->candidates = merged_search(*plan, best ? &*best : nullptr, zero);
    best = std::move(*plan);
  }
  if (!best) return own;
  PipelineOrNot& v = best->pipeline_or_not.emplace();
  v.verdict = verdict_of(*best);
  v.note = note_of(*best, other_kind(*best, pipelined ? &*pipelined : nullptr, answers), answers);
  v.sharded = std::move(answers);
  return std::move(*best);
}

}  // namespace pulse::detail
