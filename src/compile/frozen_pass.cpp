// The "frozen" pass (docs/frozen.md): where the model profile's frozen encoders run in the
// plan kept, by simulate/frozen.hpp's rules on its replayed timeline, and what they add to
// the step; the sharded rows of pipeline_or_not get the same cost (pp 1: no bubbles, so
// before the step).
#include <algorithm>

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

// pipeline_or_not's sharded rows: pp 1 encodes its own samples before the step, its memory
// checked against the row's peak (the static bytes of a row are not kept).
void cost_sharded_rows(const ModelProfile& model, const ClusterProfile& cluster, int device_type,
                       const CompiledPlan& plan, std::vector<ShardedAnswer>& rows) {
  for (ShardedAnswer& row : rows) {
    if (!row.feasible || !row.iteration_s || !row.peak_memory_bytes) continue;
    FrozenRequest r;
    r.model = &model;
    r.device_type = device_type;
    r.samples = plan.global_batch / row.dp;
    r.link_to_first = {LinkClass{}};
    r.free_step_bytes = {cluster.usable_memory() - *row.peak_memory_bytes};
    r.free_before_bytes = r.free_step_bytes;
    const FrozenAnswer a = place_frozen(r, FrozenPlacement::before_step);
    if (a.feasible) {
      row.frozen_s = a.before_step_s;
      row.step_s = *row.iteration_s + a.before_step_s;
    } else {
      row.frozen_reason = a.reason;
    }
  }
}

}  // namespace

Result<std::optional<double>> frozen_headroom(const ModelProfile& model,
                                              const ClusterProfile& cluster,
                                              const PlanOptions& options) {
  if (model.frozen.empty() || options.frozen == "cached") return options.headroom;
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
  std::vector<FrozenAnswer> answers;
  for (FrozenPlacement p :
       {FrozenPlacement::before_step, FrozenPlacement::bubbles, FrozenPlacement::cached}) {
    if (p == FrozenPlacement::cached && option != "cached") continue;  // needs an offline pass
    answers.push_back(place_frozen(request, p));
  }
  const FrozenAnswer* best = nullptr;
  for (const FrozenAnswer& a : answers) {
    const bool wanted = option == "auto" || frozen_placement_name(a.placement) == option;
    if (wanted && a.feasible && (!best || a.before_step_s < best->before_step_s)) best = &a;
  }
  PlanFrozen f;
  for (const FrozenAnswer& a : answers) f.placements.push_back(weighed(a, iteration_s));
  if (!best) {
    std::vector<std::string> why;
    for (const PlanFrozenPlacement& p : f.placements) {
      if (option == "auto" || p.placement == option) {
        why.push_back(fmt::format("{}: {}", p.placement, p.reason.value_or("")));
      }
    }
    return infeasible_error(fmt::format(
        "plan: the frozen encoders of {} fit no placement on {} ({}); --frozen cached plans "
        "the step without them (their outputs computed offline)",
        job.model->name, job.cluster->name, fmt::join(why, "; ")));
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
  if (plan.pipeline_or_not) {
    cost_sharded_rows(*in.model, *in.cluster, type, plan, plan.pipeline_or_not->sharded);
  }
  plan.frozen = std::move(f);
  return Ok{};
}

}  // namespace pulse::detail
