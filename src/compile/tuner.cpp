// The search: chooses pipeline degree, data-parallel degree, microbatch size and family.
//
// Configurations: every pipeline degree P that divides the cluster (or fits beside a given
// --dp) and that some family can fill; D = devices / P; every microbatch size b that is a
// power of two up to the largest profiled size and divides the per-replica batch; M =
// global batch / (D b). Values given on the command line fix their dimension (all of them:
// one configuration). Every configuration is tried with every family of the strategy:
//
//   1. place: partition, placement and pipeline model of each (configuration, family), and
//      a lower bound on its step (step_lower_bound);
//   2. screen: a cheap schedule (a short policy search), lowest bound first; a pair whose
//      bound is no better than the fastest screened plan so far is not scheduled;
//   3. finish: the best few screened configurations of each family get the full schedule
//      synthesis, unless their bound is no better than the fastest plan so far; a pair keeps
//      whichever of its two schedules is faster.
//
// Since every family keeps its own best few, narrowing the search to one family (--family)
// finishes a subset of the pairs the whole search finishes or bounds away: the whole
// search is never slower than any of its families searched alone. Every configuration is
// kept with the reason it lost: out of memory (where, by how much), batch not divisible,
// too few layers, not scheduled by its bound, or slower by what share.

#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "compile_internal.hpp"
#include "passes.hpp"
#include "pulse/base/limits.hpp"
#include "pulse/base/units.hpp"
#include "pulse/graph/layer_graph.hpp"
#include "pulse/plan/certificate.hpp"
#include "pulse/simulate/evaluate.hpp"

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

double step_rate(const Candidate& c) {
  const double rate = c.samples_per_s.value_or(0);
  if (!c.step_s || !c.iteration_s) return rate;
  return rate * *c.iteration_s / *c.step_s;
}

