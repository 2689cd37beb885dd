// The driver: the pass list, by level (HiGHS labels its levels the same way).
//
//   Level 0  compile_checked   the request against the profiles; the search; pulse against
//                              each baseline's own answer; the memory curve of the plan kept
//                              (--recompute auto: once per mode, recompute_search.cpp)
//   Level 1  tune (tuner.cpp)  every configuration x family: placed, screened, finished
//   Level 2  placed_family,    the passes of one configuration and family (passes.hpp), each
//            compile_family    timed under the name --stats prints; answers cached by stage

#include "pulse/compile/compile.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "compile_internal.hpp"
#include "passes.hpp"
#include "pulse/compile/plan_options.hpp"

namespace pulse {

Result<CompiledPlan> compile_plan(const ModelProfile& model, const ClusterProfile& cluster,
                                  const PlanOptions& options, PassClock* clock) {
  if (auto checked = check_plan_options(options); !checked) return checked.error();
  PassClock own_clock;
  return detail::compile_checked(model, cluster, options, clock ? *clock : own_clock);
}

namespace detail {

Result<CompiledPlan> compile_checked(const ModelProfile& model, const ClusterProfile& cluster,
                                     const PlanOptions& given, PassClock& clock) {
  if (given.recompute == "auto") return compile_recompute_auto(model, cluster, given, clock);
  PlanOptions options = given;
  PlannedInputs inputs;
  if (auto scaled = scale_inputs(model, cluster, options, inputs); !scaled) return scaled.error();
  auto device_type = check_request(*inputs.model, *inputs.cluster, options);
  if (!device_type) return device_type.error();
  CompileCache cache;
  const CompileInputs in{inputs.model, inputs.cluster, &options, *device_type, &cache};
  if (options.pp && options.microbatch_size) {  // one configuration: its errors as they are
    const int dp = options.dp.value_or(std::max(1, inputs.cluster->num_devices() / *options.pp));
    if (auto config = resolve_config(in, *options.pp, dp, *options.microbatch_size); !config) {
      return config.error();
    }
  }
  Result<CompiledPlan> plan = tune(in, clock);  // level 1
  if (options.strategy == Strategy::pulse) {
    plan = against_baselines(in, std::move(plan), clock);
    plan = against_sharded(in, std::move(plan), clock);
  }
  if (!plan) return plan;
  // The plan kept may be a sharded one (against_sharded): its curve under its own options.
  const PlanOptions kept_options = plan->options;
  CompileInputs kept = in;
  kept.options = &kept_options;
  if (auto curved = memory_curve_pass(kept, *plan, clock); !curved) return curved.error();
  plan->pass_times = clock.times();
  plan->safety_limit_hits = cache.safety_limit_hits;
  plan->memo_counts = cache.memo.counts();
  plan->derived_times = inputs.derived_times;
  return plan;
}

const Result<CompiledPlan>& placed_family(const CompileInputs& in, const Config& c, const Family& f,
                                          PassClock& clock) {
  const CacheKey key{c.pp, c.dp, c.microbatch_size, f.name, Reached::placed};
  if (auto it = in.cache->plans.find(key); it != in.cache->plans.end()) return it->second;
  auto keep = [&](Result<CompiledPlan> r) -> auto& {
    return in.cache->plans.emplace(key, std::move(r)).first->second;
  };
  if (static_cast<int>(in.model->layers.size()) < f.num_stages(c.pp)) {
    return keep(usage_error(fmt::format("{} needs {} layers ({} stages at pp {}); model {} has {}",
                                        f.name, f.num_stages(c.pp), f.num_stages(c.pp), c.pp,
                                        in.model->name, in.model->layers.size())));
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

const Result<CompiledPlan>& compile_family(const CompileInputs& in, const Config& c,
                                           const Family& f, Effort effort, PassClock& clock) {
  const bool full = effort == Effort::full && f.schedule == ScheduleFamily::synthesized;
  const CacheKey key{c.pp, c.dp, c.microbatch_size, f.name,
                     full ? Reached::synthesized : Reached::screened};
  if (auto it = in.cache->plans.find(key); it != in.cache->plans.end()) return it->second;
  auto keep = [&](Result<CompiledPlan> r) -> auto& {
    return in.cache->plans.emplace(key, std::move(r)).first->second;
  };
  const Result<CompiledPlan>& placed = placed_family(in, c, f, clock);
  if (!placed) return keep(placed);
  CompiledPlan plan = *placed;
  memory_limits_pass(in, plan, clock);
  if (auto s = schedule_pass(in, plan, full ? Effort::full : Effort::screen, clock); !s) {
    return keep(s.error());
  }
  evaluate_pass(in, plan, clock);
  return keep(std::move(plan));
}

}  // namespace detail

}  // namespace pulse
