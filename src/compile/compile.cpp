// The driver: compile_plan, and the pass list every configuration goes through. Each pass
// is one commented line of compile_configuration, timed under the name --stats prints.

#include "pulse/compile/compile.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "compile_internal.hpp"
#include "pulse/base/units.hpp"
#include "pulse/cost/cost_model.hpp"
#include "pulse/graph/layer_graph.hpp"
#include "pulse/schedule/list_schedule.hpp"

namespace pulse {

void PassClock::lap(const std::string& pass) {
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  for (PassTime& t : times_) {
    if (t.pass == pass) {
      t.seconds += s;
      return;
    }
  }
  times_.push_back({pass, s});
}

namespace detail {

namespace {

// Screening effort: a short policy search, no integer program.
constexpr int kScreenEvaluations = 24;
constexpr double kScreenSeconds = 0.25;

// What the passes of one configuration share besides the plan they fill.
struct PassState {
  LayerGraph graph;          // the model's layers at this microbatch size
  LayerGraph partitioned;    // what the partitioner sees (without skips for v-naive)
  PartitionRequest request;  // partition: everything but the links
  std::vector<int> wanted;   // in-flight counts the schedule wants, per device
};

std::string shortfall_message(const CompileInputs& in, const Config& c,
                              const std::optional<MemoryShortfall>& shortfall) {
  const ModelProfile& model = *in.model;
  const ClusterProfile& cluster = *in.cluster;
  if (!shortfall) {
    return fmt::format("{} cannot be cut for pp {} with strategy {}", model.name, c.pp,
                       strategy_name(in.options->strategy));
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

// The graph pass: the layers at this microbatch size on this device type, and the graph the
// partitioner sees (a strategy blind to skips partitions the same layers without them).
void graph_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan, PassState& st) {
  st.graph = LayerGraph::build(*in.model, in.device_type, c.microbatch_size);
  if (!traits(plan.strategy).skip_aware) {
    ModelProfile blind = *in.model;
    blind.skips.clear();
    st.partitioned = LayerGraph::build(blind, in.device_type, c.microbatch_size);
  }
  plan.skips_nested = st.graph.skips_nested();
}

// The partition request of this configuration (its links come from the placement), and
// the in-flight counts the schedule will want: GPipe holds every microbatch, the others
// about one per stage between a device's first stage and the end.
void prepare_partition(const CompileInputs& in, const Config& c, CompiledPlan& plan,
                       PassState& st) {
  const StrategyTraits& strategy = traits(plan.strategy);
  PartitionRequest& r = st.request;
  r.graph = strategy.skip_aware ? &st.graph : &st.partitioned;
  r.pp = c.pp;
  r.overlap_comm = in.cluster->overlap_comm;
  r.memory_capacity = in.cluster->usable_memory();
  r.memory = in.options->memory;
  r.dp = c.dp;
  r.routing = strategy.routing;
  const StageLayout shape = strategy.v_placement
                                ? v_layout(std::vector<LayerId>(2 * c.pp + 1, 0), c.pp)
                                : sequential_layout(std::vector<LayerId>(c.pp + 1, 0), c.pp);
  st.wanted = strategy.schedule == ScheduleFamily::gpipe
                  ? std::vector<int>(c.pp, c.num_microbatches)
                  : default_inflight(shape, c.num_microbatches);
}

// The partition pass on the links of the current placement: with the in-flight counts the
// schedule wants, else (memory) with one microbatch in flight per device. A skip-aware V
// first insists on local skips, then allows others; v-naive balances without them.
Status partition_pass(const CompileInputs& in, const Config& c, CompiledPlan& plan,
                      PassState& st) {
  PartitionRequest request = st.request;
  request.links = pipeline_links(*in.cluster, plan.placement.ranks[0]);
  const StrategyTraits& strategy = traits(plan.strategy);
  PartitionAnswer answer;
  for (const bool full : {true, false}) {
    request.inflight = full ? st.wanted : std::vector<int>(c.pp, 1);
    if (auto valid = validate_request(request); !valid) return valid.error();
    if (!strategy.v_placement) {
      answer = partition_sequential(request);
    } else if (strategy.skip_aware) {
      answer = partition_v(request, SkipPolicy::local_only);
      if (!answer.found()) answer = partition_v(request, SkipPolicy::allow_nonlocal);
    } else {
      answer = partition_v(request, SkipPolicy::allow_nonlocal);
    }
    if (answer.found()) {
      plan.partition = std::move(answer.result);
      return Ok{};
    }
  }
  return infeasible_error(shortfall_message(in, c, answer.shortfall));
}

// The pipeline model pass: stage costs, transfers and where every skip lives, on the links
// of the placement, times rounded to the plan's quantum (so a plan read back replays to its
// own figures). The partitioner of a skip-blind strategy could not say whether skips ended
// up local; the model can.
void pipeline_model_pass(const CompileInputs& in, CompiledPlan& plan, const PassState& st) {
  const PipelineLinks links = pipeline_links(*in.cluster, plan.placement.ranks[0]);
  plan.model = build_pipeline_model(st.graph, plan.partition.layout, traits(plan.strategy).routing,
                                    links, in.cluster->overlap_comm);
  round_to_quantum(plan.model);
  if (!traits(plan.strategy).skip_aware) {
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
    Placement weighed = place_pipelines(where);
    if (weighed.ranks != plan.placement.ranks) {
      plan.placement = std::move(weighed);
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

// The schedule pass: the synthesizer (list schedules, searches, integer programs), or the
// baseline's own schedule.
Status schedule_pass(const CompileInputs& in, CompiledPlan& plan, Effort effort) {
  ScheduleRequest request;
  request.model = &plan.model;
  request.num_microbatches = plan.num_microbatches;
  request.static_bytes = plan.static_bytes;
  request.memory_capacity = in.cluster->usable_memory();
  request.split_backward = in.options->split_backward;
  request.family = traits(plan.strategy).schedule;
  request.activation_budget = activation_budget(*in.options, *in.cluster);
  request.allreduce_s = allreduce_times(plan.model, plan.ranks, in.options->memory, *in.cluster);
  request.max_nodes = in.options->solver_max_nodes;
  request.max_seconds = in.options->solver_max_seconds;
  // The plan's memory curve: what the synthesized schedule reaches at smaller budgets.
  if (request.family == ScheduleFamily::synthesized) request.memory_curve_points = 3;
  if (effort == Effort::screen) {
    request.memory_curve_points = 0;
    request.max_evaluations = kScreenEvaluations;
    request.max_order_evaluations = 0;
    request.exact_max_ops = 0;
    request.max_seconds = std::min(request.max_seconds, kScreenSeconds);
  }
  auto answer = synthesize_schedule(request);
  if (!answer) return answer.error();
  plan.schedule = std::move(answer->schedule);
  plan.timeline = std::move(answer->timeline);
  plan.solver = std::move(*answer);
  return Ok{};
}

// Starts a plan for configuration `c`.
CompiledPlan start_plan(const CompileInputs& in, const Config& c) {
  CompiledPlan plan;
  static_cast<Degrees&>(plan) = c;
  plan.options = *in.options;
  plan.strategy = in.options->strategy;
  plan.device_type = in.device_type;
  return plan;
}

}  // namespace

Result<CompiledPlan> compile_configuration(const CompileInputs& in, const Config& c,
                                           Effort effort, PassClock& clock) {
  CompiledPlan plan = start_plan(in, c);
  PassState st;
  // The layer graph at this microbatch size on this device type.
  graph_pass(in, c, plan, st);
  clock.lap("graph");
  // Ranks for every pipeline, the boundaries weighed equally.
  plan.placement = place_pipelines({in.cluster, c.pp, c.dp, {}, {}});
  clock.lap("place");
  // Cut the layers into stages (the V or the chain) on those ranks' links.
  prepare_partition(in, c, plan, st);
  if (auto cut = partition_pass(in, c, plan, st); !cut) return cut.error();
  clock.lap("partition");
  // Stage costs, transfers and skip placements, times on the quantum.
  pipeline_model_pass(in, plan, st);
  clock.lap("pipeline model");
  // Ranks again, weighed by the bytes each boundary moves; the cuts follow new links.
  if (auto placed = replace_pass(in, c, plan, st); !placed) return placed.error();
  clock.lap("re-place");
  // Static state and the in-flight counts memory allows, per device.
  memory_limits_pass(in, plan);
  clock.lap("memory limits");
  // The order of operations on every device.
  if (auto scheduled = schedule_pass(in, plan, effort); !scheduled) return scheduled.error();
  clock.lap("schedule");
  // The data-parallel all-reduce, iteration time, throughput, bubble.
  plan.evaluation = evaluate(plan.model, plan.timeline, plan.ranks, plan.global_batch,
                             in.options->memory, *in.cluster);
  clock.lap("evaluate");
  return plan;
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
  const long per_step = static_cast<long>(dp) * microbatch_size;
  if (c.global_batch % per_step != 0) {
    return usage_error(
        fmt::format("global batch {} is not divisible by dp {} x microbatch size "
                    "{} = {}",
                    c.global_batch, dp, microbatch_size, per_step));
  }
  c.num_microbatches = static_cast<int>(c.global_batch / per_step);
  return c;
}

}  // namespace detail

namespace {

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
  return device_type;
}

}  // namespace

Result<CompiledPlan> compile_plan(const ModelProfile& model, const ClusterProfile& cluster,
                                  const PlanOptions& options, PassClock* clock) {
  PassClock own_clock;
  PassClock& timer = clock ? *clock : own_clock;
  auto device_type = validate_options(model, cluster, options);
  if (!device_type) return device_type.error();
  const detail::CompileInputs in{&model, &cluster, &options, *device_type};
  Result<CompiledPlan> plan = Error{};
  if (options.pp && options.microbatch_size) {
    // Everything fixed: one configuration, its errors as they are.
    const int dp = options.dp.value_or(std::max(1, cluster.num_devices() / *options.pp));
    auto config = detail::resolve_config(in, *options.pp, dp, *options.microbatch_size);
    if (!config) return config.error();
    plan = detail::compile_configuration(in, *config, detail::Effort::full, timer);
    if (plan) plan->candidates = {detail::chosen_candidate(*plan)};
  } else {
    plan = detail::tune(in, timer);
  }
  if (plan) plan->pass_times = timer.times();
  return plan;
}

}  // namespace pulse
