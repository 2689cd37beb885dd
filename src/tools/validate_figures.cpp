// The plan validator's checks of the figures a plan states about itself: the predictions,
// recomputed by replaying the plan on the profiles; the summaries of its search and solve
// (partition, families, search, solver), held to what they summarise; the claims that name
// the cluster (cost model, link classes, in-flight limits).
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "pulse/cost/memory.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/tools/replay.hpp"
#include "validate_internal.hpp"

namespace pulse::detail {

namespace {

bool same_rate(double a, double b) {
  return std::fabs(a - b) <= 1e-6 * std::max(std::fabs(a), std::fabs(b));
}

}  // namespace

// The figures the plan predicts, recomputed and compared: its schedule replayed, as
// `simulate --cluster` replays it, with the stage and transfer times checked above and the
// cluster's links and all-reduce, then `comm` and `predicted` compared key by key
// (compare_figures, plan_codec.hpp), and the solver's makespan, bound, peak and memory curve. A
// plan whose iteration time, throughput, bubble or peaks were edited is caught here. Only a plan
// without other violations is replayed: the figures of a broken one differ as an echo of what
// is already listed.
void Validator::check_predicted_figures() {
  if (!count_.empty()) {
    skip("predicted figures: they would differ as an echo of the violations above");
    return;
  }
  ReplayRequest request;
  request.plan = &plan_;
  request.cluster = &unscaled_;
  request.trust_edited_stages = true;  // the stages were checked against the profiles above
  auto replay = replay_plan(request);
  if (!replay) {
    fail("predicted", fmt::format("cannot recompute the figures: {}", replay.error().message));
    return;
  }
  const std::vector<FigureDifference> differences = compare_figures(plan_, replay->figures);
  for (const FigureDifference& d : differences) {
    fail("predicted",
         fmt::format("{} is {}; replayed on the profiles it is {}", d.path, d.plan, d.replay));
  }
  predicted_right_ = differences.empty();
  if (plan_.solver) check_solver(*plan_.solver, replay->timeline);
}

// The solver block against the replayed timeline: the makespan it found, the peak it reached
// (the fullest device's resident activations and skip caches), and the budgets its memory
// curve was searched at (below that peak).
void Validator::check_solver(const PlanSolver& s, const Timeline& replayed) {
  if (!close(s.makespan_s, replayed.makespan_s)) {
    fail("predicted", fmt::format("$.solver.makespan_s is {:.9f} s, the schedule ends at {:.9f} s",
                                  s.makespan_s, replayed.makespan_s));
  }
  if (s.lower_bound_s > replayed.makespan_s + kTimeTolerance) {
    fail("predicted", fmt::format("$.solver.lower_bound_s is {:.9f} s, above the makespan it "
                                  "bounds, {:.9f} s",
                                  s.lower_bound_s, replayed.makespan_s));
  }
  std::int64_t peak = 0;
  for (const DeviceTimeline& d : replayed.devices) peak = std::max(peak, d.resident_peak);
  // 0: not stated (plans before the key; it is read as 0 when absent).
  if (s.peak_activation_bytes != 0 && s.peak_activation_bytes != peak) {
    fail("predicted", fmt::format("$.solver.peak_activation_bytes is {}; replayed, the fullest "
                                  "device holds {}",
                                  s.peak_activation_bytes, peak));
  }
  // The curve's makespans are searched, not bound to the schedule's (a search at a smaller
  // budget may find a faster one); its budgets are fractions of the peak.
  for (std::size_t i = 0; i < s.memory_curve.size(); ++i) {
    const MemoryCurvePoint& m = s.memory_curve[i];
    if (peak > 0 && m.activation_budget_bytes >= peak) {
      fail("predicted", fmt::format("$.solver.memory_curve[{}]: a budget of {} bytes is not below "
                                    "the peak it is measured against, {} bytes",
                                    i, m.activation_budget_bytes, peak));
    }
  }
}

// What the partition, family and search summaries say, against what they summarise: the
// objective is the largest device load, the chosen family and configuration are the plan's,
// with its figures; the options given are the degrees planned.
void Validator::check_summary() {
  const PlanPartition& p = plan_.partition;
  double largest = 0;
  bool loads = !plan_.devices.empty();
  for (const PlanDevice& d : plan_.devices) {
    loads = loads && d.load_s;
    largest = std::max(largest, d.load_s.value_or(0));
  }
  if (loads && !close(p.objective_s, largest)) {
    fail("summary", fmt::format("partition.objective_s is {:.9f} s; the largest device load_s is "
                                "{:.9f} s",
                                p.objective_s, largest));
  }
  if (p.lower_bound_s > p.objective_s + kTimeTolerance) {
    fail("summary", fmt::format("partition.lower_bound_s is {:.9f} s, above the objective it "
                                "bounds, {:.9f} s",
                                p.lower_bound_s, p.objective_s));
  }
  check_chosen_family();
  check_chosen_candidate();
  const PlanGivenOptions& o = plan_.options;
  const PlanParallelism& x = plan_.parallelism;
  for (const auto& [name, given, planned] :
       {std::tuple{"pp", o.pp, x.pp},
        {"dp", o.dp, x.dp},
        {"microbatch_size", o.microbatch_size, x.microbatch_size},
        {"global_batch", o.global_batch, x.global_batch}}) {
    if (given && *given != planned) {
      fail("summary", fmt::format("options.{} is {}, but the plan's parallelism.{} is {}", name,
                                  *given, name, planned));
    }
  }
  check_chosen_options();
}

// An option given is what was planned (v2: `chosen` beside `options`): never replaced.
void Validator::check_chosen_options() {
  if (!plan_.chosen) return;
  const PlanChosen& c = *plan_.chosen;
  const PlanMemoryOptions& m = plan_.options.memory;
  if (m.zero_stage && *m.zero_stage != c.memory.zero_stage) {
    fail("summary", fmt::format("options.memory.zero_stage is {}, but chosen.memory.zero_stage "
                                "is {}: an option given is kept, never replaced",
                                *m.zero_stage, c.memory.zero_stage));
  }
  if (m.precision != c.memory.precision) {
    fail("summary", fmt::format("options.memory.precision is {}, but chosen.memory.precision is {}",
                                m.precision, c.memory.precision));
  }
  const std::string r = plan_.options.recompute.value_or("none");
  if (r != "auto" && r != c.recompute) {
    fail("summary",
         fmt::format("options.recompute is {}, but chosen.recompute is {}", r, c.recompute));
  }
  int layers = 0;
  for (const PlanStage& s : plan_.stages) layers += s.recomputed_layers.value_or(0);
  if (layers != c.recomputed_layers) {
    fail("summary", fmt::format("chosen.recomputed_layers is {}; the stages recompute {}",
                                c.recomputed_layers, layers));
  }
}

void Validator::check_chosen_family() {
  const PlanPartition& p = plan_.partition;
  if (p.families.empty()) return;
  const auto chosen = std::count_if(p.families.begin(), p.families.end(),
                                    [](const FamilyOutcome& f) { return f.chosen; });
  if (chosen != 1) {
    fail("summary", fmt::format("partition.families marks {} families chosen; one was", chosen));
    return;
  }
  const FamilyOutcome& f =
      *std::find_if(p.families.begin(), p.families.end(), [](auto& x) { return x.chosen; });
  if (p.family && f.family != *p.family) {
    fail("summary", fmt::format("partition.families marks \"{}\" chosen; partition.family is "
                                "\"{}\"",
                                f.family, *p.family));
  }
  if (!predicted_right_) return;  // unknown, or wrong: these would differ as an echo
  if ((f.iteration_s && !close(*f.iteration_s, plan_.predicted.iteration_s)) ||
      (f.samples_per_s && !same_rate(*f.samples_per_s, plan_.predicted.samples_per_s)) ||
      (f.p2p_bytes_per_iteration &&
       *f.p2p_bytes_per_iteration != plan_.comm.p2p_bytes_per_iteration)) {
    fail("summary", fmt::format("the chosen family \"{}\" says {:.9f} s, {} samples/s and {} "
                                "bytes; the plan predicts {:.9f} s, {} samples/s and {} bytes",
                                f.family, f.iteration_s.value_or(0), f.samples_per_s.value_or(0),
                                f.p2p_bytes_per_iteration.value_or(0), plan_.predicted.iteration_s,
                                plan_.predicted.samples_per_s, plan_.comm.p2p_bytes_per_iteration));
  }
}

void Validator::check_chosen_candidate() {
  const auto& search = plan_.search;
  if (search.empty()) return;
  const auto chosen =
      std::count_if(search.begin(), search.end(), [](const Candidate& c) { return c.chosen; });
  if (chosen != 1) {
    fail("summary", fmt::format("search marks {} configurations chosen; one was", chosen));
    return;
  }
  const Candidate& c =
      *std::find_if(search.begin(), search.end(), [](auto& x) { return x.chosen; });
  const PlanParallelism& x = plan_.parallelism;
  if (c.pp != x.pp || c.dp != x.dp || c.microbatch_size != x.microbatch_size ||
      c.num_microbatches != x.num_microbatches) {
    fail("summary", fmt::format("search's chosen configuration is pp {} x dp {}, microbatch {} x "
                                "{}; the plan's is pp {} x dp {}, microbatch {} x {}",
                                c.pp, c.dp, c.microbatch_size, c.num_microbatches, x.pp, x.dp,
                                x.microbatch_size, x.num_microbatches));
  }
  // Its iteration is the plan's (its peak is the search's measure, which a memory-saving
  // final schedule may lower: not compared).
  if (!predicted_right_) return;
  if (c.iteration_s && !close(*c.iteration_s, plan_.predicted.iteration_s)) {
    fail("summary", fmt::format("search's chosen configuration says {:.9f} s; the plan predicts "
                                "{:.9f} s",
                                *c.iteration_s, plan_.predicted.iteration_s));
  }
}

// The in-flight limit of each device, from the memory rule (cost/memory.hpp) on the rebuilt
// pipeline model: what a runtime may admit whatever the order of ops.
void Validator::check_inflight_limits() {
  if (count_.count("memory")) return;  // an edited memory model: the limits differ as an echo
  const auto statics = static_memory(pm_, plan_.memory(), plan_.parallelism.dp);
  std::vector<std::int64_t> totals;
  for (const MemoryBreakdown& m : statics) totals.push_back(m.total());
  const std::vector<int> limits =
      memory_inflight_limits(pm_, totals, cluster_.usable_memory(),
                             std::vector<int>(plan_.pp(), plan_.parallelism.num_microbatches));
  for (const PlanDevice& d : plan_.devices) {
    if (d.inflight_limit && *d.inflight_limit != limits[d.device]) {
      fail("memory", fmt::format("device {}: inflight_limit is {}; the memory rule gives {}",
                                 d.device, *d.inflight_limit, limits[d.device]));
    }
  }
}

// The link classes a transfer says it crosses, each direction, against the cluster's classes
// between the devices' ranks (pipeline 0's).
void Validator::check_transfer_links(const std::string& name, const Transfer& t,
                                     const PlanTransfer& c) {
  const DeviceId a = pm_.layout.device[t.from], b = pm_.layout.device[t.to];
  for (const auto& [claimed, from, to, way] :
       {std::tuple{c.forward_link, a, b, "forward"}, {c.backward_link, b, a, "backward"}}) {
    const std::string& actual = pm_.links[from][to].name;
    if (claimed && *claimed != actual) {
      fail("transfers", fmt::format("{} crosses link class \"{}\" {} (device {} -> {}); the plan "
                                    "says \"{}\"",
                                    name, actual, way, from, to, *claimed));
    }
  }
}

// The cluster settings the plan's figures assume (cost_model) are the cluster's.
void Validator::check_cost_model() {
  if (!plan_.cost_model) return;
  const PlanCostModel& c = *plan_.cost_model;
  if (c.overlap_comm != cluster_.overlap_comm || c.allreduce != cluster_.allreduce) {
    fail("inputs", fmt::format("cost_model says overlap_comm {} and a {} all-reduce; cluster {} "
                               "has overlap_comm {} and a {} all-reduce",
                               c.overlap_comm, c.allreduce, cluster_.name, cluster_.overlap_comm,
                               cluster_.allreduce));
  }
  if (c.time_quantum_s && *c.time_quantum_s != kTimeQuantum_s) {
    fail("inputs", fmt::format("cost_model.time_quantum_s is {:g}; plans state times to {:g} s",
                               *c.time_quantum_s, kTimeQuantum_s));
  }
}

}  // namespace pulse::detail
