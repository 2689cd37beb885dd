// The driver: the pass list, by level (HiGHS labels its levels the same way).
//
//   Level 0  compile_checked   the table of alternatives (alternatives.hpp): pulse's own
//                              search, each baseline's own answer, sharded data parallelism,
//                              each recomputation mode under --recompute auto; each level's
//                              request against the profiles, every row planned by level 1
//                              with the job's one cache, compared once, recorded once; the
//                              memory curve of the plan kept
//   Level 1  tune (tuner.cpp)  every configuration x family: placed, screened, finished
//   Level 2  placed_family,    the passes of one configuration and family (passes.hpp), each
//            compile_family    timed under the name --stats prints; answers cached by stage

#include "pulse/compile/compile.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "alternatives.hpp"
#include "compile_internal.hpp"
#include "passes.hpp"
#include "pulse/base/limits.hpp"
#include "pulse/compile/plan_options.hpp"
#include "pulse/schedule/synthesize.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

Result<CompiledPlan> compile_plan(const ModelProfile& model, const ClusterProfile& cluster,
                                  const PlanOptions& options, PassClock* clock) {
  if (auto checked = check_plan_options(options); !checked) return checked.error();
  PassClock own_clock;
  return detail::compile_checked(model, cluster, options, clock ? *clock : own_clock);
}

namespace {

// The plan's schedule replayed as every plan's timeline was (Peaks::held); an internal error
// if it does not end where the plan's timeline says.
Result<Timeline> replayed(const CompiledPlan& plan, Sends sends) {
  auto t = simulate(plan.model, plan.schedule, plan.num_microbatches, plan.static_bytes,
                    Peaks::held, sends);
  if (!t) return t.error();
  if (t->makespan_s != plan.timeline.makespan_s ||
      t->devices.size() != plan.timeline.devices.size()) {
    return internal_error(fmt::format(
        "the plan's schedule replays to a makespan of {:.9f} s, its timeline says {:.9f} s",
        t->makespan_s, plan.timeline.makespan_s));
  }
  return t;
}

}  // namespace

Result<Timeline> timeline_with_sends(const CompiledPlan& plan) {
  auto with_sends = replayed(plan, Sends::recorded);
  if (!with_sends) return with_sends.error();
  Timeline out = plan.timeline;
  for (std::size_t d = 0; d < out.devices.size(); ++d) {
    out.devices[d].sends = std::move(with_sends->devices[d].sends);
  }
  return out;
}

