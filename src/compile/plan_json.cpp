#include "pulse/compile/plan_json.hpp"

#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "pulse/cost/cost_model.hpp"
#include "pulse/graph/layer_graph.hpp"
#include "pulse/base/version.hpp"

namespace pulse {

namespace {

using ojson = nlohmann::ordered_json;

// Rounds to a whole number of 1/scale units, dividing last so the result is the double
// nearest the decimal value: it prints in its shortest form on every machine.
double quantize(double x, double scale) {
  return std::round(x * scale) / scale;
}
double seconds(double x) {
  return quantize_time(x);
}
double ratio(double x) {
  return quantize(x, 1e9);
}

ojson optional_int(const std::optional<int>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}

ojson inputs(const ModelProfile& model, const ClusterProfile& cluster) {
  return {{"model",
           {{"file", model.file.name},
            {"name", model.name},
            {"sha256", model.file.sha256},
            {"provenance", model.provenance.method}}},
          {"cluster",
           {{"file", cluster.file.name},
            {"name", cluster.name},
            {"sha256", cluster.file.sha256},
            {"provenance", cluster.provenance.method}}}};
}

ojson options(const PlanOptions& o) {
  return {{"strategy", strategy_name(o.strategy)},
          {"pp", optional_int(o.pp)},
          {"dp", optional_int(o.dp)},
          {"microbatch_size", optional_int(o.microbatch_size)},
          {"global_batch", optional_int(o.global_batch)},
          {"split_backward", o.split_backward},
          {"memory",
           {{"weight_bytes_per_param", o.memory.weight_bytes_per_param},
            {"gradient_bytes_per_param", o.memory.gradient_bytes_per_param},
            {"optimizer_bytes_per_param", o.memory.optimizer_bytes_per_param},
            {"zero_stage", o.memory.zero_stage}}}};
}

ojson parallelism(const CompiledPlan& p, const ModelProfile& model, const ClusterProfile& c) {
  return {{"pp", p.pp},
          {"dp", p.dp},
          {"microbatch_size", p.microbatch_size},
          {"num_microbatches", p.num_microbatches},
          {"global_batch", p.global_batch},
          {"num_stages", p.model.layout.num_stages()},
          {"devices_used", p.pp * p.dp},
          {"devices_total", c.num_devices()},
          {"device_type", c.device_type},
          {"times_interpolated", !is_profiled_size(model.microbatch_sizes, p.microbatch_size)}};
}

std::string stage_side(const CompiledPlan& p, StageId s) {
  if (!traits(p.strategy).v_placement) return "chain";
  return s < p.pp ? "encoder" : "decoder";
}

ojson stages(const CompiledPlan& p, const ModelProfile& model) {
  ojson out = ojson::array();
  const StageLayout& layout = p.model.layout;
  for (StageId s = 0; s < layout.num_stages(); ++s) {
    ojson names = ojson::array();
    for (LayerId l = layout.first_layer[s]; l < layout.first_layer[s + 1]; ++l) {
      names.push_back(model.layers[l].name);
    }
    const StageCost& c = p.model.stages[s];
    out.push_back({{"id", s},
                   {"device", layout.device[s]},
                   {"side", stage_side(p, s)},
                   {"layers", names},
                   {"forward_s", seconds(c.forward_s)},
                   {"backward_s", seconds(c.backward_s)},
                   {"backward_weight_s", seconds(c.backward_weight_s)},
                   {"params", c.params},
                   {"activation_bytes_per_microbatch", c.activation_bytes}});
  }
  return out;
}

std::string route(const CompiledPlan& p, const SkipPlacement& s) {
  if (s.local) return "local";
  return p.model.routing == SkipRouting::direct ? "direct" : "forwarded";
}

ojson skips(const CompiledPlan& p, const ModelProfile& model) {
  ojson out = ojson::array();
  for (const SkipPlacement& s : p.model.skips) {
    const Skip& k = model.skips[s.skip];
    out.push_back({{"name", k.name},
                   {"producer", model.layers[k.producer].name},
                   {"consumer", model.layers[k.consumer].name},
                   {"bytes_per_sample", k.bytes_per_sample},
                   {"producer_stage", s.producer_stage},
                   {"consumer_stage", s.consumer_stage},
                   {"producer_device", p.model.layout.device[s.producer_stage]},
                   {"consumer_device", p.model.layout.device[s.consumer_stage]},
                   {"local", s.local},
                   {"route", route(p, s)}});
  }
  return out;
}

ojson carried(const ModelProfile& model) {
  ojson out = ojson::array();
  for (const Carried& c : model.carried) {
    out.push_back(
        {{"name", c.name},
         {"producer", c.producer < 0 ? ojson(nullptr) : ojson(model.layers[c.producer].name)},
         {"bytes_per_sample", c.bytes_per_sample},
         {"needs_gradient", c.needs_gradient}});
  }
  return out;
}

ojson bytes_json(const Bytes& b) {
  return {
      {"activation", b.activation}, {"skip", b.skip}, {"carried", b.carried}, {"total", b.total()}};
}

ojson transfers(const CompiledPlan& p, const ModelProfile& model) {
  ojson out = ojson::array();
  for (const Transfer& t : p.model.transfers) {
    ojson names = ojson::array();
    for (int k : t.skips) names.push_back(model.skips[k].name);
    const DeviceId from = p.model.layout.device[t.from], to = p.model.layout.device[t.to];
    out.push_back({{"from_stage", t.from},
                   {"to_stage", t.to},
                   {"from_device", p.model.layout.device[t.from]},
                   {"to_device", p.model.layout.device[t.to]},
                   {"kind", t.main_path ? "main" : "skip"},
                   {"forward_bytes_per_microbatch", bytes_json(t.forward)},
                   {"backward_bytes_per_microbatch", bytes_json(t.backward)},
                   {"forward_messages", t.forward_messages},
                   {"backward_messages", t.backward_messages},
                   {"forward_s", seconds(t.forward_s)},
                   {"backward_s", seconds(t.backward_s)},
                   {"forward_link", p.model.links[from][to].name},
                   {"backward_link", p.model.links[to][from].name},
                   {"skips", names}});
  }
  return out;
}

ojson schedule(const CompiledPlan& p) {
  ojson out = ojson::array();
  for (std::size_t d = 0; d < p.timeline.devices.size(); ++d) {
    ojson ops = ojson::array();
    for (const TimedOp& t : p.timeline.devices[d].ops) {
      ops.push_back({{"op", std::string(1, op_letter(t.op.kind))},
                     {"stage", t.op.stage},
                     {"mb", t.op.microbatch},
                     {"start_s", seconds(t.start_s)},
                     {"end_s", seconds(t.end_s)}});
    }
    out.push_back({{"device", d}, {"ops", ops}});
  }
  return out;
}

ojson devices(const CompiledPlan& p, const ModelProfile& model) {
  ojson out = ojson::array();
  const std::vector<double> load = p.model.device_load();
  const std::vector<std::int64_t> params = p.model.device_params();
  for (int d = 0; d < p.pp; ++d) {
    ojson cached = ojson::array();
    for (const SkipPlacement& s : p.model.skips) {
      if (s.local && p.model.layout.device[s.producer_stage] == d) {
        cached.push_back(model.skips[s.skip].name);
      }
    }
    out.push_back({{"device", d},
                   {"stages", p.model.layout.stages_on(d)},
                   {"load_s", seconds(load[d])},
                   {"params", params[d]},
                   {"inflight_limit", p.inflight_limit[d]},
                   {"cached_skips", cached}});
  }
  return out;
}

// P2P bytes of one iteration by the link class they cross (both directions, all replicas).
ojson link_class_bytes(const CompiledPlan& p) {
  std::map<std::string, std::int64_t> by_class;
  const std::int64_t scale = static_cast<std::int64_t>(p.num_microbatches) * p.dp;
  for (const Transfer& t : p.model.transfers) {
    const DeviceId a = p.model.layout.device[t.from], b = p.model.layout.device[t.to];
    by_class[p.model.links[a][b].name] += t.forward.total() * scale;
    by_class[p.model.links[b][a].name] += t.backward.total() * scale;
  }
  ojson out = ojson::object();
  for (const auto& [name, bytes] : by_class) out[name] = bytes;
  return out;
}

ojson comm(const CompiledPlan& p) {
  const Bytes mb = p.model.bytes_per_microbatch();
  const std::int64_t scale = static_cast<std::int64_t>(p.num_microbatches) * p.dp;
  std::int64_t allreduce = 0;
  for (const AllReduce& a : p.allreduce)
    allreduce += 2 * static_cast<std::int64_t>(p.dp - 1) * a.bytes;
  return {{"p2p_bytes_per_iteration", mb.total() * scale},
          {"skip_bytes_per_iteration", mb.skip * scale},
          {"activation_bytes_per_iteration", mb.activation * scale},
          {"carried_bytes_per_iteration", mb.carried * scale},
          {"p2p_bytes_per_microbatch_per_pipeline", bytes_json(mb)},
          {"p2p_bytes_per_link_class", link_class_bytes(p)},
          {"allreduce_bytes_per_iteration", allreduce}};
}

ojson predicted(const CompiledPlan& p, std::int64_t capacity_bytes) {
  ojson devs = ojson::array();
  double exposed = 0;
  for (int d = 0; d < p.pp; ++d) {
    const DeviceTimeline& t = p.timeline.devices[d];
    const AllReduce& a = p.allreduce[d];
    exposed = std::max(exposed, a.start_s + a.seconds - p.timeline.makespan_s);
    devs.push_back({{"device", d},
                    {"compute_s", seconds(t.compute_s)},
                    {"send_s", seconds(t.send_s)},
                    {"idle_s", seconds(t.idle_s)},
                    {"allreduce_s", seconds(a.seconds)},
                    {"max_inflight", t.max_inflight},
                    {"peak_memory_bytes", t.peak.total()},
                    {"capacity_bytes", capacity_bytes},
                    {"memory",
                     {{"weights", t.peak.weights},
                      {"gradients", t.peak.gradients},
                      {"optimizer", t.peak.optimizer},
                      {"activations", t.peak.activations},
                      {"skip_cache", t.peak.skip_cache}}}});
  }
  ojson peaks = ojson::array();
  for (const DeviceTimeline& t : p.timeline.devices) peaks.push_back(t.peak.total());
  return {{"iteration_s", seconds(p.iteration_s)},
          {"samples_per_s", quantize(p.samples_per_s, 1e6)},
          {"bubble_ratio", ratio(p.bubble_ratio)},
          {"pipeline_makespan_s", seconds(p.timeline.makespan_s)},
          {"allreduce_exposed_s", seconds(std::max(0.0, exposed))},
          {"peak_memory_bytes", peaks},
          {"devices", devs}};
}

ojson rank_map(const CompiledPlan& p, const ClusterProfile& c) {
  ojson ranks = ojson::array(), pipelines = ojson::array(), replicas = ojson::array();
  std::vector<int> used(c.num_devices(), 0);
  for (int r = 0; r < p.dp; ++r) {
    pipelines.push_back(p.ranks[r]);
    for (int d = 0; d < p.pp; ++d) used[p.ranks[r][d]] = 1;
  }
  for (int d = 0; d < p.pp; ++d) {
    ojson group = ojson::array();
    for (int r = 0; r < p.dp; ++r) group.push_back(p.ranks[r][d]);
    replicas.push_back(group);
  }
  for (RankId g = 0; g < c.num_devices(); ++g) {
    if (!used[g]) continue;
    for (int r = 0; r < p.dp; ++r) {
      for (int d = 0; d < p.pp; ++d) {
        if (p.ranks[r][d] != g) continue;
        ranks.push_back({{"rank", g},
                         {"node", c.node_of(g)},
                         {"local_device", c.local_of(g)},
                         {"dp_index", r},
                         {"pipeline_device", d}});
      }
    }
  }
  ojson unused = ojson::array();
  for (RankId g = 0; g < c.num_devices(); ++g) {
    if (!used[g]) unused.push_back(g);
  }
  return {{"world_size", p.pp * p.dp},
          {"ranks", ranks},
          {"pipeline_groups", pipelines},
          {"data_parallel_groups", replicas},
          {"unused_ranks", unused},
          {"placement",
           {{"topology_aware", p.placement.topology_aware},
            {"note", p.placement.note},
            {"boundary_links", p.placement.boundary_links}}}};
}

ojson search(const CompiledPlan& p) {
  ojson out = ojson::array();
  for (const Candidate& k : p.candidates) {
    ojson entry = {{"pp", k.pp},
                   {"dp", k.dp},
                   {"microbatch_size", k.microbatch_size},
                   {"num_microbatches", k.num_microbatches},
                   {"feasible", k.feasible},
                   {"chosen", k.chosen},
                   {"synthesized", k.synthesized}};
    if (k.feasible) {
      entry["iteration_s"] = seconds(k.iteration_s);
      entry["samples_per_s"] = quantize(k.samples_per_s, 1e6);
      entry["peak_memory_bytes"] = k.peak_memory_bytes;
    }
    if (!k.reason.empty()) entry["reason"] = k.reason;
    out.push_back(entry);
  }
  return out;
}

// How the schedule was found. No wall-clock time: `stopped_by` says whether the
// deterministic node limit or the wall-clock safety limit ended the search.
ojson solver(const CompiledPlan& p) {
  const ScheduleAnswer& a = p.solver;
  return {
      {"status", a.status},
      {"method", a.method},
      {"stopped_by", a.stopped_by},
      {"makespan_s", seconds(a.makespan_s)},
      {"lower_bound_s", seconds(a.lower_bound_s)},
      {"gap", ratio(a.gap)},
      {"heuristic_makespan_s", seconds(a.heuristic_makespan_s)},
      {"list_evaluations", a.list_evaluations},
      {"order_evaluations", a.order_evaluations},
      {"milp_solves", a.milp_solves},
      {"milp_nodes", a.milp_nodes},
      {"limits",
       {{"max_nodes", p.options.solver_max_nodes}, {"max_seconds", p.options.solver_max_seconds}}}};
}

ojson partition(const CompiledPlan& p, const ModelProfile& model) {
  const LayerGraph graph = LayerGraph::build(model, p.device_type, p.microbatch_size);
  const std::vector<double> load = p.model.device_load();
  return {{"method", p.partition.method},
          {"objective_s", seconds(*std::max_element(load.begin(), load.end()))},
          {"lower_bound_s", seconds(p.partition.lower_bound_s)},
          {"exact", p.partition.exact},
          {"all_skips_local", p.partition.all_skips_local},
          {"skips_nested", graph.skips_nested()},
          {"states_explored", p.partition.states_explored}};
}

}  // namespace

std::string plan_json(const CompiledPlan& p, const ModelProfile& model,
                      const ClusterProfile& cluster) {
  ojson plan;
  plan["schema"] = kPlanSchema;
  plan["generator"] = {{"name", "pulse-plan"}, {"version", kVersion}};
  plan["inputs"] = inputs(model, cluster);
  plan["options"] = options(p.options);
  plan["parallelism"] = parallelism(p, model, cluster);
  plan["partition"] = partition(p, model);
  plan["stages"] = stages(p, model);
  plan["devices"] = devices(p, model);
  plan["skips"] = skips(p, model);
  plan["carried"] = carried(model);
  plan["transfers"] = transfers(p, model);
  plan["schedule"] = schedule(p);
  plan["schedule_info"] = {{"policy", p.schedule.policy},
                           {"split_backward", p.schedule.split_backward},
                           {"makespan_s", seconds(p.timeline.makespan_s)}};
  plan["solver"] = solver(p);
  // The cluster settings the figures assume, so that `simulate` can replay the plan
  // without the cluster file.
  plan["cost_model"] = {{"overlap_comm", cluster.overlap_comm},
                        {"allreduce", cluster.allreduce},
                        {"time_quantum_s", kTimeQuantum_s}};
  plan["comm"] = comm(p);
  plan["predicted"] = predicted(p, cluster.usable_memory());
  plan["rank_map"] = rank_map(p, cluster);
  plan["search"] = search(p);
  return plan.dump(2) + "\n";
}

std::string figures_json(const CompiledPlan& plan, std::int64_t capacity_bytes) {
  const ojson figures = {{"comm", comm(plan)}, {"predicted", predicted(plan, capacity_bytes)}};
  return figures.dump(2) + "\n";
}

}  // namespace pulse
