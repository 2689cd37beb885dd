// The driver: compile_plan, and the pass list every configuration goes through. Each pass
// is one commented line of compile_family, timed under the name --stats prints.

#include "pulse/compile/compile.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "compile_internal.hpp"
#include "pulse/base/limits.hpp"
#include "pulse/base/units.hpp"
#include "pulse/cost/cost_model.hpp"
#include "pulse/schedule/list_schedule.hpp"
#include "pulse/simulate/evaluate.hpp"

namespace pulse {

void PassClock::lap(const std::string& pass) {
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  for (PassTime& t : times_) {
    if (t.pass == pass) {
      t.seconds += s;
      t.longest_s = std::max(t.longest_s, s);
      ++t.runs;
      return;
    }
  }
  times_.push_back({pass, s, s, 1});
}

namespace detail {

namespace {

// Screening effort: a short policy search, no integer program. Bounded by its work count
// alone, like the full synthesis: the wall clock decides nothing (issue 16).
constexpr int kScreenEvaluations = 24;
// Points of the memory curve the plan reports: 3/4, 1/2 and 1/3 of the peak.
constexpr int kMemoryCurvePoints = 3;

// What the passes of one family share besides the plan they fill.
struct PassState {
  const Family* family = nullptr;
  const LayerGraph* graph = nullptr;        // the model's layers at this microbatch size
  const LayerGraph* partitioned = nullptr;  // what the partitioner sees
  PartitionRequest request;                 // partition: everything but the links
  std::vector<int> wanted;                  // in-flight counts the schedule wants
};

std::string shortfall_message(const CompileInputs& in, const Config& c, const Family& f,
                              const std::optional<MemoryShortfall>& shortfall) {
  const ModelProfile& model = *in.model;
  const ClusterProfile& cluster = *in.cluster;
  if (!shortfall) {
    return fmt::format("{} cannot be cut into {} stages for pp {} ({})", model.name,
                       f.num_stages(c.pp), c.pp, f.name);
  }
  const MemoryShortfall& s = *shortfall;
  return fmt::format(
      "{} does not fit {} at pp {} (dp {}, microbatch size {}): even the most memory-frugal "
      "partition, with one microbatch in flight, needs {} on pipeline device {}, {} more than "
      "the {} usable per device ({} minus {} reserved)",
      model.name, cluster.name, c.pp, c.dp, c.microbatch_size, format_bytes(s.needed_bytes),
      s.device, format_bytes(s.needed_bytes - s.capacity_bytes), format_bytes(s.capacity_bytes),
      format_bytes(cluster.memory_bytes), format_bytes(cluster.reserved_bytes));
}

const LayerGraph& cached_graph(const CompileInputs& in, int microbatch_size, bool blind) {
  auto& graphs = blind ? in.cache->blind_graphs : in.cache->graphs;
  auto it = graphs.find(microbatch_size);
  if (it != graphs.end()) return it->second;
  ModelProfile model = *in.model;
  if (blind) model.skips.clear();
  return graphs.emplace(microbatch_size, LayerGraph::build(model, in.device_type, microbatch_size))
      .first->second;
}

// Placement for pp x dp with boundaries weighed by `r` (empty: equally), computed once.
const Placement& cached_placement(const CompileInputs& in, const PlacementRequest& r) {
  std::vector<std::int64_t> key{r.pp, r.dp};
  key.insert(key.end(), r.boundary_bytes.begin(), r.boundary_bytes.end());
  key.insert(key.end(), r.boundary_messages.begin(), r.boundary_messages.end());
  auto it = in.cache->placements.find(key);
  if (it == in.cache->placements.end()) {
    it = in.cache->placements.emplace(key, place_pipelines(r)).first;
  }
  return it->second;
}

// The graph pass: the layers at this microbatch size on this device type, and the graph the
// partitioner sees (a family blind to skips partitions the same layers without them).
void graph_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassState& st) {
  st.graph = &cached_graph(in, c.microbatch_size, false);
  st.partitioned = st.family->skips == SkipTreatment::blind
                       ? &cached_graph(in, c.microbatch_size, true)
                       : st.graph;
  plan.skips_nested = st.graph->skips_nested();
}

// The partition request of this configuration (its links come from the placement), and
// the in-flight counts the schedule will want: GPipe holds every microbatch, the others
// about one per stage between a device's first stage and the end.
void prepare_partition(const CompileInputs& in, const Config& c, PassState& st) {
  const Family& f = *st.family;
  PartitionRequest& r = st.request;
  r.graph = st.partitioned;
  r.pp = c.pp;
  r.waves = std::max(1, f.waves);
  r.overlap_comm = in.cluster->overlap_comm;
  r.memory_capacity = in.cluster->usable_memory();
  r.memory = in.options->memory;
  r.dp = c.dp;
  r.routing = f.routing;
  const std::vector<LayerId> cuts(f.num_stages(c.pp) + 1, 0);
  const StageLayout shape =
      f.chain() ? sequential_layout(cuts, c.pp) : wave_layout(cuts, c.pp, f.waves);
  st.wanted = f.schedule == ScheduleFamily::gpipe ? std::vector<int>(c.pp, c.num_microbatches)
                                                  : default_inflight(shape, c.num_microbatches);
}

// One partition of the family's shape: the chain DP, or the V DP over its levels.
PartitionAnswer partition_once(const Family& f, const PartitionRequest& request) {
  if (f.chain()) return partition_sequential(request);
  if (f.skips == SkipTreatment::local_first) {
    PartitionAnswer local = partition_v(request, SkipPolicy::local_only);
    if (local.found()) return local;
  }
  return partition_v(request, SkipPolicy::allow_nonlocal);
}

// The partition pass on the links of the current placement: with the in-flight counts the
// schedule wants, else (memory) with one microbatch in flight per device.
Status partition_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan,
                      PassState& st) {
  PartitionRequest request = st.request;
  request.links = pipeline_links(*in.cluster, plan.placement.ranks[0]);
  PartitionAnswer answer;
  for (const bool full : {true, false}) {
    request.inflight = full ? st.wanted : std::vector<int>(c.pp, 1);
    if (auto valid = validate_request(request); !valid) return valid.error();
    answer = partition_once(*st.family, request);
    if (answer.found()) {
      plan.partition = std::move(answer.result);
      return Ok{};
    }
  }
  return infeasible_error(shortfall_message(in, c, *st.family, answer.shortfall));
}

// The pipeline model pass: stage costs, transfers and where every skip lives, on the links
// of the placement, times rounded to the plan's quantum (so a plan read back replays to its
// own figures). A partitioner blind to skips could not say whether they ended up local;
// the model can.
void pipeline_model_pass(const CompileInputs& in, CompiledPlan& plan, const PassState& st) {
  const PipelineLinks links = pipeline_links(*in.cluster, plan.placement.ranks[0]);
  plan.model = build_pipeline_model(*st.graph, plan.partition.layout, st.family->routing, links,
                                    in.cluster->overlap_comm);
  round_to_quantum(plan.model);
  if (st.family->skips == SkipTreatment::blind) {
    plan.partition.all_skips_local = std::all_of(plan.model.skips.begin(), plan.model.skips.end(),
                                                 [](const SkipPlacement& s) { return s.local; });
  }
}

// Bytes and messages per microbatch crossing each boundary between neighbouring pipeline
// devices (both directions), what placement weighs links by.
void boundary_traffic(const PipelineModel& m, PlacementRequest& r) {
  r.boundary_bytes.assign(std::max(0, m.num_devices() - 1), 0);
  r.boundary_messages.assign(r.boundary_bytes.size(), 0);
  for (const Transfer& t : m.transfers) {
    const DeviceId a = m.layout.device[t.from], b = m.layout.device[t.to];
    if (std::abs(a - b) != 1) continue;
    const int boundary = std::min(a, b);
    r.boundary_bytes[boundary] += t.forward.total() + t.backward.total();
    r.boundary_messages[boundary] += t.forward_messages + t.backward_messages;
  }
}

// The re-place pass: placement again, each boundary weighed by the traffic the partition
// moves across it; if that changes the ranks, the cuts may shift on the new links, so
// partition and model again.
Status replace_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan,
                    PassState& st) {
  if (plan.placement.topology_aware) {
    PlacementRequest where{in.cluster, c.pp, c.dp, {}, {}};
    boundary_traffic(plan.model, where);
    const Placement& weighed = cached_placement(in, where);
    if (weighed.ranks != plan.placement.ranks) {
      plan.placement = weighed;
      if (auto cut = partition_pass(in, c, plan, st); !cut) return cut.error();
      pipeline_model_pass(in, plan, st);
    }
  }
  plan.ranks = plan.placement.ranks;
  return Ok{};
}

