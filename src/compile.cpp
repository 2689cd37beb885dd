#include "pulse/compile.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "pulse/graph.hpp"
#include "pulse/units.hpp"

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

namespace {

/// Global batch when none is given: 8 samples per device of the cluster.
constexpr int kDefaultSamplesPerDevice = 8;

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

struct Config {
  int pp = 1, dp = 1, microbatch = 1, num_microbatches = 1, global_batch = 1;
};

Result<Config> resolve_config(const ModelProfile& model, const ClusterProfile& cluster,
                              const PlanOptions& options, int pp) {
  Config c;
  const int devices = cluster.num_devices();
  c.pp = pp;
  c.microbatch = options.microbatch_size;
  c.dp = options.dp.value_or(devices / std::max(pp, 1));
  c.global_batch = options.global_batch.value_or(kDefaultSamplesPerDevice * devices);
  const int layers = static_cast<int>(model.layers.size());
  const int min_layers = traits(options.strategy).v_placement ? 2 * pp : pp;
  if (!options.dp && pp > devices) {
    return usage_error(
        fmt::format("--pp {} needs {} devices; cluster {} has {}", pp, pp, cluster.name, devices));
  }
  if (static_cast<long>(pp) * c.dp > devices) {
    return usage_error(fmt::format("--pp {} x --dp {} needs {} devices; cluster {} has {}", pp,
                                   c.dp, static_cast<long>(pp) * c.dp, cluster.name, devices));
  }
  if (layers < min_layers) {
    return usage_error(fmt::format(
        "--pp {} with strategy {} needs at least {} layers ({} stages "
        "of one layer or more); model {} has {}",
        pp, strategy_name(options.strategy), min_layers, min_layers, model.name, layers));
  }
  const long per_step = static_cast<long>(c.dp) * c.microbatch;
  if (c.global_batch % per_step != 0) {
    return usage_error(
        fmt::format("global batch {} is not divisible by dp {} x microbatch size "
                    "{} = {}",
                    c.global_batch, c.dp, c.microbatch, per_step));
  }
  c.num_microbatches = static_cast<int>(c.global_batch / per_step);
  return c;
}

// Replica r's pipeline occupies ranks r*pp .. r*pp+pp-1, so a pipeline no larger than a
// node stays inside one node and the data-parallel replicas span nodes.
std::vector<std::vector<RankId>> default_ranks(int pp, int dp) {
  std::vector<std::vector<RankId>> ranks(dp, std::vector<RankId>(pp));
  for (int r = 0; r < dp; ++r) {
    for (int d = 0; d < pp; ++d) ranks[r][d] = r * pp + d;
  }
  return ranks;
}

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

void evaluate_plan(CompiledPlan& plan, const ClusterProfile& cluster) {
  const Evaluation e = evaluate(plan.model, plan.timeline, plan.ranks, plan.global_batch,
                                plan.options.memory, cluster);
  plan.allreduce = e.allreduce;
  plan.iteration_s = e.iteration_s;
  plan.samples_per_s = e.samples_per_s;
  plan.bubble_ratio = e.bubble_ratio;
}

// Pass 3: the schedule, from the synthesizer (list schedules, then integer programs).
Status schedule_pass(CompiledPlan& plan, std::int64_t capacity) {
  ScheduleRequest request;
  request.model = &plan.model;
  request.num_microbatches = plan.num_microbatches;
  request.static_bytes = plan.static_bytes;
  request.memory_capacity = capacity;
  request.split_backward = plan.options.split_backward;
  request.family = traits(plan.strategy).schedule;
  request.max_nodes = plan.options.solver_max_nodes;
  request.max_seconds = plan.options.solver_max_seconds;
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

Result<CompiledPlan> compile_fixed(const ModelProfile& model, const ClusterProfile& cluster,
                                   const PlanOptions& options, const Config& c, int device_type,
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
  plan.ranks = default_ranks(c.pp, c.dp);

  // Pass 1: the layer graph at this microbatch size on this device type (and, for a
  // strategy blind to skips, the graph it partitions: the same without skip edges).
  const StrategyTraits& strategy = traits(options.strategy);
  const LayerGraph graph = LayerGraph::build(model, device_type, c.microbatch);
  const LayerGraph blind =
      strategy.skip_aware ? LayerGraph{} : without_skips(model, device_type, c.microbatch);
  clock.lap("graph");

  // Pass 2: partition.
  PartitionRequest request;
  request.graph = strategy.skip_aware ? &graph : &blind;
  request.pp = c.pp;
  request.links = pipeline_links(cluster, plan.ranks[0]);
  request.overlap_comm = cluster.overlap_comm;
  request.memory_capacity = cluster.usable_memory();
  request.memory = options.memory;
  request.dp = c.dp;
  const StageLayout shape = strategy.v_placement
                                ? v_layout(std::vector<LayerId>(2 * c.pp + 1, 0), c.pp)
                                : sequential_layout(std::vector<LayerId>(c.pp + 1, 0), c.pp);
  const std::vector<int> wanted = strategy.schedule == ScheduleFamily::gpipe
                                      ? std::vector<int>(c.pp, c.num_microbatches)
                                      : default_inflight(shape, c.num_microbatches);
  auto partition = run_partition(request, options.strategy, wanted, model, cluster, c);
  if (!partition) return partition.error();
  plan.partition = std::move(*partition);
  plan.model = build_pipeline_model(graph, plan.partition.layout, strategy.routing, request.links,
                                    cluster.overlap_comm);
  round_to_nanoseconds(plan.model);
  if (!strategy.skip_aware) {  // the partitioner did not see them; the plan must
    plan.partition.all_skips_local = true;
    for (const SkipPlacement& s : plan.model.skips) {
      plan.partition.all_skips_local = plan.partition.all_skips_local && s.local;
    }
  }
  clock.lap("partition");

  // Pass 3: schedule.
  plan.static_bytes = static_memory(plan.model, options.memory, c.dp);
  if (auto scheduled = schedule_pass(plan, request.memory_capacity); !scheduled) {
    return scheduled.error();
  }
  clock.lap("schedule");

  // Pass 4: evaluate: the data-parallel all-reduce, iteration time, throughput, bubble.
  evaluate_plan(plan, cluster);
  clock.lap("evaluate");
  return plan;
}

Candidate summarize(const Config& c, const Result<CompiledPlan>& r) {
  Candidate k;
  k.pp = c.pp;
  k.dp = c.dp;
  k.num_microbatches = c.num_microbatches;
  k.feasible = r.ok();
  if (r) {
    k.iteration_s = r->iteration_s;
    k.samples_per_s = r->samples_per_s;
  } else {
    k.reason = r.error().message;
  }
  return k;
}

}  // namespace

Result<CompiledPlan> compile_plan(const ModelProfile& model, const ClusterProfile& cluster,
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
  if (options.microbatch_size < 1) return usage_error("--microbatch-size must be at least 1");
  std::vector<PassTime> times;
  try {
    std::vector<int> degrees;
    if (options.pp) {
      degrees.push_back(*options.pp);
    } else {
      const int n = cluster.num_devices();
      const int limit = options.dp ? n / *options.dp : n;
      for (int p = 1; p <= limit; ++p) {
        if (options.dp || n % p == 0) degrees.push_back(p);
      }
    }
    std::optional<CompiledPlan> best;
    std::vector<Candidate> candidates;
    std::optional<Error> first_error;
    for (int pp : degrees) {
      auto config = resolve_config(model, cluster, options, pp);
      if (!config) {
        if (options.pp) return config.error();
        candidates.push_back(Candidate{pp, 0, 0, false, 0, 0, config.error().message});
        if (!first_error) first_error = config.error();
        continue;
      }
      auto plan = compile_fixed(model, cluster, options, *config, device_type, times);
      candidates.push_back(summarize(*config, plan));
      if (!plan) {
        if (plan.error().kind == ErrorKind::internal || options.pp) return plan.error();
        if (!first_error || first_error->kind != ErrorKind::infeasible) first_error = plan.error();
        continue;
      }
      if (!best || plan->samples_per_s > best->samples_per_s * (1 + 1e-9)) best = std::move(*plan);
    }
    if (!best) {
      if (!first_error) return usage_error("no pipeline degree to try");
      std::string reasons;
      for (const Candidate& k : candidates) reasons += fmt::format("\n  pp {}: {}", k.pp, k.reason);
      return Error{first_error->kind, "no configuration fits:" + reasons};
    }
    best->candidates = std::move(candidates);
    best->pass_times = std::move(times);
    return std::move(*best);
  } catch (const std::exception& e) {
    return internal_error(std::string("internal error: ") + e.what());
  }
}

}  // namespace pulse
