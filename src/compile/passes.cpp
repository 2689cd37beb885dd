// The passes of one configuration and one family (passes.hpp), and what they share.

#include "passes.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "pulse/base/units.hpp"
#include "pulse/cost/cost_model.hpp"
#include "pulse/schedule/list_schedule.hpp"
#include "pulse/simulate/evaluate.hpp"

namespace pulse::detail {

namespace {

// Screening effort: a short policy search, no integer program. Bounded by its work count
// alone, like the full synthesis: the clock decides nothing (issue 16).
constexpr int kScreenEvaluations = 24;
// Points of the memory curve the plan reports: 3/4, 1/2 and 1/3 of the peak.
constexpr int kMemoryCurvePoints = 3;

std::string shortfall_message(const CompileInputs& in, const Config& c, const Family& f,
                              const std::optional<MemoryShortfall>& shortfall) {
  const ModelProfile& model = *in.model;
  const ClusterProfile& cluster = *in.cluster;
  if (!shortfall) {
    return fmt::format("{} cannot be cut into {} stages for pp {} ({})", model.name,
                       f.num_stages(c.pp), c.pp, f.name);
  }
  const MemoryShortfall& s = *shortfall;
  // The cluster here has its usable memory capped at the headroom (scale_inputs): say so.
  const double headroom = in.options->headroom_fraction();
  const auto usable = static_cast<std::int64_t>(
      std::llround(static_cast<double>(cluster.usable_memory()) / headroom));
  const std::string capacity =
      headroom == 1
          ? fmt::format("the {} usable per device ({} minus {} reserved)",
                        format_bytes(s.capacity_bytes), format_bytes(cluster.memory_bytes),
                        format_bytes(cluster.reserved_bytes))
          : fmt::format(
                "the {} a device may fill (--headroom {:g} of its {} usable: {} minus "
                "{} reserved)",
                format_bytes(s.capacity_bytes), headroom, format_bytes(usable),
                format_bytes(cluster.memory_bytes), format_bytes(cluster.memory_bytes - usable));
  if (s.weights_alone) {
    return fmt::format(
        "{} does not fit {} at pp {} (dp {}, microbatch size {}): its weights, gradients and "
        "optimizer state alone put at least {} on the fullest pipeline device of any partition, "
        "{} more than {}",
        model.name, cluster.name, c.pp, c.dp, c.microbatch_size, format_bytes(s.needed_bytes),
        format_bytes(s.needed_bytes - s.capacity_bytes), capacity);
  }
  return fmt::format(
      "{} does not fit {} at pp {} (dp {}, microbatch size {}): even the most memory-frugal "
      "partition, with one microbatch in flight, needs {} on pipeline device {}, {} more than "
      "{}",
      model.name, cluster.name, c.pp, c.dp, c.microbatch_size, format_bytes(s.needed_bytes),
      s.device, format_bytes(s.needed_bytes - s.capacity_bytes), capacity);
}

const LayerGraph& cached_graph(const CompileInputs& in, int microbatch_size, bool blind) {
  auto& graphs = blind ? in.cache->blind_graphs : in.cache->graphs;
  // The model planned is the one of the options' recomputation mode (request_limits.cpp).
  const CompileCache::GraphKey key{in.options->recompute, in.options->sequence, microbatch_size};
  auto it = graphs.find(key);
  if (it != graphs.end()) return it->second;
  // Without skips, blindness changes nothing: the same graph (and its cached partitions).
  if (blind && in.model->skips.empty()) return cached_graph(in, microbatch_size, false);
  ModelProfile model = *in.model;
  if (blind) model.skips.clear();
  return graphs.emplace(key, LayerGraph::build(model, in.device_type, microbatch_size))
      .first->second;
}

// Placement for pp x dp with boundaries weighed by `r` (empty: equally), computed once.
const Placement& cached_placement(const CompileInputs& in, const PlacementRequest& r) {
  std::vector<std::int64_t> key{r.pp, r.dp};
  key.insert(key.end(), r.boundary_bytes.begin(), r.boundary_bytes.end());
  key.insert(key.end(), r.boundary_messages.begin(), r.boundary_messages.end());
  // The cluster of sequence groups has its own placements (an odd length: never a plain key).
  if (in.cluster->sequence_degree > 1) key.push_back(in.cluster->sequence_degree);
  auto it = in.cache->placements.find(key);
  if (it == in.cache->placements.end()) {
    it = in.cache->placements.emplace(key, place_pipelines(r)).first;
  }
  return it->second;
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

// Everything a partitioner reads of its request, field by field, after which partitioner
// (0: sequential, 1 + SkipPolicy: V): an answer is a function of these. The graph by its
// address: the job's graphs live in its cache until the job ends. The links by the devices
// they join, `ranks`: the request's are pipeline_links(cluster, ranks) and a job has one
// cluster (at pp 1024 the links are a million classes, too many to copy into each key).
// `shortfall` is left out: cached_partition decides whether an answer without one will do.
std::vector<std::int64_t> partition_key(int partitioner, const PartitionRequest& r,
                                        const std::vector<int>& ranks) {
  std::vector<std::int64_t> k{partitioner,
                              static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(r.graph)),
                              r.pp,
                              r.waves,
                              r.overlap_comm,
                              r.memory_capacity,
                              r.dp,
                              static_cast<std::int64_t>(r.routing),
                              r.exact_transition_budget};
  auto text = [&k](const std::string& s) {
    k.push_back(static_cast<std::int64_t>(s.size()));
    k.insert(k.end(), s.begin(), s.end());
  };
  auto real = [&k](double x) { k.push_back(std::bit_cast<std::int64_t>(x)); };
  const MemoryModel& m = r.memory;
  text(m.precision);
  real(m.weight_bytes_per_param);
  real(m.gradient_bytes_per_param);
  real(m.optimizer_bytes_per_param);
  k.push_back(m.zero_stage);
  k.push_back(m.sequence_degree);
  k.push_back(static_cast<std::int64_t>(r.inflight.size()));
  k.insert(k.end(), r.inflight.begin(), r.inflight.end());
  k.push_back(static_cast<std::int64_t>(ranks.size()));
  k.insert(k.end(), ranks.begin(), ranks.end());
  return k;
}

// One partitioner's answer to `request`, computed once per job. An answer that found no
// partition and skipped its shortfall is computed again when one is asked for.
const PartitionAnswer& cached_partition(const CompileInputs& in, int partitioner,
                                        const PartitionRequest& request,
                                        const std::vector<int>& ranks) {
  auto& answers = in.cache->partitions;
  const std::vector<std::int64_t> key = partition_key(partitioner, request, ranks);
  auto it = answers.find(key);
  if (it != answers.end()) {
    const PartitionAnswer& a = it->second;
    const bool without_shortfall = !a.found() && !a.shortfall && request.shortfall;
    if (!without_shortfall || partitioner == 1 + static_cast<int>(SkipPolicy::local_only)) {
      return a;  // (local_only never states a shortfall)
    }
  }
  PartitionAnswer answer = partitioner == 0
                               ? partition_sequential(request)
                               : partition_v(request, static_cast<SkipPolicy>(partitioner - 1));
  return answers.insert_or_assign(key, std::move(answer)).first->second;
}

// One partition of the family's shape: the chain DP, or the V DP over its levels.
PartitionAnswer partition_once(const CompileInputs& in, const Family& f,
                               const PartitionRequest& request, const std::vector<int>& ranks) {
  if (f.chain()) return cached_partition(in, 0, request, ranks);
  constexpr int kLocal = 1 + static_cast<int>(SkipPolicy::local_only);
  constexpr int kNonlocal = 1 + static_cast<int>(SkipPolicy::allow_nonlocal);
  if (f.skips == SkipTreatment::local_first) {
    const PartitionAnswer& local = cached_partition(in, kLocal, request, ranks);
    if (local.found()) return local;
    // Without skips the two policies run the same search (no locality test binds, no skip
    // is charged): the non-local run would find nothing either, and only its shortfall is
    // news.
    if (request.graph->skip_pairs().empty() && !request.shortfall) return local;
  }
  return cached_partition(in, kNonlocal, request, ranks);
}

// The cut the user gave (--cuts, --partition-from), costed as the partitioners cost theirs:
// the objective is the largest device load; no search, so not exact, and its lower bound
// the plainest one (the compute shared evenly over the devices).
PartitionResult given_partition(const CompileInputs& in, const Config& c, const PassState& st,
                                const PartitionRequest& request) {
  std::map<std::string, LayerId> index;
  for (std::size_t l = 0; l < in.model->layers.size(); ++l) {
    index.emplace(in.model->layers[l].name, static_cast<LayerId>(l));
  }
  std::vector<LayerId> first = {0};
  for (const std::string& name : in.options->cuts) first.push_back(index.at(name));
  first.push_back(static_cast<LayerId>(in.model->layers.size()));
  const Family& f = *st.family;
  PartitionResult r;
  r.layout = f.chain() ? sequential_layout(first, c.pp) : wave_layout(first, c.pp, f.waves);
  const PipelineModel m =
      build_pipeline_model(*st.graph, r.layout, f.routing, request.links, request.overlap_comm);
  r.method = "given";
  r.device_load_s = m.device_load();
  r.objective_s = *std::max_element(r.device_load_s.begin(), r.device_load_s.end());
  double compute = 0;
  for (const StageCost& s : m.stages) compute += s.forward_s + s.backward_s;
  r.lower_bound_s = compute / c.pp;
  r.bytes_per_microbatch = m.bytes_per_microbatch().total();
  r.all_skips_local =
      std::all_of(m.skips.begin(), m.skips.end(), [](const SkipPlacement& s) { return s.local; });
  return r;
}

// Whether a family is GPipe on a chain, whose schedule holds every microbatch in flight on
// every device: where the partitioner finds no partition holding them all, no partition
// passes GPipe's room check either (synthesize.cpp, check_gpipe_room), and the retry with
// one microbatch in flight (cut) only finds a partition that check refuses. Its DP run was
// the largest part of the plans at pp 512 and 1024 (3.3 s at pp 512 over 4096 layers).
// Why: on a chain the partitioner charges each device its weights, gradients and optimizer
// state plus M times its stage's activations and the skips it holds (relayed through or
// ending in it: memory_bound in cost/memory.hpp), which is what memory_inflight_limits
// charges it too (bytes_per_microbatch_at_most: the stage's activations, its local skips,
// and each transfer's skip bytes at both ends), and the room check's static state adds to
// the partitioner's (the workspace) and its budget can only lower the room.
// partition_sequential_test (WhereNothingHoldsEveryMicrobatch...) checks it on random chains.
bool gpipe_holds_none(const Family& f) {
  return f.chain() && f.schedule == ScheduleFamily::gpipe;
}

// What GPipe's room check would say of every partition (gpipe_holds_none).
std::string gpipe_message(const CompileInputs& in, const Config& c, const Family& f) {
  return fmt::format(
      "GPipe keeps all {} microbatches in flight; no partition of {} into {} stage{} holds "
      "them within {} a device (its weights, gradients and optimizer state, and each "
      "microbatch's activations and skip tensors)",
      c.num_microbatches, in.model->name, f.num_stages(c.pp), f.num_stages(c.pp) == 1 ? "" : "s",
      format_bytes(in.cluster->usable_memory()));
}

// The cut on the links of the current placement (the partition pass, and again in re-place).
Status cut(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassState& st) {
  PartitionRequest request = st.request;
  request.links = pipeline_links(*in.cluster, plan.placement.ranks[0]);
  if (!in.options->cuts.empty()) {
    plan.partition = given_partition(in, c, st, request);
    return Ok{};
  }
  // As the schedule wants, else one microbatch in flight; only the last attempt's shortfall
  // is stated.
  const std::vector<int> one(c.pp, 1);
  PartitionAnswer answer;
  for (const bool full : {true, false}) {
    request.inflight = full ? st.wanted : one;
    request.shortfall = !full || st.wanted == one;
    if (auto valid = validate_request(request); !valid) return valid.error();
    if (!full && gpipe_holds_none(*st.family) && sequential_partition_exists(request)) {
      return infeasible_error(gpipe_message(in, c, *st.family));
    }
    answer = partition_once(in, *st.family, request, plan.placement.ranks[0]);
    if (answer.found()) {
      plan.partition = std::move(answer.result);
      return Ok{};
    }
    if (request.shortfall) break;
  }
  return infeasible_error(shortfall_message(in, c, *st.family, answer.shortfall));
}

// The pipeline model on the links of the placement, times rounded to the plan's quantum (so
// a plan read back replays to its own figures). A partitioner blind to skips could not say
// whether they ended up local; the model can.
void model(const CompileInputs& in, CompiledPlan& plan, const PassState& st) {
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

// What the synthesizer is asked for `plan` at `effort`.
ScheduleRequest schedule_request(const CompileInputs& in, const CompiledPlan& plan, Effort effort) {
  ScheduleRequest request;
  request.model = &plan.model;
  request.num_microbatches = plan.num_microbatches;
  request.static_bytes = plan.static_bytes;
  request.memory_capacity = in.cluster->usable_memory();
  request.split_backward = in.options->split_backward;
  request.family = plan.family->schedule;
  request.activation_budget = activation_budget(*in.options, *in.cluster);
  request.allreduce_s = allreduce_times(plan.model, plan.ranks, in.options->memory, *in.cluster,
                                        plan.num_microbatches);
  request.memo = &in.cache->memo;
  request.max_nodes = in.options->solver_max_nodes;
  request.max_seconds = in.options->solver_max_seconds;
  // The memory curve is drawn once, for the plan kept (memory_curve_pass).
  request.memory_curve_points = 0;
  // The exact integer program (tiny instances: small M) only where the user fixed the
  // configuration: in a search over many, each tiny candidate would cost up to a second of
  // CBC nodes for a configuration that seldom wins. The rule depends on the options alone,
  // so pulse and the baselines it compares itself with are held to the same one.
  if (!in.options->pp || !in.options->microbatch_size) request.exact_max_ops = 0;
  request.probe_smaller_budget = effort == Effort::full;
  // The compiler weighs the searches' answer beside a published order only where frozen
  // encoders run in the step (weigh_searched, compile.cpp).
  request.weighs_searched = frozen_in_step(*in.model, *in.options);
  if (effort == Effort::screen) {
    request.max_evaluations = kScreenEvaluations;
    request.max_order_evaluations = 0;
    request.exact_max_ops = 0;
  }
  return request;
}

// Counts a synthesis the CPU-time safety limit stopped (not one already counted; not a
// limit of 0, which asks for the list schedule alone).
void note_safety_limit(const CompileInputs& in, bool counted, const ScheduleAnswer& answer) {
  if (!counted && answer.status == SolveStatus::time_limit && in.options->solver_max_seconds > 0) {
    ++in.cache->safety_limit_hits;
  }
}

}  // namespace

std::int64_t activation_budget(const PlanOptions& o, const ClusterProfile& cluster) {
  if (o.activation_budget_fraction) {
    const double bytes =
        *o.activation_budget_fraction * static_cast<double>(cluster.usable_memory());
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes));
  }
  return o.activation_budget_bytes.value_or(0);
}

