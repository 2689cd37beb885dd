// The tuner: chooses pipeline degree, data-parallel degree and microbatch size.
//
// Candidates: every pipeline degree P that divides the cluster (or fits beside a given
// --dp) and that the model can fill (2P layers on a V, P on a chain); D = devices / P; every
// microbatch size b that is a power of two up to the largest profiled size and divides the
// per-replica batch; M = global batch / (D b). Values given on the command line fix their
// dimension. Each candidate gets the whole pass list (partition, placement, schedule,
// evaluation) with a cheap schedule (a short policy search); the best few by that screen
// get the full schedule synthesis, and the fastest of those wins. Every other candidate is
// kept with the reason it lost: out of memory (where, by how much), batch not divisible,
// too few layers, or slower by what share.

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "compile_internal.hpp"
#include "pulse/base/units.hpp"
#include "pulse/graph/layer_graph.hpp"

namespace pulse::detail {

namespace {

struct Trial {
  Candidate candidate;
  std::optional<Config> config;
  std::optional<CompiledPlan> plan;
};

std::vector<int> pipeline_degrees(const CompileInputs& in) {
  const ModelProfile& model = *in.model;
  const ClusterProfile& cluster = *in.cluster;
  const PlanOptions& o = *in.options;
  if (o.pp) return {*o.pp};
  const int n = cluster.num_devices(), layers = static_cast<int>(model.layers.size());
  std::vector<int> out;
  for (int p = 1; p <= (o.dp ? n / *o.dp : n); ++p) {
    bool fits = false;  // deeper pipelines need more layers than any family has stages
    for (const Family* f : searched_families(o)) fits = fits || f->num_stages(p) <= layers;
    if (!fits) break;
    if (o.dp || n % p == 0) out.push_back(p);
  }
  return out;
}

std::vector<int> microbatch_sizes(const ModelProfile& model, const PlanOptions& o) {
  if (o.microbatch_size) return {*o.microbatch_size};
  std::vector<int> out;
  for (int b = 1; b <= model.microbatch_sizes.back(); b *= 2) out.push_back(b);
  return out;
}

std::vector<Trial> enumerate(const CompileInputs& in) {
  const PlanOptions& o = *in.options;
  std::vector<Trial> trials;
  for (int pp : pipeline_degrees(in)) {
    const int dp = o.dp.value_or(std::max(1, in.cluster->num_devices() / pp));
    for (int b : microbatch_sizes(*in.model, o)) {
      Trial t;
      t.candidate.pp = pp;
      t.candidate.dp = dp;
      t.candidate.microbatch_size = b;
      auto config = resolve_config(in, pp, dp, b);
      if (config) {
        t.config = *config;
        t.candidate.num_microbatches = config->num_microbatches;
      } else {
        t.candidate.reason = config.error().message;
      }
      trials.push_back(std::move(t));
    }
  }
  return trials;
}

void record(Trial& t, const Result<CompiledPlan>& plan, bool synthesized) {
  t.candidate.synthesized = synthesized;
  if (!plan) {
    t.candidate.feasible = false;
    t.candidate.reason = plan.error().message;
    return;
  }
  t.candidate.feasible = true;
  t.candidate.reason.clear();
  t.candidate.iteration_s = plan->evaluation.iteration_s;
  t.candidate.samples_per_s = plan->evaluation.samples_per_s;
  t.candidate.family = plan->family->name;
  t.candidate.peak_memory_bytes = 0;
  for (const DeviceTimeline& d : plan->timeline.devices) {
    t.candidate.peak_memory_bytes = std::max(t.candidate.peak_memory_bytes, d.peak.total());
  }
}

// The shallowest pipeline whose most memory-frugal partition (microbatch 1, one microbatch
// in flight) fits, for the message when nothing in the cluster does.
std::string smallest_shortfall(const CompileInputs& in) {
  const ModelProfile& model = *in.model;
  const ClusterProfile& cluster = *in.cluster;
  const PlanOptions& o = *in.options;
  const LayerGraph g = LayerGraph::build(model, in.device_type, 1);
  // The strategy's reference family (pulse's full-locality V).
  const Family* frugal = searched_families(o).front();
  const bool v = !frugal->chain();
  const int layers = g.num_layers();
  for (int p = 1; frugal->num_stages(p) <= layers; ++p) {
    PartitionRequest r;
    r.graph = &g;
    r.pp = p;
    r.links = PipelineLinks(p, std::vector<LinkClass>(p, LinkClass{"any", 1e30, 0}));
    r.memory_capacity = cluster.usable_memory();
    r.memory = o.memory;
    r.dp = std::max(1, cluster.num_devices() / p);
    r.inflight.assign(p, 1);
    r.routing = frugal->routing;
    const bool fits = v ? partition_v(r, SkipPolicy::allow_nonlocal).found()
                        : partition_sequential(r).found();
    if (fits) {
      return fmt::format(
          "{} needs at least {} {} devices ({} usable each) per pipeline, even "
          "with microbatch 1 and one microbatch in flight; the cluster has {}",
          model.name, p, cluster.device_type, format_bytes(cluster.usable_memory()),
          cluster.num_devices());
    }
  }
  return fmt::format("{} does not fit {} devices ({} usable each) even with one layer per stage",
                     model.name, cluster.device_type, format_bytes(cluster.usable_memory()));
}

// Every candidate failed a consistency check: one reason if they share it (a fixed option
// the cluster cannot meet), else each configuration with its own.
std::string inconsistent(const CompileInputs& in, const std::vector<Trial>& trials) {
  if (trials.empty()) {
    const Family* f = searched_families(*in.options).empty()
                          ? nullptr
                          : searched_families(*in.options).front();
    return fmt::format("model {} has {} layers; no pipeline degree gives {} stages of one "
                       "layer or more",
                       in.model->name, in.model->layers.size(),
                       f ? f->name : strategy_name(in.options->strategy));
  }
  bool same = true;
  for (const Trial& t : trials)
    same = same && t.candidate.reason == trials.front().candidate.reason;
  if (same) return trials.front().candidate.reason;
  std::string out = "no configuration is consistent:";
  for (const Trial& t : trials) {
    out += fmt::format("\n  pp {}, microbatch {}: {}", t.candidate.pp, t.candidate.microbatch_size,
                       t.candidate.reason);
  }
  return out;
}

// Nothing fits memory. With the pipeline degree fixed, that degree's own shortfall (where
// and by how much); otherwise the smallest pipeline that would fit, and the shortfall of the
// deepest one the cluster allows.
std::string nothing_fits(const CompileInputs& in, const std::vector<Trial>& trials) {
  const Trial* deepest = nullptr;
  for (const Trial& t : trials) {
    if (t.config && (!deepest || t.candidate.pp > deepest->candidate.pp)) deepest = &t;
  }
  if (in.options->pp) return deepest->candidate.reason;
  return smallest_shortfall(in) + ". At pp " +
         std::to_string(deepest->candidate.pp) + ": " + deepest->candidate.reason;
}

// Best first: throughput, then fewer devices per pipeline, then smaller microbatches.
bool faster(const Candidate& a, const Candidate& b) {
  if (a.feasible != b.feasible) return a.feasible;
  if (a.samples_per_s != b.samples_per_s) return a.samples_per_s > b.samples_per_s;
  if (a.pp != b.pp) return a.pp < b.pp;
  return a.microbatch_size < b.microbatch_size;
}

std::vector<Candidate> explain(std::vector<Trial>& trials, const Candidate& chosen) {
  std::vector<Candidate> out;
  for (Trial& t : trials) {
    Candidate c = t.candidate;
    if (c.feasible) {
      c.chosen =
          c.pp == chosen.pp && c.dp == chosen.dp && c.microbatch_size == chosen.microbatch_size;
      if (!c.chosen) {
        c.reason = fmt::format("{:.1f}% fewer samples/s than the chosen configuration{}",
                               100.0 * (1.0 - c.samples_per_s / chosen.samples_per_s),
                               c.synthesized ? "" : " (screened)");
      }
    }
    out.push_back(std::move(c));
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.chosen != b.chosen) return a.chosen;
    return faster(a, b);
  });
  return out;
}

}  // namespace