namespace {

struct Trial {
  Candidate candidate;
  std::optional<Config> config;
};

// One family at one configuration, through the search's three steps.
struct Pair {
  std::size_t trial = 0;
  const Family* family = nullptr;
  std::size_t family_index = 0;  // in searched_families: the families' order in the plan
  double lower_bound = 0;
  const CompiledPlan* screened = nullptr;
  const CompiledPlan* result = nullptr;  // the pair's answer: see finish_pairs
  bool synthesized = false;              // the result got the full synthesis
  bool bounded = false;                  // not scheduled: its bound cannot win...
  double bounded_by = 0;                 // ...this plan's time, already found
  std::optional<Error> error;            // why it has no result
};

std::string bounded_reason(const char* whose, const Pair& p) {
  return fmt::format(
      "not scheduled: {} lower bound on time, {}, is no better than a plan "
      "already found, {}",
      whose, format_seconds(p.lower_bound), format_seconds(p.bounded_by));
}

// How telling a pair's reason for having no result is: a family that cannot win (its
// bound) over one that does not fit, over one the model cannot fill.
int telling(const Pair& p) {
  if (p.bounded) return 3;
  return p.error->kind == ErrorKind::infeasible ? 1 : 0;
}

std::vector<int> pipeline_degrees(const CompileInputs& in) {
  const ModelProfile& model = *in.model;
  const ClusterProfile& cluster = *in.cluster;
  const PlanOptions& o = *in.options;
  if (o.pp) return {*o.pp};
  const int n = cluster.num_devices(), layers = static_cast<int>(model.layers.size());
  std::vector<int> out;
  if (!o.cuts.empty()) {
    // A given cut of S stages: the degrees at which some family has S stages, whether or
    // not they divide the cluster (the devices beyond pp x dp stay idle, as with --pp). From
    // 2: a cut is a pipeline, and at pp 1 its stages would share one device
    // (check_cut_degrees refuses a cut no degree takes).
    const int stages = static_cast<int>(o.cuts.size()) + 1;
    for (int p = 2; p <= std::min(kMaxPipelineDegree, o.dp ? n / *o.dp : n); ++p) {
      for (const Family* f : searched_families(o)) {
        if (f->num_stages(p) == stages) {
          out.push_back(p);
          break;
        }
      }
    }
    return out;
  }
  for (int p = 1; p <= std::min(kMaxPipelineDegree, o.dp ? n / *o.dp : n); ++p) {
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

void record(Trial& t, const CompiledPlan* plan, bool synthesized) {
  t.candidate.synthesized = synthesized;
  t.candidate.feasible = true;
  t.candidate.reason.reset();
  t.candidate.iteration_s = plan->evaluation.iteration_s;
  t.candidate.samples_per_s = plan->evaluation.samples_per_s;
  t.candidate.step_s = plan->step_s;
  t.candidate.family = plan->family->name;
  std::int64_t peak = 0;
  for (const DeviceTimeline& d : plan->timeline.devices) peak = std::max(peak, d.peak.total());
  t.candidate.peak_memory_bytes = peak;
}

// "38.1 MiB usable each", or with the usable memory capped below all of it, "36.2 MiB each
// to fill at --headroom 0.95".
std::string usable_each(const ClusterProfile& cluster, const PlanOptions& o) {
  const std::string bytes = format_bytes(cluster.usable_memory());
  if (o.headroom_fraction() == 1) return bytes + " usable each";
  return fmt::format("{} each to fill at --headroom {:g}", bytes, o.headroom_fraction());
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
    r.links = PipelineLinks(p, LinkClass{"any", 1e30, 0});
    r.memory_capacity = cluster.usable_memory();
    r.memory = o.memory;
    r.dp = std::max(1, cluster.num_devices() / p);
    r.inflight.assign(p, 1);
    r.routing = frugal->routing;
    r.shortfall = false;  // whether it fits is all this asks
    const bool fits =
        v ? partition_v(r, SkipPolicy::allow_nonlocal).found() : partition_sequential(r).found();
    if (fits) {
      return fmt::format(
          "{} needs at least {} {} devices ({}) per pipeline, even "
          "with microbatch 1 and one microbatch in flight; the cluster has {}",
          model.name, p, cluster.device_type, usable_each(cluster, o), cluster.num_devices());
    }
  }
  return fmt::format("{} does not fit {} devices ({}) even with one layer per stage", model.name,
                     cluster.device_type, usable_each(cluster, o));
}

// Every candidate failed a consistency check: one reason if they share it (a fixed option
// the cluster cannot meet), else each configuration with its own.
std::string inconsistent(const CompileInputs& in, const std::vector<Trial>& trials) {
  if (trials.empty()) {
    const Family* f =
        searched_families(*in.options).empty() ? nullptr : searched_families(*in.options).front();
    return fmt::format(
        "model {} has {} layers; no pipeline degree gives {} stages of one "
        "layer or more",
        in.model->name, in.model->layers.size(), f ? f->name : strategy_name(in.options->strategy));
  }
  bool same = true;
  for (const Trial& t : trials)
    same = same && t.candidate.reason == trials.front().candidate.reason;
  if (same) return trials.front().candidate.reason.value_or("");
  std::string out = "no configuration is consistent:";
  for (const Trial& t : trials) {
    out += fmt::format("\n  pp {}, microbatch {}: {}", t.candidate.pp, t.candidate.microbatch_size,
                       t.candidate.reason.value_or(""));
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
  const std::string reason = deepest->candidate.reason.value_or("");
  if (in.options->pp) return reason;
  return smallest_shortfall(in) + ". At pp " + std::to_string(deepest->candidate.pp) + ": " +
         reason;
}

// Best first: throughput over the step, then fewer devices per pipeline, then smaller
// microbatches.
bool faster(const Candidate& a, const Candidate& b) {
  if (a.feasible != b.feasible) return a.feasible;
  const double x = step_rate(a), y = step_rate(b);
  if (x != y) return x > y;
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
        c.reason = fmt::format("{:.1f}% fewer samples/s than the chosen configuration{}{}",
                               100.0 * (1.0 - step_rate(c) / step_rate(chosen)),
                               c.step_s ? " over the step, frozen encoders included" : "",
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

namespace {

// The search's order on answers: throughput over the step (frozen work included), then fewer
// devices per pipeline, smaller microbatches, fewer bytes moved, the family listed first.
bool ahead(const Pair& a, const Pair& b) {
  const CompiledPlan& x = *a.result;
  const CompiledPlan& y = *b.result;
  if (step_samples_per_s(x) != step_samples_per_s(y)) {
    return step_samples_per_s(x) > step_samples_per_s(y);
  }
  if (x.pp != y.pp) return x.pp < y.pp;
  if (x.microbatch_size != y.microbatch_size) return x.microbatch_size < y.microbatch_size;
  if (p2p_bytes(x) != p2p_bytes(y)) return p2p_bytes(x) < p2p_bytes(y);
  return a.family_index < b.family_index;
}

// Only the plan tune would choose now keeps its timeline's ops in the cache: the others'
// are released as soon as they are made or overtaken (`made`: the plan just made, which
// may be no pair's result). The tuner reads their figures only; tune restores the chosen
// plan's ops where another tune of the job released them.
void release_all_but_best(const CompileInputs& in, const std::vector<Pair>& pairs,
                          const CompiledPlan* made) {
  const Pair* best = nullptr;
  for (const Pair& p : pairs) {
    if (p.result && (!best || ahead(p, *best))) best = &p;
  }
  auto release = [&](const CompiledPlan* plan) {
    if (plan && (!best || plan != best->result)) in.cache->release_timeline_ops(plan);
  };
  release(made);
  for (const Pair& p : pairs) {
    release(p.screened);
    release(p.result);
  }
}

// Step 1: every (configuration, family) placed, with its lower bound.
Status place_pairs(const CompileInputs& in, std::vector<Trial>& trials, std::vector<Pair>& pairs,
                   PassClock& clock) {
  const std::vector<const Family*> families = searched_families(*in.options);
  int done = 0;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    for (std::size_t k = 0; trials[i].config && k < families.size(); ++k) {
      Pair p;
      p.trial = i;
      p.family = families[k];
      p.family_index = k;
      const Result<CompiledPlan>& placed = placed_family(in, *trials[i].config, *p.family, clock);
      if (!placed) {
        if (placed.error().kind == ErrorKind::internal) return placed.error();
        p.error = placed.error();
      } else {
        p.lower_bound = step_lower_bound(in, *placed);
      }
      pairs.push_back(std::move(p));
    }
    if (in.options->progress) in.options->progress(++done, static_cast<int>(trials.size()));
  }
  return Ok{};
}

// Step 2: the cheap schedule, lowest bound first, bounded by the fastest screened plan so
// far.
Status screen_pairs(const CompileInputs& in, const std::vector<Trial>& trials,
                    std::vector<Pair>& pairs, PassClock& clock) {
  std::vector<Pair*> order;
  for (Pair& p : pairs) {
    if (!p.error) order.push_back(&p);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Pair* a, const Pair* b) { return a->lower_bound < b->lower_bound; });
  double fastest = std::numeric_limits<double>::infinity();
  for (Pair* p : order) {
    if (p->lower_bound >= fastest) {
      p->bounded = true;
      p->bounded_by = fastest;
      p->error = Error{ErrorKind::infeasible, bounded_reason("its", *p)};
      continue;
    }
    const Result<CompiledPlan>& plan =
        compile_family(in, *trials[p->trial].config, *p->family, Effort::screen, clock);
    if (!plan) {
      if (plan.error().kind == ErrorKind::internal) return plan.error();
      p->error = plan.error();
      continue;
    }
    p->screened = p->result = &*plan;
    release_all_but_best(in, pairs, &*plan);
    // The synthesizer's bound on any schedule of this pipeline (its memory included) holds
    // for the full synthesis too, and an iteration is never shorter than its makespan. Its
    // step is no shorter than its iteration: bounds on the iteration are bounds on steps.
    p->lower_bound = std::max(p->lower_bound, plan->solver.lower_bound_s);
    fastest = std::min(fastest, step_time_s(*plan));
  }
  return Ok{};
}

// Step 3: each family's best `top_k` screened configurations (all when top_k is 0) get the
// full synthesis, fastest screen first, unless its bound is no better than the fastest
// answer so far; a pair keeps the faster of its two schedules.
Status finish_pairs(const CompileInputs& in, const std::vector<Trial>& trials,
                    std::vector<Pair>& pairs, PassClock& clock) {
  const std::size_t top_k = in.options->tuner_top_k > 0
                                ? static_cast<std::size_t>(in.options->tuner_top_k)
                                : pairs.size();
  std::vector<Pair*> finishing;
  double fastest = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < searched_families(*in.options).size(); ++k) {
    std::vector<Pair*> family;
    for (Pair& p : pairs) {
      if (p.family_index == k && p.screened) family.push_back(&p);
    }
    std::stable_sort(family.begin(), family.end(),
                     [](const Pair* a, const Pair* b) { return ahead(*a, *b); });
    if (family.size() > top_k) family.resize(top_k);
    finishing.insert(finishing.end(), family.begin(), family.end());
    for (const Pair* p : family) fastest = std::min(fastest, step_time_s(*p->screened));
  }
  std::stable_sort(finishing.begin(), finishing.end(),
                   [](const Pair* a, const Pair* b) { return ahead(*a, *b); });
  for (Pair* p : finishing) {
    if (p->lower_bound >= fastest) continue;  // the screen is as good as it gets
    const Result<CompiledPlan>& full =
        compile_family(in, *trials[p->trial].config, *p->family, Effort::full, clock);
    if (!full) {
      if (full.error().kind == ErrorKind::internal) return full.error();
      continue;
    }
    p->synthesized = true;
    if (faster_plan(*full, *p->screened)) p->result = &*full;
    release_all_but_best(in, pairs, &*full);
    fastest = std::min(fastest, step_time_s(*p->result));
  }
  return Ok{};
}

// Each configuration's candidate entry: its fastest family's figures, else why none ran.
void summarize(std::vector<Trial>& trials, const std::vector<Pair>& pairs) {
  std::vector<const Pair*> best(trials.size(), nullptr);
  std::vector<const Pair*> failed(trials.size(), nullptr);
  for (const Pair& p : pairs) {
    if (p.result) {
      if (!best[p.trial] || ahead(p, *best[p.trial])) best[p.trial] = &p;
    } else if (p.error) {
      const Pair*& f = failed[p.trial];
      if (!f || telling(p) > telling(*f) ||
          (p.bounded && f->bounded && p.lower_bound < f->lower_bound)) {
        f = &p;
      }
    }
  }
  for (std::size_t i = 0; i < trials.size(); ++i) {
    if (best[i]) {
      record(trials[i], best[i]->result, best[i]->synthesized);
    } else if (failed[i]) {
      trials[i].candidate.feasible = false;
      trials[i].candidate.reason = failed[i]->error->message;
      if (failed[i]->bounded) {
        trials[i].candidate.reason = bounded_reason("its families' least", *failed[i]);
      }
    }
  }
}

}  // namespace

double step_lower_bound(const CompileInputs& in, const CompiledPlan& plan) {
  // The plan's certificate, before any schedule exists: the same bounds, one rule
  // (plan/certificate.hpp). Its fill and drain counts a device's blocking send after its
  // first stage's backward once (this function had it twice, in the device's work and in
  // the drain that follows, and so could exceed the makespan of a schedule that meets it).
  // No step is shorter than its iteration, nor than the frozen work's bound.
  const std::vector<double> allreduce = allreduce_times(plan.model, plan.ranks, in.options->memory,
                                                        *in.cluster, plan.num_microbatches);
  const double iteration = iteration_bounds(plan.model, plan.num_microbatches,
                                            in.options->split_backward, allreduce, std::nullopt)
                               .bound_s;
  return std::max(iteration, frozen_step_bound(in, plan, allreduce));
}

Result<double> tune_lower_bound(const CompileInputs& in, PassClock& clock) {
  double bound = std::numeric_limits<double>::infinity();
  for (const Trial& t : enumerate(in)) {
    for (const Family* f : searched_families(*in.options)) {
      if (!t.config) break;
      const Result<CompiledPlan>& placed = placed_family(in, *t.config, *f, clock);
      if (!placed) {
        if (placed.error().kind == ErrorKind::internal) return placed.error();
        continue;
      }
      // Its step is no shorter than either bound (the schedule's is its makespan's, no
      // longer than the iteration, no longer than the step).
      const double pair = std::max(step_lower_bound(in, *placed), schedule_bound(in, *placed));
      bound = std::min(bound, pair);
    }
  }
  return bound;
}

Result<CompiledPlan> tune(const CompileInputs& in, PassClock& clock) {
  std::vector<Trial> trials = enumerate(in);
  std::vector<Pair> pairs;
  if (Status s = place_pairs(in, trials, pairs, clock); !s) return s.error();
  if (Status s = screen_pairs(in, trials, pairs, clock); !s) return s.error();
  if (Status s = finish_pairs(in, trials, pairs, clock); !s) return s.error();
  summarize(trials, pairs);
  const Pair* chosen = nullptr;
  for (const Pair& p : pairs) {
    if (p.result && (!chosen || ahead(p, *chosen))) chosen = &p;
  }
  if (!chosen) {
    const bool any_config =
        std::any_of(trials.begin(), trials.end(), [](const Trial& t) { return t.config; });
    if (!any_config) return usage_error(inconsistent(in, trials));
    return infeasible_error(nothing_fits(in, trials));
  }
  // The plan as the tune weighed it: where the cache released its timeline's ops (or the
  // schedule memo recalled it so), they stay released. The one caller, plan_level, weighs
  // plans by their figures and gives the ops back to the plan it keeps (restore_timeline, or
  // a synthesized plan's memory curve, which replays it whole). A row that planned what an
  // earlier row did (v-naive after pulse's own at pp 1024 over 2048 layers) was replayed
  // here, 0.5 s, and dropped unread.
  CompiledPlan plan = *chosen->result;
  // The cache's copy gives up its ops, so that the job holds one of the chosen timelines,
  // not two.
  in.cache->release_timeline_ops(chosen->result);
  plan.candidates = explain(trials, trials[chosen->trial].candidate);
  plan.families.clear();
  for (const Pair& p : pairs) {
    if (p.trial != chosen->trial) continue;
    FamilyOutcome o = outcome_of(*p.family, p.result, p.synthesized);
    if (!p.result && p.error) o.reason = p.error->message;
    o.chosen = &p == chosen;
    plan.families.push_back(std::move(o));
  }
  return plan;
}

}  // namespace pulse::detail