// The memory limits pass: each device's static state, and how many microbatches it can
// hold in flight whatever the order of its ops (cost/memory.hpp).
void memory_limits_pass(const CompileInputs& in, CompiledPlan& plan) {
  plan.static_bytes = static_memory(plan.model, in.options->memory, plan.dp);
  std::vector<std::int64_t> static_totals;
  for (const MemoryBreakdown& m : plan.static_bytes) static_totals.push_back(m.total());
  plan.inflight_limit =
      memory_inflight_limits(plan.model, static_totals, in.cluster->usable_memory(),
                             std::vector<int>(plan.pp, plan.num_microbatches));
}

// The activation budget in bytes per device (0: none): as given, or a fraction of the
// device's usable memory.
std::int64_t activation_budget(const PlanOptions& o, const ClusterProfile& cluster) {
  if (o.activation_budget_fraction) {
    const double bytes = *o.activation_budget_fraction * static_cast<double>(cluster.usable_memory());
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes));
  }
  return o.activation_budget_bytes.value_or(0);
}

// What the synthesizer is asked for `plan` at `effort`.
ScheduleRequest schedule_request(const CompileInputs& in, const CompiledPlan& plan,
                                 Effort effort) {
  ScheduleRequest request;
  request.model = &plan.model;
  request.num_microbatches = plan.num_microbatches;
  request.static_bytes = plan.static_bytes;
  request.memory_capacity = in.cluster->usable_memory();
  request.split_backward = in.options->split_backward;
  request.family = plan.family->schedule;
  request.activation_budget = activation_budget(*in.options, *in.cluster);
  request.allreduce_s = allreduce_times(plan.model, plan.ranks, in.options->memory, *in.cluster);
  request.max_nodes = in.options->solver_max_nodes;
  request.max_seconds = in.options->solver_max_seconds;
  // The memory curve is drawn once, for the plan kept (memory_pass_after_choice).
  request.memory_curve_points = 0;
  // The exact integer program (tiny instances: small M) only where the user fixed the
  // configuration: in a search over many, each tiny candidate would cost up to a second of
  // CBC nodes for a configuration that seldom wins. The rule depends on the options alone,
  // so pulse and the baselines it compares itself with are held to the same one.
  if (!in.options->pp || !in.options->microbatch_size) request.exact_max_ops = 0;
  if (effort == Effort::screen) {
    request.max_evaluations = kScreenEvaluations;
    request.max_order_evaluations = 0;
    request.exact_max_ops = 0;
  }
  return request;
}

