// How plans compare: their figures, the families searched, and pulse against each baseline
// strategy's own answer for the same options.

#include <optional>

#include <fmt/format.h>

#include "compile_internal.hpp"

namespace pulse::detail {

std::int64_t p2p_bytes(const CompiledPlan& p) {
  return p.model.bytes_per_microbatch().total() * p.num_microbatches * p.dp;
}

FamilyOutcome outcome_of(const Family& f, const CompiledPlan* plan, bool synthesized) {
  FamilyOutcome o;
  o.family = f.name;
  o.synthesized = synthesized;
  if (!plan) return o;
  o.feasible = true;
  o.all_skips_local = plan->partition.all_skips_local;
  o.iteration_s = plan->evaluation.iteration_s;
  o.samples_per_s = plan->evaluation.samples_per_s;
  o.p2p_bytes_per_iteration = p2p_bytes(*plan);
  return o;
}

std::vector<const Family*> searched_families(const PlanOptions& options) {
  std::vector<const Family*> out;
  // --family narrows pulse's own search; a baseline strategy always has its one family.
  const bool narrowed = options.family && options.strategy == Strategy::pulse;
  for (const Family& f : families(options.strategy)) {
    if (!narrowed || options.family == f.name) out.push_back(&f);
  }
  return out;
}

bool faster_plan(const CompiledPlan& a, const CompiledPlan& b) {
  if (a.evaluation.samples_per_s != b.evaluation.samples_per_s) {
    return a.evaluation.samples_per_s > b.evaluation.samples_per_s;
  }
  return p2p_bytes(a) < p2p_bytes(b);
}

namespace {

std::string configuration_text(const CompiledPlan& p) {
  return fmt::format("pp {} x dp {}, microbatch {}", p.pp, p.dp, p.microbatch_size);
}

// What `--strategy s` would answer for the same options, sharing the cache.
Result<CompiledPlan> baseline_answer(const CompileInputs& in, Strategy s, PassClock& clock) {
  PlanOptions options = *in.options;
  options.strategy = s;
  options.family.reset();
  options.cuts.clear();  // each baseline's own cut, to compare the given one with
  options.progress = nullptr;
  CompileInputs b = in;
  b.options = &options;
  return tune(b, clock);
}

}  // namespace

Result<CompiledPlan> against_baselines(const CompileInputs& in, Result<CompiledPlan> own,
                                       PassClock& clock) {
  if (!own && own.error().kind == ErrorKind::internal) return own;
  std::optional<CompiledPlan> best;
  if (own) best = *own;
  std::vector<BaselineAnswer> answers;
  for (Strategy s :
       {Strategy::v_naive, Strategy::one_f_one_b, Strategy::one_f_one_b_direct, Strategy::gpipe}) {
    Result<CompiledPlan> answer = baseline_answer(in, s, clock);
    if (!answer && answer.error().kind == ErrorKind::internal) return answer.error();
    BaselineAnswer a;
    a.strategy = strategy_name(s);
    a.feasible = answer.ok();
    if (answer) {
      a.samples_per_s = answer->evaluation.samples_per_s;
      a.p2p_bytes_per_iteration = p2p_bytes(*answer);
      a.configuration = configuration_text(*answer);
      if (!best || faster_plan(*answer, *best)) best = std::move(*answer);
    }
    answers.push_back(std::move(a));
  }
  if (!best) return own;
  // The family or the cut the user asked for, not a baseline's.
  if ((in.options->family || !in.options->cuts.empty()) && own) best = std::move(*own);
  best->options = *in.options;  // a baseline's plan adopted by pulse is pulse's answer
  best->strategy = Strategy::pulse;
  best->baselines = std::move(answers);
  return std::move(*best);
}

}  // namespace pulse::detail