double schedule_bound(const CompileInputs& in, const CompiledPlan& placed) {
  CompiledPlan plan = placed;
  plan.static_bytes = static_memory(plan.model, in.options->memory, plan.dp);
  return synthesis_lower_bound(schedule_request(in, plan, Effort::screen));
}

CompiledPlan start_plan(const CompileInputs& in, const Config& c, const Family& f) {
  CompiledPlan plan;
  static_cast<Degrees&>(plan) = c;
  plan.options = *in.options;
  plan.strategy = in.options->strategy;
  plan.device_type = in.device_type;
  plan.family = &f;
  return plan;
}

void graph_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassState& st,
                PassClock& clock) {
  PassClock::Run run(clock, "graph");
  st.graph = &cached_graph(in, c.microbatch_size, false);
  st.partitioned = st.family->skips == SkipTreatment::blind
                       ? &cached_graph(in, c.microbatch_size, true)
                       : st.graph;
  plan.skips_nested = st.graph->skips_nested();
}

void place_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassClock& clock) {
  PassClock::Run run(clock, "place");
  plan.placement = cached_placement(in, {in.cluster, c.pp, c.dp, {}, {}});
}

Status partition_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassState& st,
                      PassClock& clock) {
  PassClock::Run run(clock, "partition");
  prepare_partition(in, c, st);
  return cut(in, c, plan, st);
}

