// The "frozen" pass (docs/frozen.md): where the model profile's frozen encoders run in the
// plan kept, by simulate/frozen.hpp's rules on its replayed timeline, and what they add to
// the step. The same rule gives every configuration the search weighs its step
// (frozen_step_pass), so the tuner, the alternatives and pipeline_or_not compare steps.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "alternatives.hpp"
#include "compile_internal.hpp"
#include "pulse/base/units.hpp"
#include "pulse/simulate/frozen.hpp"

namespace pulse::detail {

namespace {

// The request for one pipeline of `plan` (every data-parallel replica runs the same ops).
FrozenRequest request_of(const ModelProfile& model, const ClusterProfile& cluster,
                         const CompiledPlan& plan, int device_type) {
  FrozenRequest r;
  r.model = &model;
  r.device_type = device_type;
  r.pp = plan.pp;
  r.samples = plan.microbatch_size * plan.num_microbatches;
  const std::int64_t capacity = cluster.usable_memory();
  for (DeviceId d = 0; d < plan.pp; ++d) {
    const std::vector<RankId>& ranks = plan.ranks.front();
    r.link_to_first.push_back(d == 0 ? LinkClass{} : cluster.link(ranks[d], ranks[0]));
    r.free_step_bytes.push_back(capacity - plan.timeline.devices[d].peak.total());
    r.free_before_bytes.push_back(capacity - plan.static_bytes[d].total());
  }
  r.gaps = idle_gaps(plan.timeline);
  return r;
}

PlanFrozenPlacement weighed(const FrozenAnswer& a, double iteration_s) {
  PlanFrozenPlacement p;
  p.placement = std::string(frozen_placement_name(a.placement));
  p.feasible = a.feasible;
  if (a.feasible) {
    p.before_step_s = a.before_step_s;
    p.step_s = iteration_s + a.before_step_s;
  } else {
    p.reason = a.reason;
  }
  return p;
}

std::string note_of(const PlanFrozen& f, const std::vector<PlanFrozenPlacement>& weighed) {
  std::string note = f.placement == "cached"
                         ? fmt::format("cached offline: no step time, {} per sample stored",
                                       format_bytes(f.cached_bytes_per_sample))
                         : fmt::format("{}: {} before the step, {} hidden in bubbles; step {}",
                                       f.placement, format_seconds(f.before_step_s),
                                       format_seconds(f.bubble_s), format_seconds(f.step_s));
  for (const PlanFrozenPlacement& p : weighed) {
    if (p.placement == f.placement) continue;
    note += p.feasible ? fmt::format("; {}: step {}", p.placement, format_seconds(*p.step_s))
                       : fmt::format("; {} refused: {}", p.placement, *p.reason);
  }
  return note;
}

// The placements `option` weighs, before_step first (cached only when asked for: it needs an
// offline pass).
std::vector<FrozenAnswer> answers_of(const FrozenRequest& request, const std::string& option) {
  std::vector<FrozenAnswer> answers;
  for (FrozenPlacement p :
       {FrozenPlacement::before_step, FrozenPlacement::bubbles, FrozenPlacement::cached}) {
    if (p == FrozenPlacement::cached && option != "cached") continue;
    answers.push_back(place_frozen(request, p));
  }
  return answers;
}

// The one `option` takes: of those it allows that fit, the least added before the step (the
// first weighed on a tie); null when none fits.
const FrozenAnswer* best_of(const std::vector<FrozenAnswer>& answers, const std::string& option) {
  const FrozenAnswer* best = nullptr;
  for (const FrozenAnswer& a : answers) {
    const bool wanted = option == "auto" || frozen_placement_name(a.placement) == option;
    if (wanted && a.feasible && (!best || a.before_step_s < best->before_step_s)) best = &a;
  }
  return best;
}

// Why each placement `option` allows was refused: "before_step: ...; bubbles: ...".
std::string refusals(const std::vector<FrozenAnswer>& answers, const std::string& option) {
  std::vector<std::string> why;
  for (const FrozenAnswer& a : answers) {
    const std::string_view name = frozen_placement_name(a.placement);
    if (option == "auto" || name == option) why.push_back(fmt::format("{}: {}", name, a.reason));
  }
  return fmt::format("{}", fmt::join(why, "; "));
}

}  // namespace

bool frozen_in_step(const ModelProfile& model, const PlanOptions& options) {
  return !model.frozen.empty() && options.frozen != "cached";
}

Result<std::optional<double>> frozen_headroom(const ModelProfile& model,
                                              const ClusterProfile& cluster,
                                              const PlanOptions& options) {
  if (!frozen_in_step(model, options)) return options.headroom;
  std::int64_t reserve = 0, piece = 0;
  for (const FrozenComponent& c : model.frozen) {
    reserve += c.weight_bytes;
    piece = std::max(piece, c.activation_bytes_per_sample);
  }
  const double usable = static_cast<double>(cluster.usable_memory());
  const double headroom =
      options.headroom_fraction() - static_cast<double>(reserve + piece) / usable;
  if (headroom <= 0) {
    return infeasible_error(fmt::format(
        "plan: the frozen encoders of {} need {} of weights and {} for one sample beside the "
        "step, more than the {} a device of {} leaves; --frozen cached plans the step without "
        "them",
        model.name, format_bytes(reserve), format_bytes(piece),
        format_bytes(static_cast<std::int64_t>(options.headroom_fraction() * usable)),
        cluster.name));
  }
  return std::optional<double>{headroom};
}

Status frozen_pass(const JobInputs& job, CompiledPlan& plan, PassClock& clock) {
  if (job.model->frozen.empty()) return Ok{};
  PassClock::Run run(clock, "frozen");
  PlanOptions options = plan.options;
  options.headroom = job.options->headroom;  // the frozen ops may use what the plan left
  PlannedInputs in;
  if (auto s = scale_inputs(*job.model, *job.cluster, options, in); !s) return s;
  const int type = in.model->device_type_index(in.cluster->device_type);
  const FrozenRequest request = request_of(*in.model, *in.cluster, plan, type);
  const double iteration_s = plan.evaluation.iteration_s;
  const std::string& option = job.options->frozen;
  const std::vector<FrozenAnswer> answers = answers_of(request, option);
  const FrozenAnswer* best = best_of(answers, option);
  PlanFrozen f;
  for (const FrozenAnswer& a : answers) f.placements.push_back(weighed(a, iteration_s));
  if (!best) {
    return infeasible_error(fmt::format(
        "plan: the frozen encoders of {} fit no placement on {} ({}); --frozen cached plans "
        "the step without them (their outputs computed offline)",
        job.model->name, job.cluster->name, refusals(answers, option)));
  }
  f.placement = std::string(frozen_placement_name(best->placement));
  f.option = option;
  for (const FrozenComponent& c : job.model->frozen) f.components.push_back(c.name);
  f.samples = request.samples;
  f.before_step_s = best->before_step_s;
  f.bubble_s = best->bubble_s;
  f.step_s = iteration_s + best->before_step_s;
  f.samples_per_s = plan.global_batch / f.step_s;
  f.cached_bytes_per_sample = best->cached_bytes_per_sample;
  f.weight_bytes = best->weight_bytes;
  f.activation_bytes = best->activation_bytes;
  f.ops = best->ops;
  f.note = note_of(f, f.placements);
  plan.step_s = f.step_s;  // on the timeline kept (its memory curve may have moved the gaps)
  plan.frozen = std::move(f);
  return Ok{};
}

void frozen_step_pass(const CompileInputs& in, CompiledPlan& plan) {
  if (!frozen_in_step(*in.model, *in.options)) return;
  const std::string& option = in.options->frozen;
  FrozenRequest request = request_of(*in.model, *in.cluster, plan, in.device_type);
  // Time only, memory left out: this timeline's peak is not the plan's yet (the memory curve
  // of the plan kept lowers it at the same speed, and the frozen pass then places under the
  // memory rule), and the denoiser is planned within the headroom that leaves the encoders
  // their weights and one sample (frozen_headroom). Judged against this peak, configurations
  // the frozen pass would place lost to ones it places worse.
  const std::int64_t unlimited = std::numeric_limits<std::int64_t>::max() / 4;
  request.free_step_bytes.assign(request.pp, unlimited);
  request.free_before_bytes.assign(request.pp, unlimited);
  const std::vector<FrozenAnswer> answers = answers_of(request, option);
  if (const FrozenAnswer* best = best_of(answers, option)) {
    plan.step_s = plan.evaluation.iteration_s + best->before_step_s;
  }
}

double frozen_step_bound(const CompileInputs& in, const CompiledPlan& placed,
                         const std::vector<double>& allreduce_s) {
  if (!frozen_in_step(*in.model, *in.options)) return 0;
  // Whichever placement frozen_step_pass takes, each device of the pipeline runs its ops,
  // and the frozen pieces run in the timeline's idle gaps, within [0, makespan), or before
  // it: pp x (makespan + the time before the step) holds them all. The device whose last
  // op ends the makespan then all-reduces: the iteration is no shorter than the makespan
  // plus the least all-reduce of a device that runs ops.
  double compute = 0;
  for (const StageCost& stage : placed.model.stages) compute += stage.forward_s + stage.backward_s;
  compute *= placed.num_microbatches;
  const int samples = placed.microbatch_size * placed.num_microbatches;
  const double frozen = frozen_work_lower_bound(*in.model, in.device_type, samples);
  double least_allreduce = std::numeric_limits<double>::infinity();
  for (DeviceId d : placed.model.layout.device) {  // the devices that run a stage
    least_allreduce = std::min(least_allreduce, allreduce_s[d]);
  }
  if (!std::isfinite(least_allreduce)) least_allreduce = 0;
  // A relative margin far above the rounding of the sums, which add in another order.
  return ((compute + frozen) / placed.pp + least_allreduce) * (1 - 1e-9);
}

double step_time_s(const CompiledPlan& plan) {
  return plan.step_s.value_or(plan.evaluation.iteration_s);
}

double step_samples_per_s(const CompiledPlan& plan) {
  return plan.step_s ? plan.global_batch / *plan.step_s : plan.evaluation.samples_per_s;
}

}  // namespace pulse::detail