// Counts a synthesis the wall-clock safety limit stopped (not one already counted; not a
// limit of 0, which asks for the list schedule alone).
void note_safety_limit(const CompileInputs& in, bool counted, const ScheduleAnswer& answer) {
  if (!counted && answer.status == SolveStatus::time_limit && in.options->solver_max_seconds > 0) {
    ++in.cache->safety_limit_hits;
  }
}

// The schedule pass: the synthesizer (list schedules, searches, integer programs), or the
// baseline's own schedule.
Status schedule_pass(const ScheduleRequest& request, CompiledPlan& plan) {
  auto answer = synthesize_schedule(request);
  if (!answer) return answer.error();
  plan.schedule = std::move(answer->schedule);
  plan.timeline = std::move(answer->timeline);
  plan.solver = std::move(*answer);
  return Ok{};
}

// Starts a plan for configuration `c` and family `f`.
CompiledPlan start_plan(const CompileInputs& in, const Config& c, const Family& f) {
  CompiledPlan plan;
  static_cast<Degrees&>(plan) = c;
  plan.options = *in.options;
  plan.strategy = in.options->strategy;
  plan.device_type = in.device_type;
  plan.family = &f;
  return plan;
}

// The passes of one family, after the graph, up to the pipeline model (re-placed): enough to
// know its lower bound before scheduling it.
Status cut_and_place(const CompileInputs& in, const Config& c, CompiledPlan& plan,
                     PassState& st, PassClock& clock) {
  // Ranks for every pipeline, the boundaries weighed equally.
  plan.placement = cached_placement(in, {in.cluster, c.pp, c.dp, {}, {}});
  clock.lap("place");
  // Cut the layers into the family's stages (the V, waves or a chain) on those ranks' links.
  prepare_partition(in, c, st);
  if (auto cut = partition_pass(in, c, plan, st); !cut) return cut.error();
  clock.lap("partition");
  // Stage costs, transfers and skip placements, times on the quantum.
  pipeline_model_pass(in, plan, st);
  clock.lap("pipeline model");
  // Ranks again, weighed by the bytes each boundary moves; the cuts follow new links.
  if (auto placed = replace_pass(in, c, plan, st); !placed) return placed.error();
  clock.lap("re-place");
  return Ok{};
}

