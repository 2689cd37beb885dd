// --recompute auto: the plan under each recomputation mode, the fastest kept. Which mode
// wins depends on memory more than on the model: recomputing costs about one forward more
// per recomputed layer, and pays where the memory it frees lets more microbatches fly (a
// deep pipeline on small devices) or a larger microbatch fit.

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "compile_internal.hpp"
#include "pulse/profile/recompute.hpp"

namespace pulse::detail {

namespace {

RecomputeAnswer answer_of(const char* mode, int layers, const CompiledPlan& p) {
  RecomputeAnswer a;
  a.mode = mode;
  a.layers = layers;
  a.feasible = true;
  a.pp = p.pp;
  a.microbatch_size = p.microbatch_size;
  a.iteration_s = p.evaluation.iteration_s;
  a.samples_per_s = p.evaluation.samples_per_s;
  a.peak_memory_bytes = largest_peak_bytes(p);
  return a;
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

}  // namespace

Result<CompiledPlan> compile_recompute_auto(const ModelProfile& model,
                                            const ClusterProfile& cluster,
                                            const PlanOptions& options, PassClock& clock) {
  std::optional<CompiledPlan> best;
  std::optional<Error> first_error;
  RecomputeSearch search;
  for (const char* mode : {"none", "selective", "full"}) {
    RecomputeAnswer a;
    a.mode = mode;
    if (a.mode != "none") {
      a.layers = static_cast<int>(recomputed_layers(mode, model, 0, model.layers.size()).size());
      if (a.layers == 0) {
        a.reason = "recomputes no layer of this model";
        search.modes.push_back(std::move(a));
        continue;
      }
    }
    PlanOptions o = options;
    o.recompute = mode;
    Result<CompiledPlan> plan = compile_checked(model, cluster, o, clock);
    if (!plan) {
      // A bad request is bad under every mode: its error as it is.
      if (plan.error().kind != ErrorKind::infeasible) return plan.error();
      a.reason = plan.error().message;
      if (!first_error) first_error = plan.error();
      search.modes.push_back(std::move(a));
      continue;
    }
    search.modes.push_back(answer_of(mode, a.layers, *plan));
    if (!best || faster_plan(*plan, *best)) best = std::move(*plan);
  }
  if (!best) return *first_error;
  search.chosen = best->options.recompute;
  search.note = note_of(search);
  best->recompute_search = std::move(search);
  return std::move(*best);
}

}  // namespace pulse::detail