void pipeline_model_pass(const CompileInputs& in, CompiledPlan& plan, const PassState& st,
                         PassClock& clock) {
  PassClock::Run run(clock, "pipeline model");
  model(in, plan, st);
}

Status replace_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassState& st,
                    PassClock& clock) {
  PassClock::Run run(clock, "re-place");
  if (plan.placement.topology_aware) {
    PlacementRequest where{in.cluster, c.pp, c.dp, {}, {}};
    boundary_traffic(plan.model, where);
    const Placement& weighed = cached_placement(in, where);
    if (weighed.ranks != plan.placement.ranks) {
      plan.placement = weighed;
      if (auto again = cut(in, c, plan, st); !again) return again.error();
      model(in, plan, st);
    }
  }
  plan.ranks = plan.placement.ranks;
  return Ok{};
}

void memory_limits_pass(const CompileInputs& in, CompiledPlan& plan, PassClock& clock) {
  PassClock::Run run(clock, "memory limits");
  plan.static_bytes = static_memory(plan.model, in.options->memory, plan.dp);
  std::vector<std::int64_t> static_totals;
  for (const MemoryBreakdown& m : plan.static_bytes) static_totals.push_back(m.total());
  plan.inflight_limit =
      memory_inflight_limits(plan.model, static_totals, in.cluster->usable_memory(),
                             std::vector<int>(plan.pp, plan.num_microbatches));
}