// The passes after the pipeline model: memory limits, schedule, evaluate.
Status schedule_and_evaluate(const CompileInputs& in, CompiledPlan& plan, Effort effort,
                             PassClock& clock) {
  // Static state and the in-flight counts memory allows, per device.
  memory_limits_pass(in, plan);
  clock.lap("memory limits");
  // The order of operations on every device.
  const ScheduleRequest request = schedule_request(in, plan, effort);
  if (auto scheduled = schedule_pass(request, plan); !scheduled) return scheduled.error();
  note_safety_limit(in, false, plan.solver);
  clock.lap("schedule");
  // The data-parallel all-reduce (the request's times), iteration time, throughput, bubble.
  plan.evaluation = evaluate(plan.model, plan.timeline, request.allreduce_s, plan.global_batch,
                             in.options->memory);
  clock.lap("evaluate");
  return Ok{};
}

}  // namespace

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

double iteration_lower_bound(const CompileInputs& in, const CompiledPlan& plan) {
  const PipelineModel& m = plan.model;
  const int S = m.layout.num_stages(), P = m.num_devices();
  const int M = plan.num_microbatches;
  // Main-path hand-overs: a local one costs nothing, a transfer its time; where neither
  // links stage s to s + 1 the dependency chain is broken there.
  std::vector<std::optional<const Transfer*>> hop(std::max(0, S - 1));
  for (StageId s = 0; s + 1 < S; ++s) {
    if (m.layout.device[s] == m.layout.device[s + 1]) hop[s] = nullptr;
  }
  for (const Transfer& t : m.transfers) {
    if (t.to == t.from + 1 && !hop[t.from]) hop[t.from] = &t;
  }
  // The forward (backward) chain from stage 0 up to `s`: microbatch 0 cannot reach stage s
  // sooner, and stage 0's backward cannot end sooner after stage s's.
  auto chain = [&](StageId s, bool forward) {
    double sum = 0;
    for (StageId k = s - 1; k >= 0 && hop[k]; --k) {
      const Transfer* t = *hop[k];
      sum += (forward ? m.stages[k].forward_s : m.stages[k].backward_s) +
             (t ? (forward ? t->forward_s : t->backward_s) : 0.0);
    }
    return sum;
  };
  std::vector<double> busy(P, 0.0);
  std::vector<StageId> first(P, S);
  for (StageId s = 0; s < S; ++s) {
    const DeviceId d = m.layout.device[s];
    busy[d] += m.stages[s].forward_s + m.stages[s].backward_s;
    first[d] = std::min(first[d], s);
  }
  if (!m.overlap_comm) {
    for (const Transfer& t : m.transfers) {
      busy[m.layout.device[t.from]] += t.forward_s;
      busy[m.layout.device[t.to]] += t.backward_s;
    }
  }
  const std::vector<double> allreduce =
      allreduce_times(m, plan.ranks, in.options->memory, *in.cluster);
  double bound = 0;
  for (DeviceId d = 0; d < P; ++d) {
    if (first[d] == S) continue;
    // Device d starts no sooner than microbatch 0 reaches its first stage, then works
    // through all of its ops; its all-reduce follows its last op.
    const double last_op_end = chain(first[d], true) + M * busy[d];
    bound = std::max(bound, last_op_end + allreduce[d]);
    // Without a split backward every op of a microbatch on d precedes that microbatch's
    // backward on d's first stage, so d's last op is such a backward, and the backwards
    // of the stages before it follow.
    if (!in.options->split_backward) {
      bound = std::max(bound, last_op_end + chain(first[d], false));
    }
  }
  return bound;
}

