#include "certificate.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "passes.hpp"
#include "pulse/base/units.hpp"
#include "pulse/graph/layer_graph.hpp"
#include "pulse/plan/certificate.hpp"
#include "pulse/schedule/published.hpp"
#include "pulse/schedule/synthesize.hpp"
#include "pulse/schedule/v_families.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse::detail {

namespace {

// The partition against any partition of its family on as many devices (partition.hpp's
// lower_bound_s, whose terms these are).
PartitionCertificate partition_certificate(const CompileInputs& in, const CompiledPlan& plan) {
  const LayerGraph graph = LayerGraph::build(*in.model, in.device_type, plan.microbatch_size);
  PartitionCertificate c;
  double total = 0;
  for (LayerId l = 0; l < graph.num_layers(); ++l) {
    const double layer = graph.layer(l).forward_s + graph.layer(l).backward_s;
    c.largest_layer_s = std::max(c.largest_layer_s, layer);
    total += layer;
  }
  c.average_device_load_s = total / plan.pp;
  const std::vector<double> load = plan.model.device_load();
  const double objective = *std::max_element(load.begin(), load.end());
  // As the plan's partition section states it (plan_builder.cpp).
  c.bound_s = std::min(plan.partition.lower_bound_s, objective);
  c.gap = c.bound_s > 0 ? objective / c.bound_s : 1.0;
  return c;
}

// The published schedules beside the plan: on a two-stage V, PyTorch's ZBVZeroBubble and
// DualPipeV as well as 1F1B; the plan's own split of the backward (the bound assumes it).
std::vector<PublishedSchedule> published_beside(const CompiledPlan& plan) {
  if (!is_two_stage_v(plan.model.layout)) return {PublishedSchedule::one_f_one_b};
  return {PublishedSchedule::one_f_one_b, PublishedSchedule::zbv_zero_bubble,
          PublishedSchedule::dualpipev};
}

// One published schedule replayed on the plan's stages: as a synthesis of the job kept it
// (ZBVZeroBubble and DualPipeV, generated and replayed once per model, M and split; at pp
// 1024 over 2048 layers each replay is 0.3 s), else generated and replayed here.
Result<PublishedReplay> replay_published(const CompileInputs& in, const CompiledPlan& plan,
                                         PublishedSchedule which) {
  const bool split = plan.schedule.split_backward;
  if (in.cache) {
    if (auto kept = kept_published_replay(in.cache->memo, plan.model, plan.num_microbatches, split,
                                          which)) {
      return std::move(*kept);
    }
  }
  const Result<Schedule> schedule =
      published_schedule(which, {&plan.model, plan.num_microbatches, split});
  if (!schedule) return schedule.error();
  const Result<Timeline> timeline =
      simulate(plan.model, *schedule, plan.num_microbatches, plan.static_bytes, Peaks::rule_only);
  if (!timeline) return timeline.error();
  return published_replay(which, *timeline);
}

// One published schedule on the plan's stages, evaluated as the plan is (evaluate(): the
// makespan, or a device's last op's end, 0 for none, plus its all-reduce, whichever is
// later); within memory as the synthesizer's answers are (room: capacity less the static
// state, or the activation budget if smaller).
PublishedGap published_gap(const CompileInputs& in, const CompiledPlan& plan,
                           PublishedSchedule which, const std::vector<double>& allreduce) {
  PublishedGap g;
  g.schedule = published_schedule_name(which);
  const Result<PublishedReplay> replay = replay_published(in, plan, which);
  if (!replay) {
    g.reason = replay.error().message;
    return g;
  }
  const std::int64_t budget = activation_budget(*in.options, *in.cluster);
  for (DeviceId d = 0; d < plan.model.num_devices(); ++d) {
    std::int64_t room = in.cluster->usable_memory() - plan.static_bytes[d].total();
    if (budget > 0) room = std::min(room, budget);
    const std::int64_t held = replay->resident_peak[d];
    if (held > room) {
      g.reason = fmt::format("pipeline device {} would hold {} of activations, {} more than fit", d,
                             format_bytes(held), format_bytes(held - room));
      return g;
    }
  }
  double iteration = replay->makespan_s;
  for (std::size_t d = 0; d < replay->last_end_s.size(); ++d) {
    const double end = std::isfinite(replay->last_end_s[d]) ? replay->last_end_s[d] : 0.0;
    iteration = std::max(iteration, end + allreduce[d]);
  }
  g.feasible = true;
  g.iteration_s = iteration;
  return g;
}

}  // namespace

Status certificate_pass(const CompileInputs& in, CompiledPlan& plan, PassClock& clock) {
  PassClock::Run run(clock, "certificate");
  std::vector<double> allreduce;
  for (const AllReduce& a : plan.evaluation.allreduce) allreduce.push_back(a.seconds);
  std::optional<double> memory;
  if (const double b = schedule_bound(in, plan); std::isfinite(b)) memory = b;
  PlanCertificate c = iteration_bounds(plan.model, plan.num_microbatches,
                                       plan.schedule.split_backward, allreduce, memory);
  c.partition = partition_certificate(in, plan);
  for (PublishedSchedule which : published_beside(plan)) {
    PublishedGap g = published_gap(in, plan, which, allreduce);
    if (g.iteration_s) g.gap = gap_to(c, *g.iteration_s);
    c.published.push_back(std::move(g));
  }
  plan.certificate = with_gap(std::move(c), plan.evaluation.iteration_s);
  return Ok{};
}

}  // namespace pulse::detail