Result<CompiledPlan> tune(const CompileInputs& in, PassClock& clock) {
  const PlanOptions& o = *in.options;
  std::vector<Trial> trials = enumerate(in);
  const int total = static_cast<int>(trials.size());
  int done = 0, valid = 0;
  for (Trial& t : trials) {
    if (t.config) {
      ++valid;
      auto plan = compile_configuration(in, *t.config, Effort::screen, clock);
      if (!plan && plan.error().kind == ErrorKind::internal) return plan.error();
      record(t, plan, false);
      if (plan) t.plan = std::move(*plan);
    }
    if (o.progress) o.progress(++done, total);
  }
  std::vector<Trial*> ranked;
  for (Trial& t : trials) {
    if (t.candidate.feasible) ranked.push_back(&t);
  }
  if (ranked.empty()) {
    if (valid == 0) return usage_error(inconsistent(in, trials));
    return infeasible_error(nothing_fits(in, trials));
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Trial* a, const Trial* b) {
    return faster(a->candidate, b->candidate);
  });
  const std::size_t k =
      o.tuner_top_k > 0 ? std::min<std::size_t>(o.tuner_top_k, ranked.size()) : ranked.size();
  Trial* best = nullptr;
  for (std::size_t i = 0; i < k; ++i) {
    Trial& t = *ranked[i];
    auto plan = finish(in, *t.config, *t.plan, clock);
    if (!plan && plan.error().kind == ErrorKind::internal) return plan.error();
    record(t, plan, true);
    t.plan.reset();
    if (plan) {
      t.plan = std::move(*plan);
      if (!best || faster(t.candidate, best->candidate)) best = &t;
    }
  }
  if (!best) return infeasible_error(nothing_fits(in, trials));
  CompiledPlan plan = std::move(*best->plan);
  plan.candidates = explain(trials, best->candidate);
  return plan;
}

Candidate chosen_candidate(const CompiledPlan& plan) {
  Trial t;
  record(t, plan, true);
  t.candidate.pp = plan.pp;
  t.candidate.dp = plan.dp;
  t.candidate.microbatch_size = plan.microbatch_size;
  t.candidate.num_microbatches = plan.num_microbatches;
  t.candidate.chosen = true;
  return t.candidate;
}

}  // namespace pulse::detail