const Result<CompiledPlan>& placed_family(const CompileInputs& in, const Config& c,
                                          const Family& f, PassClock& clock) {
  const auto key = std::tuple{c.pp, c.dp, c.microbatch_size, std::string(f.name), 0};
  if (auto it = in.cache->plans.find(key); it != in.cache->plans.end()) return it->second;
  if (static_cast<int>(in.model->layers.size()) < f.num_stages(c.pp)) {
    return in.cache->plans
        .emplace(key, usage_error(fmt::format("{} needs {} layers ({} stages at pp {}); model {} "
                                              "has {}",
                                              f.name, f.num_stages(c.pp), f.num_stages(c.pp),
                                              c.pp, in.model->name, in.model->layers.size())))
        .first->second;
  }
  CompiledPlan plan = start_plan(in, c, f);
  PassState st;
  st.family = &f;
  // The layer graph at this microbatch size on this device type.
  graph_pass(in, c, plan, st);
  clock.lap("graph");
  Result<CompiledPlan> result = plan;
  if (Status placed = cut_and_place(in, c, plan, st, clock); !placed) {
    result = placed.error();
  } else {
    result = std::move(plan);
  }
  return in.cache->plans.emplace(key, std::move(result)).first->second;
}

const Result<CompiledPlan>& compile_family(const CompileInputs& in, const Config& c,
                                           const Family& f, Effort effort, PassClock& clock) {
  // A family with a fixed schedule has one: its full synthesis is its screen.
  const bool full = effort == Effort::full && f.schedule == ScheduleFamily::synthesized;
  const auto key = std::tuple{c.pp, c.dp, c.microbatch_size, std::string(f.name), full ? 2 : 1};
  if (auto it = in.cache->plans.find(key); it != in.cache->plans.end()) return it->second;
  const Result<CompiledPlan>& placed = placed_family(in, c, f, clock);
  Result<CompiledPlan> result = placed;
  if (placed) {
    CompiledPlan plan = *placed;
    if (auto done = schedule_and_evaluate(in, plan, full ? Effort::full : Effort::screen, clock);
        !done) {
      result = done.error();
    } else {
      result = std::move(plan);
    }
  }
  return in.cache->plans.emplace(key, std::move(result)).first->second;
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
  for (Strategy s : {Strategy::v_naive, Strategy::one_f_one_b, Strategy::one_f_one_b_direct,
                     Strategy::gpipe}) {
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
  if (in.options->family && own) best = std::move(*own);  // the family the user asked for
  best->options = *in.options;  // a baseline's plan adopted by pulse is pulse's answer
  best->strategy = Strategy::pulse;
  best->baselines = std::move(answers);
  return std::move(*best);
}

Result<Config> resolve_config(const CompileInputs& in, int pp, int dp, int microbatch_size) {
  const ModelProfile& model = *in.model;
  const ClusterProfile& cluster = *in.cluster;
  const PlanOptions& options = *in.options;
  Config c;
  const int devices = cluster.num_devices();
  c.pp = pp;
  c.dp = dp;
  c.microbatch_size = microbatch_size;
  c.global_batch = options.global_batch.value_or(kDefaultSamplesPerDevice * devices);
  const int layers = static_cast<int>(model.layers.size());
  int least = 0;
  for (const Family* f : searched_families(options)) {
    least = least == 0 ? f->num_stages(pp) : std::min(least, f->num_stages(pp));
  }
  if (!options.dp && pp > devices) {
    return usage_error(
        fmt::format("--pp {} needs {} devices; cluster {} has {}", pp, pp, cluster.name, devices));
  }
  if (pp < 1 || dp < 1 || static_cast<long>(pp) * dp > devices) {
    return usage_error(fmt::format("--pp {} x --dp {} needs {} devices; cluster {} has {}", pp, dp,
                                   static_cast<long>(pp) * dp, cluster.name, devices));
  }
  if (layers < least) {
    return usage_error(fmt::format(
        "--pp {} with strategy {} needs at least {} layers ({} stages "
        "of one layer or more); model {} has {}",
        pp, strategy_name(options.strategy), least, least, model.name, layers));
  }
  const long per_step = static_cast<long>(dp) * microbatch_size;
  if (c.global_batch % per_step != 0) {
    return usage_error(
        fmt::format("global batch {} is not divisible by dp {} x microbatch size "
                    "{} = {}",
                    c.global_batch, dp, microbatch_size, per_step));
  }
  if (c.global_batch / per_step > kMaxMicrobatches) {
    return usage_error(fmt::format(
        "global batch {} at dp {} x microbatch size {} is {} microbatches per pipeline, above "
        "pulse-plan's limit of {} (use a larger microbatch size or a smaller global batch)",
        c.global_batch, dp, microbatch_size, c.global_batch / per_step, kMaxMicrobatches));
  }
  c.num_microbatches = static_cast<int>(c.global_batch / per_step);
  return c;
}

// The plan kept: of its schedules equally fast, the one holding least (the second
// objective), and the memory curve, what smaller activation budgets would cost. Run once,
// after the choice, not on every candidate the search synthesizes; times never change.
Status memory_pass_after_choice(const CompileInputs& in, CompiledPlan& plan, PassClock& clock) {
  if (plan.family->schedule != ScheduleFamily::synthesized) return Ok{};
  ScheduleRequest request = schedule_request(in, plan, Effort::full);
  request.memory_curve_points = kMemoryCurvePoints;
  plan.solver.schedule = std::move(plan.schedule);
  plan.solver.timeline = std::move(plan.timeline);
  const bool stopped_before = plan.solver.status == SolveStatus::time_limit;
  if (auto trimmed = trim_memory(request, plan.solver); !trimmed) return trimmed.error();
  note_safety_limit(in, stopped_before, plan.solver);
  plan.schedule = plan.solver.schedule;
  plan.timeline = plan.solver.timeline;
  plan.evaluation = evaluate(plan.model, plan.timeline, request.allreduce_s, plan.global_batch,
                             in.options->memory);
  clock.lap("memory curve");
  return Ok{};
}

}  // namespace detail

