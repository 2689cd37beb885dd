#include "pulse/compile/plan_builder.hpp"

#include <algorithm>

#include "pulse/base/version.hpp"
#include "pulse/cost/cost_model.hpp"
#include "pulse/plan/figures.hpp"
#include "pulse/profile/recompute.hpp"

namespace pulse {

namespace {

PlanInput input(const SourceFile& file, const std::string& name, const Provenance& provenance) {
  return {file.name, name, file.sha256, provenance.method};
}

// The options as given; the scales other than 1 only, so an unscaled plan stays as it was,
// byte for byte.
PlanGivenOptions given_options(const PlanOptions& o) {
  PlanGivenOptions g;
  g.strategy = strategy_name(o.strategy);
  g.family = o.family;
  if (!o.cuts.empty()) g.cuts = o.cuts;
  g.pp = o.pp;
  g.dp = o.dp;
  g.microbatch_size = o.microbatch_size;
  g.global_batch = o.global_batch;
  g.split_backward = o.split_backward;
  const CostScales& scales = o.scales;
  if (scales.compute != 1 || !scales.compute_from.empty()) {
    g.compute_scale = scales.compute;
    if (!scales.compute_from.empty()) g.compute_scale_from = scales.compute_from;
  }
  if (scales.links != 1) g.link_scale = scales.links;
  g.activation_budget_bytes = o.activation_budget_bytes;
  g.activation_budget_fraction = o.activation_budget_fraction;
  g.headroom = o.headroom;
  g.recompute = o.recompute;
  g.memory = PlanMemoryOptions(o.memory, o.zero_given);
  return g;
}

// What the planner chose (the options of the alternative kept) and kept to.
PlanChosen chosen_options(const CompiledPlan& p, const std::vector<PlanStage>& stages) {
  PlanChosen c;
  c.memory = p.options.memory;
  c.recompute = p.options.recompute;
  for (const PlanStage& s : stages) c.recomputed_layers += s.recomputed_layers.value_or(0);
  if (p.solver.activation_budget > 0) c.activation_budget_bytes = p.solver.activation_budget;
  c.headroom = p.options.headroom_fraction();
  return c;
}

PlanParallelism parallelism(const CompiledPlan& p, const ModelProfile& model,
                            const ClusterProfile& c) {
  PlanParallelism x;
  static_cast<Degrees&>(x) = p;
  x.num_stages = p.model.layout.num_stages();
  const SequenceLayout& seq = p.options.sequence;
  x.devices_used = p.pp * p.dp * seq.degree();
  x.devices_total = c.num_devices();
  if (!seq.none()) x.sequence = PlanSequence{seq.ulysses, seq.ring, seq.degree()};
  x.device_type = c.device_type;
  x.times_interpolated = !is_profiled_size(model.microbatch_sizes, p.microbatch_size);
  return x;
}

std::string stage_side(const CompiledPlan& p, StageId s) {
  if (p.family->chain()) return "chain";
  return s < p.model.layout.num_stages() / 2 ? "encoder" : "decoder";
}

// Pulse only: the chosen plan against the full-locality V at its configuration, and
// against each baseline's own answer for the same options.
std::optional<PlanVersus> versus(const CompiledPlan& p) {
  if (p.baselines.empty()) return std::nullopt;
  PlanVersus v;
  const double mine = p.evaluation.samples_per_s;
  for (const FamilyOutcome& f : p.families) {
    if (f.family == "v" && f.feasible && f.all_skips_local.value_or(false)) {
      v.speedup_over_v = mine / *f.samples_per_s;
    }
  }
  const BaselineAnswer* best = nullptr;
  for (const BaselineAnswer& b : p.baselines) {
    if (b.feasible && (!best || *b.samples_per_s > *best->samples_per_s)) best = &b;
  }
  v.baselines = p.baselines;
  if (best) {
    v.best_baseline = best->strategy;
    v.speedup_over_best_baseline = mine / *best->samples_per_s;
  }
  return v;
}

PlanPartition partition(const CompiledPlan& p) {
  const std::vector<double> load = p.model.device_load();
  PlanPartition x;
  x.method = p.partition.method;
  x.objective_s = *std::max_element(load.begin(), load.end());
  // The objective is the pipeline model's, whose stage times are whole nanoseconds; the
  // partitioner's bound is of the raw layer times and may come out a few nanoseconds above.
  x.lower_bound_s = std::min(p.partition.lower_bound_s, x.objective_s);
  x.exact = p.partition.exact;
  x.all_skips_local = p.partition.all_skips_local;
  x.skips_nested = p.skips_nested;
  x.states_explored = p.partition.states_explored;
  x.family = p.family->name;
  x.waves = p.family->waves;
  x.families = p.families;
  x.versus = versus(p);
  return x;
}

std::vector<PlanStage> stages(const CompiledPlan& p, const ModelProfile& model) {
  std::vector<PlanStage> out;
  const StageLayout& layout = p.model.layout;
  for (StageId s = 0; s < layout.num_stages(); ++s) {
    PlanStage x;
    x.id = s;
    x.device = layout.device[s];
    x.side = stage_side(p, s);
    for (LayerId l = layout.first_layer[s]; l < layout.first_layer[s + 1]; ++l) {
      x.layers.push_back(model.layers[l].name);
    }
    const StageCost& c = p.model.stages[s];
    x.forward_s = c.forward_s;
    x.backward_s = c.backward_s;
    x.backward_weight_s = c.backward_weight_s;
    x.params = c.params;
    x.activation_bytes_per_microbatch = c.activation_bytes;
    if (p.options.recompute != "none") {
      x.recomputed = recomputed_layers(p.options.recompute, model, layout.first_layer[s],
                                       layout.first_layer[s + 1]);
      x.recomputed_layers = static_cast<int>(x.recomputed->size());
      x.recompute_workspace_bytes_per_microbatch = c.recompute_workspace_bytes;
    }
    if (p.options.memory.zero_stage >= 3) x.largest_layer_params = c.largest_layer_params;
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<PlanDevice> devices(const CompiledPlan& p, const ModelProfile& model) {
  std::vector<PlanDevice> out;
  const std::vector<double> load = p.model.device_load();
  const std::vector<std::int64_t> params = p.model.device_params();
  for (DeviceId d = 0; d < p.pp; ++d) {
    PlanDevice x;
    x.device = d;
    x.stages = p.model.layout.stages_on(d);
    x.load_s = load[d];
    x.params = params[d];
    x.inflight_limit = p.inflight_limit[d];
    for (const SkipPlacement& s : p.model.skips) {
      if (s.local && p.model.layout.device[s.producer_stage] == d) {
        x.cached_skips.push_back(model.skips[s.skip].name);
      }
    }
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<PlanSkip> skips(const CompiledPlan& p, const ModelProfile& model) {
  std::vector<PlanSkip> out;
  for (const SkipPlacement& s : p.model.skips) {
    const Skip& k = model.skips[s.skip];
    PlanSkip x;
    x.name = k.name;
    x.producer = model.layers[k.producer].name;
    x.consumer = model.layers[k.consumer].name;
    x.bytes_per_sample = k.bytes_per_sample;
    x.producer_stage = s.producer_stage;
    x.consumer_stage = s.consumer_stage;
    x.producer_device = p.model.layout.device[s.producer_stage];
    x.consumer_device = p.model.layout.device[s.consumer_stage];
    x.local = s.local;
    x.route = s.local ? "local" : p.model.routing == SkipRouting::direct ? "direct" : "forwarded";
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<PlanCarried> carried(const ModelProfile& model) {
  std::vector<PlanCarried> out;
  for (const Carried& c : model.carried) {
    PlanCarried x;
    x.name = c.name;
    if (c.producer >= 0) x.producer = model.layers[c.producer].name;
    x.bytes_per_sample = c.bytes_per_sample;
    x.needs_gradient = c.needs_gradient;
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<PlanTransfer> transfers(const CompiledPlan& p, const ModelProfile& model) {
  std::vector<PlanTransfer> out;
  for (const Transfer& t : p.model.transfers) {
    const DeviceId from = p.model.layout.device[t.from], to = p.model.layout.device[t.to];
    PlanTransfer x;
    x.from_stage = t.from;
    x.to_stage = t.to;
    x.from_device = from;
    x.to_device = to;
    x.kind = t.main_path ? "main" : "skip";
    x.forward = t.forward;
    x.backward = t.backward;
    x.forward_messages = t.forward_messages;
    x.backward_messages = t.backward_messages;
    x.forward_s = t.forward_s;
    x.backward_s = t.backward_s;
    x.forward_link = p.model.links[from][to].name;
    x.backward_link = p.model.links[to][from].name;
    for (int k : t.skips) x.skips.push_back(model.skips[k].name);
    if (t.main_path && !model.carried.empty()) {
      x.carried.emplace();
      for (int k : t.carried) x.carried->push_back(model.carried[k].name);
    }
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<std::vector<PlanOp>> schedule(const Timeline& timeline) {
  std::vector<std::vector<PlanOp>> out;
  for (const DeviceTimeline& d : timeline.devices) {
    std::vector<PlanOp>& ops = out.emplace_back();
    for (const TimedOp& t : d.ops) ops.push_back({t.op, t.start_s, t.end_s});
  }
  return out;
}

// How the schedule was found. No wall-clock time: `stopped_by` says whether the
// deterministic node limit or the CPU-time safety limit ended the search.
PlanSolver solver(const CompiledPlan& p) {
  const ScheduleAnswer& a = p.solver;
  PlanSolver x;
  static_cast<ScheduleSearch&>(x) = a;
  x.status = solve_status_name(a.status);
  x.limits = {p.options.solver_max_nodes, p.options.solver_max_seconds};
  if (a.activation_budget > 0) x.activation_budget_bytes = a.activation_budget;
  return x;
}

// A sequence-parallel plan's ranks are those of the cluster of groups (one per group: its
// first rank is group x degree): ranks[], pipeline_groups and data_parallel_groups name the
// groups' first ranks, which the schedule describes, and sequence_groups every rank of each
// group, which runs what its first rank does (cost/sequence_parallel.hpp).
PlanRankMap rank_map(const CompiledPlan& p, const ClusterProfile& c) {
  PlanRankMap x;
  const int s = p.options.sequence.degree();
  std::vector<std::vector<RankId>> ranks = p.ranks;
  for (auto& replica : ranks) {
    for (RankId& r : replica) r *= s;
  }
  x.world_size = p.pp * p.dp;
  std::vector<int> used(c.num_devices(), 0);
  for (int r = 0; r < p.dp; ++r) {
    x.pipeline_groups.push_back(ranks[r]);
    for (int d = 0; d < p.pp; ++d) {
      for (int j = 0; j < s; ++j) used[ranks[r][d] + j] = 1;
    }
  }
  for (int d = 0; d < p.pp; ++d) {
    std::vector<RankId> group;
    for (int r = 0; r < p.dp; ++r) group.push_back(ranks[r][d]);
    x.data_parallel_groups.push_back(std::move(group));
  }
  for (RankId g = 0; g < c.num_devices(); ++g) {
    if (!used[g]) {
      x.unused_ranks.push_back(g);
      continue;
    }
    for (int r = 0; r < p.dp; ++r) {
      for (int d = 0; d < p.pp; ++d) {
        if (ranks[r][d] == g) x.ranks.push_back({g, c.node_of(g), c.local_of(g), r, d});
      }
    }
  }
  if (s > 1) {
    auto& groups = x.sequence_groups.emplace();
    for (int r = 0; r < p.dp; ++r) {
      for (int d = 0; d < p.pp; ++d) {
        std::vector<RankId> group;
        for (int j = 0; j < s; ++j) group.push_back(ranks[r][d] + j);
        groups.push_back(std::move(group));
      }
    }
  }
  x.placement = static_cast<const PlanPlacement&>(p.placement);
  return x;
}

}  // namespace

Plan build_plan(const CompiledPlan& p, const ModelProfile& model, const ClusterProfile& cluster) {
  Plan plan;
  plan.generator = {"pulse-plan", kVersion};
  plan.inputs = {input(model.file, model.name, model.provenance),
                 input(cluster.file, cluster.name, cluster.provenance)};
  plan.options = given_options(p.given);
  plan.parallelism = parallelism(p, model, cluster);
  plan.partition = partition(p);
  plan.stages = stages(p, model);
  plan.partition.stages_sha256 = stages_digest(plan.stages);
  plan.chosen = chosen_options(p, plan.stages);
  plan.devices = devices(p, model);
  plan.skips = skips(p, model);
  plan.carried = carried(model);
  plan.transfers = transfers(p, model);
  plan.schedule = schedule(p.timeline);
  plan.schedule_info = {p.schedule.policy, p.schedule.split_backward, p.timeline.makespan_s};
  plan.solver = solver(p);
  // The cluster settings the figures assume, so that `simulate` can replay the plan
  // without the cluster file.
  PlanCostModel& cost = plan.cost_model.emplace();
  cost.overlap_comm = cluster.overlap_comm;
  cost.allreduce = cluster.allreduce;
  cost.time_quantum_s = kTimeQuantum_s;
  // Scales other than 1 only: an unscaled plan stays as it was, byte for byte.
  const CostScales& scales = p.options.scales;
  if (scales.compute != 1) cost.compute_scale = scales.compute;
  if (scales.links != 1) cost.link_scale = scales.links;
  if (const auto& d = p.derived_times) {
    PlanDerivedTimes derived{d->device_type, d->from_device_type, d->rule, d->device_spec, {}};
    if (!d->from_device_spec.empty()) derived.from_device_spec = d->from_device_spec;
    cost.derived_times = {derived};
  }
  plan.comm = comm_figures(p.model, p.evaluation.allreduce, p.num_microbatches, p.dp);
  plan.predicted = predicted_figures(p.timeline, p.evaluation, cluster.usable_memory());
  plan.rank_map = rank_map(p, cluster);
  plan.search = p.candidates;
  plan.pipeline_or_not = p.pipeline_or_not;
  plan.recompute_search = p.recompute_search;
  plan.alternatives = p.alternatives;
  plan.certificate = p.certificate;
  plan.frozen = p.frozen;
  plan.warnings = plan_warnings(plan);
  return plan;
}

}  // namespace pulse