namespace detail {

void release_timeline_ops(CompiledPlan& plan) {
  if (plan.timeline_ops_released) return;
  keep_last_ops(plan.timeline);
  plan.timeline_ops_released = true;
}

void CompileCache::release_timeline_ops(const CompiledPlan* plan) {
  if (plan->timeline_ops_released) return;
  for (auto& [key, cached] : plans) {
    if (!cached || &*cached != plan) continue;
    detail::release_timeline_ops(*cached);
    return;
  }
}

Status restore_timeline(CompiledPlan& plan) {
  if (!plan.timeline_ops_released) return Ok{};
  auto timeline = replayed(plan, Sends::dropped);
  if (!timeline) return timeline.error();
  plan.timeline = std::move(*timeline);
  plan.timeline_ops_released = false;
  return Ok{};
}

Result<CompiledPlan> compile_checked(const ModelProfile& model, const ClusterProfile& cluster,
                                     const PlanOptions& options, PassClock& clock) {
  CompileCache cache;  // the job's: every alternative's graphs, placements, plans, syntheses
  // Frozen encoders run on the devices (not cached): the denoiser is planned within what their
  // weights and one sample's working set leave of the headroom (frozen_headroom).
  auto headroom = frozen_headroom(model, cluster, options);
  if (!headroom) return headroom.error();
  PlanOptions planned = options;
  planned.headroom = *headroom;
  Result<CompiledPlan> plan = compare_alternatives({&model, &cluster, &planned}, cache, clock);
  if (!plan && plan.error().kind == ErrorKind::infeasible && planned.headroom != options.headroom) {
    // The headroom the message names is not one the user gave: say where it came from.
    Error e = plan.error();
    e.message += fmt::format(
        " (the frozen encoders, --frozen {}, stay resident beside the step and leave it --headroom "
        "{:g} of the {:g}; --frozen cached plans the step without them, from outputs encoded "
        "offline)",
        options.frozen, planned.headroom_fraction(), options.headroom_fraction());
    return e;
  }
  if (!plan) return plan;
  plan->given.headroom = options.headroom;
  if (auto s = frozen_pass({&model, &cluster, &options}, *plan, clock); !s) return s.error();
  plan->pass_times = clock.times();
  plan->safety_limit_hits = cache.safety_limit_hits;
  plan->memo_counts = cache.memo.counts();
  return plan;
}

Variant variant_of(const PlanOptions& options) {
  return {options.recompute, options.sequence, options.memory,
          options.pp && options.microbatch_size, options.cuts};
}

const Result<CompiledPlan>& placed_family(const CompileInputs& in, const Config& c, const Family& f,
                                          PassClock& clock) {
  const CacheKey key{variant_of(*in.options), c.pp,   c.dp,
                     c.microbatch_size,       f.name, Reached::placed};
  if (auto it = in.cache->plans.find(key); it != in.cache->plans.end()) return it->second;
  auto keep = [&](Result<CompiledPlan> r) -> auto& {
    return in.cache->plans.emplace(key, std::move(r)).first->second;
  };
  if (static_cast<int>(in.model->layers.size()) < f.num_stages(c.pp)) {
    return keep(usage_error(fmt::format("{} needs {} layers ({} stages at pp {}); model {} has {}",
                                        f.name, f.num_stages(c.pp), f.num_stages(c.pp), c.pp,
                                        in.model->name, in.model->layers.size())));
  }
  if (const std::int64_t ops = schedule_ops(*in.options, f.num_stages(c.pp), c.num_microbatches);
      ops > kMaxOps) {
    return keep(usage_error(
        fmt::format("{} at pp {} has {} stages: {} microbatches are {} schedule ops, above the {} "
                    "a plan states",
                    f.name, c.pp, f.num_stages(c.pp), c.num_microbatches, ops, kMaxOps)));
  }
  const int cut_stages = static_cast<int>(in.options->cuts.size()) + 1;
  if (!in.options->cuts.empty() && f.num_stages(c.pp) != cut_stages) {
    return keep(usage_error(fmt::format("the given cut has {} stages; {} at pp {} has {}",
                                        cut_stages, f.name, c.pp, f.num_stages(c.pp))));
  }
  CompiledPlan plan = start_plan(in, c, f);
  PassState st;
  st.family = &f;
  graph_pass(in, c, plan, st, clock);
  place_pass(in, c, plan, clock);
  if (auto s = partition_pass(in, c, plan, st, clock); !s) return keep(s.error());
  pipeline_model_pass(in, plan, st, clock);
  if (auto s = replace_pass(in, c, plan, st, clock); !s) return keep(s.error());
  return keep(std::move(plan));
}

namespace {

// Where a published order replaced the searches' answer for its shorter iteration
// (synthesize.cpp, adopt_published), the step can still be longer: the order may leave the
// frozen encoders less idle time to run in (flux1-dev-1024 on dgx-h100-8n at batch 8192:
// 103.240 s against 103.609 s an iteration, but 10.4 s of the encoders in bubbles against
// 22.9 s, and 0.28% fewer samples/s over the step). The plan keeps the shorter step.
void weigh_searched(const CompileInputs& in, CompiledPlan& plan, PassClock& clock) {
  // Moved out: the plan keeps none (a moved-from shared_ptr is null).
  const std::shared_ptr<const ScheduleAnswer> searched = std::move(plan.solver.searched);
  if (!searched || !plan.step_s) return;  // no frozen work in the step: the iteration decides
  auto timeline = simulate(plan.model, searched->schedule, plan.num_microbatches, plan.static_bytes,
                           Peaks::held);
  if (!timeline) return;
  CompiledPlan other = plan;
  other.schedule = searched->schedule;
  other.timeline = std::move(*timeline);
  static_cast<ScheduleSearch&>(other.solver) = *searched;
  other.solver.status = searched->status;
  evaluate_pass(in, other, clock);
  frozen_step_pass(in, other);
  if (step_time_s(other) < step_time_s(plan)) plan = std::move(other);
}

}  // namespace

const Result<CompiledPlan>& compile_family(const CompileInputs& in, const Config& c,
                                           const Family& f, Effort effort, PassClock& clock) {
  const bool full = effort == Effort::full && f.schedule == ScheduleFamily::synthesized;
  const CacheKey key{
      variant_of(*in.options), c.pp,   c.dp,
      c.microbatch_size,       f.name, full ? Reached::synthesized : Reached::screened};
  if (auto it = in.cache->plans.find(key); it != in.cache->plans.end()) return it->second;
  if (auto it = in.cache->repeats.find(key); it != in.cache->repeats.end()) return *it->second;
  auto keep = [&](Result<CompiledPlan> r) -> auto& {
    return in.cache->plans.emplace(key, std::move(r)).first->second;
  };
  if (full) {
    // Where the full effort would search exactly as the screen did, its plan is the screen's.
    CacheKey screened = key;
    screened.reached = Reached::screened;
    auto it = in.cache->plans.find(screened);
    if (it != in.cache->plans.end() && it->second && full_repeats_screen(in, *it->second, clock)) {
      in.cache->repeats.emplace(key, &it->second);
      return it->second;
    }
  }
  const Result<CompiledPlan>& placed = placed_family(in, c, f, clock);
  if (!placed) return keep(placed);
  CompiledPlan plan = *placed;
  memory_limits_pass(in, plan, clock);
  if (auto s = schedule_pass(in, plan, full ? Effort::full : Effort::screen, clock); !s) {
    return keep(s.error());
  }
  evaluate_pass(in, plan, clock);
  frozen_step_pass(in, plan);  // the step the search weighs, frozen work included
  weigh_searched(in, plan, clock);
  return keep(std::move(plan));
}

}  // namespace detail

}  // namespace pulse