Status schedule_pass(const CompileInputs& in, CompiledPlan& plan, Effort effort, PassClock& clock) {
  PassClock::Run run(clock, "schedule");
  // The tuner weighs a plan by its figures and restores the chosen one's ops
  // (CompiledPlan::timeline_ops_released); only the frozen encoders' step reads the ops
  // before that (frozen_step_pass, weigh_searched: the timeline's idle gaps).
  const AnswerTimeline wanted =
      frozen_in_step(*in.model, *in.options) ? AnswerTimeline::whole : AnswerTimeline::last_ops;
  bool released = false;
  auto answer = synthesize_schedule(schedule_request(in, plan, effort), wanted, &released);
  if (!answer) return answer.error();
  plan.schedule = std::move(answer->schedule);
  plan.timeline = std::move(answer->timeline);
  plan.timeline_ops_released = released;
  plan.solver = std::move(*answer);
  note_safety_limit(in, false, plan.solver);
  return Ok{};
}

bool full_repeats_screen(const CompileInputs& in, const CompiledPlan& screened, PassClock& clock) {
  PassClock::Run run(clock, "schedule");
  return synthesis_repeats(schedule_request(in, screened, Effort::full),
                           schedule_request(in, screened, Effort::screen), screened.solver);
}

void evaluate_pass(const CompileInputs& in, CompiledPlan& plan, PassClock& clock) {
  PassClock::Run run(clock, "evaluate");
  const std::vector<double> allreduce_s = allreduce_times(
      plan.model, plan.ranks, in.options->memory, *in.cluster, plan.num_microbatches);
  plan.evaluation =
      evaluate(plan.model, plan.timeline, allreduce_s, plan.global_batch, in.options->memory);
}

Status memory_curve_pass(const CompileInputs& in, CompiledPlan& plan, PassClock& clock) {
  if (plan.family->schedule != ScheduleFamily::synthesized) return Ok{};
  PassClock::Run run(clock, "memory curve");
  ScheduleRequest request = schedule_request(in, plan, Effort::full);
  request.memory_curve_points = kMemoryCurvePoints;
  plan.solver.schedule = std::move(plan.schedule);
  plan.solver.timeline = std::move(plan.timeline);
  const bool stopped_before = plan.solver.status == SolveStatus::time_limit;
  if (auto trimmed = trim_memory(request, plan.solver); !trimmed) return trimmed.error();
  note_safety_limit(in, stopped_before, plan.solver);
  // Moved back, not copied: the plan holds one copy (at pp 512 over 2048 layers, 220 MB).
  plan.schedule = std::exchange(plan.solver.schedule, Schedule{});
  plan.timeline = std::exchange(plan.solver.timeline, Timeline{});
  plan.timeline_ops_released = false;  // replayed whole by trim_memory
  plan.evaluation = evaluate(plan.model, plan.timeline, request.allreduce_s, plan.global_batch,
                             in.options->memory);
  return Ok{};
}

}  // namespace pulse::detail