namespace {

// The request's worst case, before any pass runs (see pulse/base/limits.hpp). Every byte a
// pass adds up is bounded by B = S x G x (L + 1) + P x (bytes of state per parameter): S the
// bytes per sample of all layers, skips and carried tensors together, G the global batch
// (a pipeline holds or sends at most G samples' worth per boundary), L + 1 the boundaries a
// tensor may cross, P the parameters. Every second, by the same count of compute per sample
// (the profile's times over their microbatch sizes, which interpolation never exceeds),
// transfers at the slowest link and a ring all-reduce of every gradient. Computed in long
// double, where neither can overflow; beyond the limits the request is refused, so the
// passes' 64-bit sums cannot overflow and their times stay finite.
Status validate_request(const ModelProfile& model, const ClusterProfile& cluster,
                        const PlanOptions& options, int device_type) {
  const long double G = options.global_batch.value_or(kDefaultSamplesPerDevice * cluster.num_devices());
  if (G > kMaxGlobalBatch) {
    return usage_error(fmt::format("--global-batch {} is above pulse-plan's limit of {} samples",
                                   static_cast<long long>(G), kMaxGlobalBatch));
  }
  if (!std::isfinite(options.solver_max_seconds) || options.solver_max_seconds > kMaxSolverSeconds) {
    return usage_error(fmt::format("--solver-time-limit must be a number of seconds from 0 to {}, "
                                   "got {}",
                                   kMaxSolverSeconds, options.solver_max_seconds));
  }
  if (options.dp && *options.dp > cluster.num_devices()) {
    return usage_error(fmt::format("--dp {} needs at least {} devices; cluster {} has {}",
                                   *options.dp, *options.dp, cluster.name, cluster.num_devices()));
  }
  if (options.pp && *options.pp > kMaxPipelineDegree) {
    return usage_error(fmt::format("--pp {} is above pulse-plan's limit of {}", *options.pp,
                                   kMaxPipelineDegree));
  }
  // Plans state times in whole nanoseconds. A layer's forward time at any microbatch size
  // is at least the smaller of its per-sample time at the smallest profiled size and its
  // smallest profiled time (interpolate_time); the stage holding the slowest such layer then
  // takes at least 1 ns, so no iteration is 0 s long (nor its throughput infinite).
  const Layer* slowest_layer = nullptr;
  double slowest_forward = -1;
  for (const Layer& l : model.layers) {
    const std::vector<double>& times = l.forward_s.at(device_type);
    double least = times.front() / model.microbatch_sizes.front();
    for (double t : times) least = std::min(least, t);
    if (least > slowest_forward) {
      slowest_forward = least;
      slowest_layer = &l;
    }
  }
  static_assert(kMinSlowestLayerSeconds == kTimeQuantum_s);
  if (slowest_layer && slowest_forward < kMinSlowestLayerSeconds) {
    return input_error(fmt::format(
        "{}: no layer of model {} takes 1 ns forward on {} (the slowest, \"{}\", may take as "
        "little as {:.3g} s); plans state times in whole nanoseconds, so every stage would take "
        "0 s. Are the times in seconds?",
        model.file.path, model.name, cluster.device_type, slowest_layer->name, slowest_forward));
  }
  long double per_sample = 0, params = 0, seconds_per_sample = 0;
  auto most_per_sample = [&](const std::vector<double>& times) {
    long double most = 0;
    for (std::size_t i = 0; i < times.size() && i < model.microbatch_sizes.size(); ++i) {
      most = std::max(most, static_cast<long double>(times[i]) / model.microbatch_sizes[i]);
    }
    return most;
  };
  for (const Layer& l : model.layers) {
    per_sample += static_cast<long double>(l.activation_bytes_per_sample) + l.output_bytes_per_sample;
    params += l.params;
    seconds_per_sample += most_per_sample(l.forward_s.at(device_type)) +
                          most_per_sample(l.backward_s.at(device_type));
  }
  for (const Skip& k : model.skips) per_sample += k.bytes_per_sample;
  for (const Carried& c : model.carried) per_sample += c.bytes_per_sample;
  const long double boundaries = static_cast<long double>(model.layers.size()) + 1;
  const MemoryModel& mem = options.memory;
  const long double state_per_param = static_cast<long double>(mem.weight_bytes_per_param) +
                                      mem.gradient_bytes_per_param +
                                      mem.optimizer_bytes_per_param;
  const long double bytes = per_sample * G * boundaries + params * state_per_param;
  if (bytes > kMaxRequestBytes) {
    return input_error(fmt::format(
        "{}: {} at a global batch of {} could hold or send up to {:.3g} bytes in one iteration "
        "({} per sample across {} layers, {:.3g} parameters), above the {:.3g} pulse-plan counts "
        "in 64-bit integers (see docs/limits.md)",
        model.file.path, model.name, static_cast<long long>(G), static_cast<double>(bytes),
        format_bytes(static_cast<std::int64_t>(per_sample)), model.layers.size(),
        static_cast<double>(params), static_cast<double>(kMaxRequestBytes)));
  }
  long double slowest = std::numeric_limits<double>::max(), latency = 0;
  for (const LinkClass& l : cluster.link_classes) {
    slowest = std::min<long double>(slowest, l.bandwidth_bytes_per_s);
    latency = std::max<long double>(latency, l.latency_s);
  }
  const long double seconds = seconds_per_sample * G +
                              (per_sample * G / slowest + latency * G) * boundaries +
                              2 * params * mem.gradient_bytes_per_param / slowest +
                              2 * latency * cluster.num_devices();
  if (!(seconds <= kMaxRequestSeconds)) {
    return input_error(fmt::format(
        "{} on {} at a global batch of {} could take up to {:.3g} s an iteration (compute {:.3g} "
        "s per sample; slowest link {:.3g} B/s), above the {:.3g} s pulse-plan plans for (see "
        "docs/limits.md)",
        model.name, cluster.name, static_cast<long long>(G), static_cast<double>(seconds),
        static_cast<double>(seconds_per_sample), static_cast<double>(slowest),
        kMaxRequestSeconds));
  }
  return Ok{};
}

// The options against the profiles, before any pass runs.
Result<int> validate_options(const ModelProfile& model, const ClusterProfile& cluster,
                             const PlanOptions& options) {
  const int device_type = model.device_type_index(cluster.device_type);
  if (device_type < 0) {
    std::string known;
    for (const auto& t : model.device_types) known += (known.empty() ? "" : ", ") + t;
    return input_error(
        fmt::format("{}: model profile has times for device types [{}], but "
                    "cluster profile {} has devices of type \"{}\"",
                    model.file.path, known, cluster.file.path, cluster.device_type));
  }
  if (options.microbatch_size && *options.microbatch_size < 1) {
    return usage_error("--microbatch-size must be at least 1");
  }
  if (options.family && options.strategy != Strategy::pulse) {
    return usage_error(fmt::format("--family applies to strategy pulse, not {}",
                                   strategy_name(options.strategy)));
  }
  if (options.family && detail::searched_families(options).empty()) {
    std::string names;
    for (const Family& f : families(options.strategy)) {
      names += (names.empty() ? "" : ", ") + std::string(f.name);
    }
    return usage_error(fmt::format("--family {} is not a family of strategy {} (families: {})",
                                   *options.family, strategy_name(options.strategy), names));
  }
  if (auto within = validate_request(model, cluster, options, device_type); !within) {
    return within.error();
  }
  return device_type;
}

}  // namespace

Result<CompiledPlan> compile_plan(const ModelProfile& model, const ClusterProfile& cluster,
                                  const PlanOptions& options, PassClock* clock) {
  PassClock own_clock;
  PassClock& timer = clock ? *clock : own_clock;
  auto device_type = validate_options(model, cluster, options);
  if (!device_type) return device_type.error();
  detail::CompileCache cache;
  const detail::CompileInputs in{&model, &cluster, &options, *device_type, &cache};
  Result<CompiledPlan> plan = Error{};
  if (options.pp && options.microbatch_size) {
    // Everything fixed: one configuration, its errors as they are.
    const int dp = options.dp.value_or(std::max(1, cluster.num_devices() / *options.pp));
    auto config = detail::resolve_config(in, *options.pp, dp, *options.microbatch_size);
    if (!config) return config.error();
  }
  plan = detail::tune(in, timer);
  if (options.strategy == Strategy::pulse) {
    plan = detail::against_baselines(in, std::move(plan), timer);
  }
  if (plan) {
    if (auto kept = detail::memory_pass_after_choice(in, *plan, timer); !kept) return kept.error();
    plan->pass_times = timer.times();
    plan->safety_limit_hits = cache.safety_limit_hits;
  }
  return plan;
}

}  // namespace pulse
