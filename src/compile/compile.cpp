#include "pulse/compile/compile.hpp"

#include "compile_internal.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "pulse/graph/layer_graph.hpp"
#include "pulse/base/units.hpp"
#include "pulse/schedule/list_schedule.hpp"

namespace pulse {

namespace {

// Indexed by Strategy.
constexpr StrategyTraits kStrategies[] = {
    {"pulse", true, SkipRouting::direct, true, ScheduleFamily::synthesized},
    {"v-naive", true, SkipRouting::direct, false, ScheduleFamily::synthesized},
    {"1f1b", false, SkipRouting::forwarded, true, ScheduleFamily::one_f_one_b},
    {"1f1b-direct", false, SkipRouting::direct, true, ScheduleFamily::one_f_one_b},
    {"gpipe", false, SkipRouting::forwarded, true, ScheduleFamily::gpipe},
};

}  // namespace

const StrategyTraits& traits(Strategy s) {
  return kStrategies[static_cast<int>(s)];
}

const char* strategy_name(Strategy s) {
  return traits(s).name;
}

std::optional<Strategy> parse_strategy(std::string_view name) {
  if (name == "sequential") return Strategy::one_f_one_b;
  for (int i = 0; i < static_cast<int>(std::size(kStrategies)); ++i) {
    if (name == kStrategies[i].name) return static_cast<Strategy>(i);
  }
  return std::nullopt;
}

std::string strategy_names() {
  std::string out;
  for (const StrategyTraits& t : kStrategies)
    out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

namespace detail {

namespace {

// Screening effort: a short policy search, no integer program.
constexpr int kScreenEvaluations = 24;
constexpr double kScreenSeconds = 0.25;

LayerGraph without_skips(ModelProfile model, int device_type, int microbatch) {
  model.skips.clear();
  return LayerGraph::build(model, device_type, microbatch);
}

class PassClock {
 public:
  explicit PassClock(std::vector<PassTime>& out) : out_(out) {}
  void lap(const std::string& pass) {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    for (PassTime& t : out_) {
      if (t.pass == pass) {
        t.seconds += s;
        return;
      }
    }
    out_.push_back({pass, s});
  }

 private:
  std::vector<PassTime>& out_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

std::string shortfall_message(const ModelProfile& model, const ClusterProfile& cluster,
                              const Config& c, const MemoryShortfall& s) {
  return fmt::format(
      "{} does not fit {} at pp {} (dp {}, microbatch size {}): even the most memory-frugal "
      "partition, with one microbatch in flight, needs {} on pipeline device {}, {} more than "
      "the {} usable per device ({} minus {} reserved)",
      model.name, cluster.name, c.pp, c.dp, c.microbatch, format_bytes(s.needed_bytes), s.device,
      format_bytes(s.needed_bytes - s.capacity_bytes), format_bytes(s.capacity_bytes),
      format_bytes(cluster.memory_bytes), format_bytes(cluster.reserved_bytes));
}

// Partition with the in-flight counts the schedule wants; if memory forbids, with one
// microbatch in flight per device. Skip-aware V placement first insists on local skips,
// then allows others; v-naive balances a graph without skips (and pays for them later).
Result<PartitionResult> run_partition(PartitionRequest request, Strategy strategy,
                                      const std::vector<int>& wanted, const ModelProfile& model,
                                      const ClusterProfile& cluster, const Config& c) {
  const std::vector<int> one(request.pp, 1);
  PartitionOutcome outcome;
  for (const bool full : {true, false}) {
    request.inflight = full ? wanted : one;
    const StrategyTraits& t = traits(strategy);
    if (!t.v_placement) {
      request.routing = t.routing;
      outcome = partition_sequential(request);
    } else if (t.skip_aware) {
      outcome = partition_v(request, SkipPolicy::local_only);
      if (!outcome.found) outcome = partition_v(request, SkipPolicy::allow_nonlocal);
    } else {
      outcome = partition_v(request, SkipPolicy::allow_nonlocal);
    }
    if (outcome.found) return outcome.result;
  }
  return infeasible_error(shortfall_message(model, cluster, c, outcome.shortfall));
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

void evaluate_plan(CompiledPlan& plan, const ClusterProfile& cluster) {
  const Evaluation e = evaluate(plan.model, plan.timeline, plan.ranks, plan.global_batch,
                                plan.options.memory, cluster);
  plan.allreduce = e.allreduce;
  plan.iteration_s = e.iteration_s;
  plan.samples_per_s = e.samples_per_s;
  plan.bubble_ratio = e.bubble_ratio;
}

// Pass 4: the schedule, from the synthesizer (list schedules, then integer programs).
Status schedule_pass(CompiledPlan& plan, std::int64_t capacity, Effort effort) {
  ScheduleRequest request;
  request.model = &plan.model;
  request.num_microbatches = plan.num_microbatches;
  request.static_bytes = plan.static_bytes;
  request.memory_capacity = capacity;
  request.split_backward = plan.options.split_backward;
  request.family = traits(plan.strategy).schedule;
  request.max_nodes = plan.options.solver_max_nodes;
  request.max_seconds = plan.options.solver_max_seconds;
  if (effort == Effort::screen) {
    request.max_evaluations = kScreenEvaluations;
    request.max_order_evaluations = 0;
    request.exact_max_ops = 0;
    request.max_seconds = std::min(request.max_seconds, kScreenSeconds);
  }
  auto answer = synthesize_schedule(request);
  if (!answer) return answer.error();
  std::vector<std::int64_t> static_totals;
  for (const MemoryBreakdown& m : plan.static_bytes) static_totals.push_back(m.total());
  plan.inflight_limit = memory_inflight_limits(plan.model, static_totals, capacity,
                                               std::vector<int>(plan.pp, plan.num_microbatches));
  plan.schedule = std::move(answer->schedule);
  plan.timeline = std::move(answer->timeline);
  plan.solver = std::move(*answer);
  return Ok{};
}

// Passes 2 and 3: partition, then place the pipelines for the traffic that partition moves
// and partition again on the links the placement chose (the cuts may shift).
Status partition_and_place(CompiledPlan& plan, PartitionRequest& request, const LayerGraph& graph,
                           const ModelProfile& model, const ClusterProfile& cluster,
                           const Config& c) {
  const StrategyTraits& strategy = traits(plan.strategy);
  const StageLayout shape = strategy.v_placement
                                ? v_layout(std::vector<LayerId>(2 * c.pp + 1, 0), c.pp)
                                : sequential_layout(std::vector<LayerId>(c.pp + 1, 0), c.pp);
  const std::vector<int> wanted = strategy.schedule == ScheduleFamily::gpipe
                                      ? std::vector<int>(c.pp, c.num_microbatches)
                                      : default_inflight(shape, c.num_microbatches);
  PlacementRequest where{&cluster, c.pp, c.dp, {}, {}};
  plan.placement = place_pipelines(where);  // equal weights first
  for (int round = 0; round < 2; ++round) {
    request.links = pipeline_links(cluster, plan.placement.ranks[0]);
    auto partition = run_partition(request, plan.strategy, wanted, model, cluster, c);
    if (!partition) return partition.error();
    plan.partition = std::move(*partition);
    plan.model = build_pipeline_model(graph, plan.partition.layout, strategy.routing, request.links,
                                      cluster.overlap_comm);
    if (round == 1 || !plan.placement.topology_aware) break;
    boundary_traffic(plan.model, where);
    Placement weighed = place_pipelines(where);
    if (weighed.ranks == plan.placement.ranks) break;
    plan.placement = std::move(weighed);
  }
  plan.ranks = plan.placement.ranks;
  round_to_nanoseconds(plan.model);
  if (!strategy.skip_aware) {  // the partitioner did not see skips; the plan must
    plan.partition.all_skips_local = true;
    for (const SkipPlacement& s : plan.model.skips) {
      plan.partition.all_skips_local = plan.partition.all_skips_local && s.local;
    }
  }
  return Ok{};
}

}  // namespace

Result<Config> resolve_config(const ModelProfile& model, const ClusterProfile& cluster,
                              const PlanOptions& options, int pp, int dp, int microbatch) {
  Config c;
  const int devices = cluster.num_devices();
  c.pp = pp;
  c.dp = dp;
  c.microbatch = microbatch;
  c.global_batch = options.global_batch.value_or(kDefaultSamplesPerDevice * devices);
  const int layers = static_cast<int>(model.layers.size());
  const int min_layers = traits(options.strategy).v_placement ? 2 * pp : pp;
  if (!options.dp && pp > devices) {
    return usage_error(
        fmt::format("--pp {} needs {} devices; cluster {} has {}", pp, pp, cluster.name, devices));
  }
  if (pp < 1 || dp < 1 || static_cast<long>(pp) * dp > devices) {
    return usage_error(fmt::format("--pp {} x --dp {} needs {} devices; cluster {} has {}", pp, dp,
                                   static_cast<long>(pp) * dp, cluster.name, devices));
  }
  if (layers < min_layers) {
    return usage_error(fmt::format(
        "--pp {} with strategy {} needs at least {} layers ({} stages "
        "of one layer or more); model {} has {}",
        pp, strategy_name(options.strategy), min_layers, min_layers, model.name, layers));
  }
  const long per_step = static_cast<long>(dp) * microbatch;
  if (c.global_batch % per_step != 0) {
    return usage_error(
        fmt::format("global batch {} is not divisible by dp {} x microbatch size "
                    "{} = {}",
                    c.global_batch, dp, microbatch, per_step));
  }
  c.num_microbatches = static_cast<int>(c.global_batch / per_step);
  return c;
}

Result<CompiledPlan> compile_configuration(const ModelProfile& model, const ClusterProfile& cluster,
                                           const PlanOptions& options, const Config& c,
                                           int device_type, Effort effort,
                                           std::vector<PassTime>& times) {
  PassClock clock(times);
  CompiledPlan plan;
  plan.options = options;
  plan.strategy = options.strategy;
  plan.pp = c.pp;
  plan.dp = c.dp;
  plan.microbatch_size = c.microbatch;
  plan.num_microbatches = c.num_microbatches;
  plan.global_batch = c.global_batch;
  plan.device_type = device_type;

  // Pass 1: the layer graph at this microbatch size on this device type (and, for a
  // strategy blind to skips, the graph it partitions: the same without skip edges).
  const StrategyTraits& strategy = traits(options.strategy);
  const LayerGraph graph = LayerGraph::build(model, device_type, c.microbatch);
  const LayerGraph blind =
      strategy.skip_aware ? LayerGraph{} : without_skips(model, device_type, c.microbatch);
  clock.lap("graph");

  // Passes 2 and 3: partition and placement.
  PartitionRequest request;
  request.graph = strategy.skip_aware ? &graph : &blind;
  request.pp = c.pp;
  request.overlap_comm = cluster.overlap_comm;
  request.memory_capacity = cluster.usable_memory();
  request.memory = options.memory;
  request.dp = c.dp;
  if (auto placed = partition_and_place(plan, request, graph, model, cluster, c); !placed) {
    return placed.error();
  }
  clock.lap("partition");

  // Pass 4: schedule.
  plan.static_bytes = static_memory(plan.model, options.memory, c.dp);
  if (auto scheduled = schedule_pass(plan, request.memory_capacity, effort); !scheduled) {
    return scheduled.error();
  }
  clock.lap("schedule");

  // Pass 5: evaluate: the data-parallel all-reduce, iteration time, throughput, bubble.
  evaluate_plan(plan, cluster);
  clock.lap("evaluate");
  return plan;
}

}  // namespace detail

}  // namespace pulse
