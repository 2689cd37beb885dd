// Every key of a plan, once, in the order the plan writes them. Each section is a generic
// function of an `io` (plan_codec_internal.hpp): PlanWriter writes these keys, PlanReader
// reads and checks them, KeyLister lists them for the schema test. docs/plans.md says what
// each key means; schema/plan.schema.json describes the same keys.

#include "plan_codec_internal.hpp"
#include "pulse/plan/plan_check.hpp"

namespace pulse::detail {

namespace {

// plan_check.hpp's limits as specs. Times and byte counts have theirs in the reader.
Spec scale_factor() {
  return number(Format::raw, Range::positive)
      .within(kMinScale, kMaxScale, "the what-if factor limit, 1/1000 to 1000");
}
Spec rank_count() {
  return count().at_most(kMaxRanks, "the rank limit");
}
Spec rank_id() {
  return count().at_most(kMaxRanks - 1, "the rank limit");
}
Spec bytes_per_param() {
  return number(Format::raw, Range::nonnegative)
      .at_most(kMaxBytesPerParam, "the bytes-per-parameter limit")
      .defaulted();
}

Spec headroom_spec() {
  return number(Format::ratio, Range::positive).at_most(1, "all of the usable memory");
}

template <class IO, class T>
void generator_keys(IO& io, T& g) {
  io.field("name", g.name, text());
  io.field("version", g.version, text());
}

template <class IO, class T>
void input_keys(IO& io, T& in) {
  io.field("file", in.file, text());
  io.field("name", in.name, text());
  io.field("sha256", in.sha256, sha256());
  io.field("provenance", in.provenance, text());
}

template <class IO, class T>
void inputs_keys(IO& io, T& inputs) {
  io.object("model", inputs.model, [](auto& sub, auto& x) { input_keys(sub, x); });
  io.object("cluster", inputs.cluster, [](auto& sub, auto& x) { input_keys(sub, x); });
}

template <class IO, class T>
void memory_model_keys(IO& io, T& m) {
  io.field("weight_bytes_per_param", m.weight_bytes_per_param, bytes_per_param());
  io.field("gradient_bytes_per_param", m.gradient_bytes_per_param, bytes_per_param());
  io.field("optimizer_bytes_per_param", m.optimizer_bytes_per_param, bytes_per_param());
  io.field("zero_stage", m.zero_stage, count().at_most(3, "the ZeRO stages 0 to 3").defaulted());
  io.field("precision", m.precision,
           choice({"mixed", "fp16-mixed", "bf16", "fp32", "fp64"}).defaulted());
}

// options.memory: the ZeRO stage as given, null when not (v2) or the stage planned (v1).
template <class IO, class T>
void memory_options_keys(IO& io, T& m) {
  io.field("weight_bytes_per_param", m.weight_bytes_per_param, bytes_per_param());
  io.field("gradient_bytes_per_param", m.gradient_bytes_per_param, bytes_per_param());
  io.field("optimizer_bytes_per_param", m.optimizer_bytes_per_param, bytes_per_param());
  io.field("zero_stage", m.zero_stage,
           count().at_most(3, "the ZeRO stages 0 to 3").nullable_or_absent());
  io.field("precision", m.precision,
           choice({"mixed", "fp16-mixed", "bf16", "fp32", "fp64"}).defaulted());
}

template <class IO, class T>
void chosen_keys(IO& io, T& c) {
  io.object("memory", c.memory, [](auto& sub, auto& x) { memory_model_keys(sub, x); });
  io.field("recompute", c.recompute, choice({"none", "selective", "full"}));
  io.field("recomputed_layers", c.recomputed_layers, count());
  io.field("activation_budget_bytes", c.activation_budget_bytes, bytes().nullable_or_absent());
  io.field("headroom", c.headroom, headroom_spec());
}

template <class IO, class T>
void options_keys(IO& io, T& o) {
  io.field("strategy", o.strategy, text());
  io.field("family", o.family, text());
  io.list("cuts", o.cuts, text().nonempty("layer"));
  io.field("pp", o.pp, count(1).nullable_or_absent());
  io.field("dp", o.dp, count(1).nullable_or_absent());
  io.field("microbatch_size", o.microbatch_size, count(1).nullable_or_absent());
  io.field("global_batch", o.global_batch, count(1).nullable_or_absent());
  io.field("split_backward", o.split_backward, flag());
  io.field("compute_scale", o.compute_scale, scale_factor());
  io.field("compute_scale_from", o.compute_scale_from, choice({"range-low", "range-high"}));
  io.field("link_scale", o.link_scale, scale_factor());
  io.field("activation_budget_bytes", o.activation_budget_bytes, bytes().nullable_or_absent());
  io.field("activation_budget_fraction", o.activation_budget_fraction,
           number(Format::ratio, Range::positive).nullable_or_absent());
  io.field("headroom", o.headroom, headroom_spec().nullable_or_absent());
  io.field("recompute", o.recompute, choice({"none", "selective", "full", "auto"}));
  io.object(
      "memory", o.memory, [](auto& sub, auto& x) { memory_options_keys(sub, x); }, Need::defaulted);
}

// The degrees that size the rest of a plan, with their limits: read first (degree_keys)
// and again in their places below.
Spec pp_spec() {
  return count(1).at_most(kMaxPipelineDegree, "the pipeline degree limit");
}
Spec dp_spec() {
  return count(1).at_most(kMaxRanks, "the rank limit");
}
Spec microbatches_spec() {
  return count(1).at_most(kMaxMicrobatches, "the microbatch limit");
}
Spec stages_spec() {
  return count(1).at_most(kMaxStages, "the stage limit");
}

template <class IO, class T>
void parallelism_keys(IO& io, T& x) {
  io.field("pp", x.pp, pp_spec());
  io.field("dp", x.dp, dp_spec());
  io.field("microbatch_size", x.microbatch_size, count(1));
  io.field("num_microbatches", x.num_microbatches, microbatches_spec());
  io.field("global_batch", x.global_batch, count(1));
  io.field("num_stages", x.num_stages, stages_spec());
  io.field("devices_used", x.devices_used, rank_count());
  io.field("devices_total", x.devices_total, rank_count());
  io.field("device_type", x.device_type, text());
  io.field("times_interpolated", x.times_interpolated, flag());
  io.object("sequence", x.sequence, [](auto& sub, auto& s) {
    sub.field("ulysses", s.ulysses, count(1));
    sub.field("ring", s.ring, count(1));
    sub.field("degree", s.degree, count(1).at_most(kMaxRanks, "the rank limit"));
  });
}

template <class IO, class T>
void family_outcome_keys(IO& io, T& f) {
  io.field("family", f.family, text());
  io.field("feasible", f.feasible, flag());
  io.field("chosen", f.chosen, flag());
  io.field("synthesized", f.synthesized, flag());
  io.field("all_skips_local", f.all_skips_local, flag());
  io.field("iteration_s", f.iteration_s, seconds());
  io.field("samples_per_s", f.samples_per_s, number(Format::rate, Range::nonnegative));
  io.field("p2p_bytes_per_iteration", f.p2p_bytes_per_iteration, bytes());
  io.field("reason", f.reason, text());
}

template <class IO, class T>
void baseline_answer_keys(IO& io, T& b) {
  io.field("strategy", b.strategy, text());
  io.field("feasible", b.feasible, flag());
  io.field("samples_per_s", b.samples_per_s, number(Format::rate, Range::nonnegative));
  io.field("p2p_bytes_per_iteration", b.p2p_bytes_per_iteration, bytes());
  io.field("configuration", b.configuration, text());
}

template <class IO, class T>
void versus_keys(IO& io, T& v) {
  io.field("speedup_over_v", v.speedup_over_v, number(Format::ratio, Range::positive));
  io.field("best_baseline", v.best_baseline, text());
  io.field("speedup_over_best_baseline", v.speedup_over_best_baseline,
           number(Format::ratio, Range::positive));
  io.objects(
      "baselines", v.baselines, [](auto& sub, auto& b) { baseline_answer_keys(sub, b); },
      Need::defaulted);
}

template <class IO, class T>
void partition_keys(IO& io, T& x) {
  io.field("method", x.method, text());
  io.field("objective_s", x.objective_s, seconds());
  io.field("lower_bound_s", x.lower_bound_s, seconds());
  io.field("exact", x.exact, flag());
  io.field("all_skips_local", x.all_skips_local, flag());
  io.field("skips_nested", x.skips_nested, flag());
  io.field("states_explored", x.states_explored, count());
  io.field("family", x.family, text());
  io.field("waves", x.waves, count());
  io.field("stages_sha256", x.stages_sha256, sha256());
  io.objects(
      "families", x.families, [](auto& sub, auto& f) { family_outcome_keys(sub, f); },
      Need::defaulted);
  io.object("versus", x.versus, [](auto& sub, auto& v) { versus_keys(sub, v); });
}

template <class IO, class T>
void stage_keys(IO& io, T& s) {
  io.field("id", s.id, index(IndexOf::stage_in_order));
  io.field("device", s.device, index(IndexOf::device));
  io.field("side", s.side, text());
  io.list("layers", s.layers, text().nonempty("layer"));
  io.field("forward_s", s.forward_s, seconds());
  io.field("backward_s", s.backward_s, seconds());
  io.field("backward_weight_s", s.backward_weight_s, seconds());
  io.field("params", s.params, bytes());
  io.field("activation_bytes_per_microbatch", s.activation_bytes_per_microbatch, bytes());
  io.field("recomputed_layers", s.recomputed_layers, count());
  io.list("recomputed", s.recomputed, text());
  io.field("recompute_workspace_bytes_per_microbatch", s.recompute_workspace_bytes_per_microbatch,
           bytes());
  io.field("largest_layer_params", s.largest_layer_params, bytes());
}

template <class IO, class T>
void device_keys(IO& io, T& d) {
  io.field("device", d.device, index(IndexOf::device));
  io.list("stages", d.stages, index(IndexOf::stage));
  io.field("load_s", d.load_s, seconds());
  io.field("params", d.params, bytes());
  io.field("inflight_limit", d.inflight_limit, count());
  io.list("cached_skips", d.cached_skips, text().defaulted());
}

template <class IO, class T>
void skip_keys(IO& io, T& k) {
  io.field("name", k.name, text());
  io.field("producer", k.producer, text());
  io.field("consumer", k.consumer, text());
  io.field("bytes_per_sample", k.bytes_per_sample, bytes());
  io.field("producer_stage", k.producer_stage, index(IndexOf::stage));
  io.field("consumer_stage", k.consumer_stage, index(IndexOf::stage));
  io.field("producer_device", k.producer_device, index(IndexOf::device));
  io.field("consumer_device", k.consumer_device, index(IndexOf::device));
  io.field("local", k.local, flag());
  io.field("route", k.route, choice({"local", "direct", "forwarded"}));
}

template <class IO, class T>
void carried_keys(IO& io, T& c) {
  io.field("name", c.name, text());
  io.field("producer", c.producer, text().nullable());
  io.field("bytes_per_sample", c.bytes_per_sample, bytes());
  io.field("needs_gradient", c.needs_gradient, flag());
}

template <class IO, class T>
void bytes_keys(IO& io, T& b) {
  io.field("activation", b.activation, bytes());
  io.field("skip", b.skip, bytes());
  io.field("carried", b.carried, bytes());
  io.derived("total", b.total());
}

template <class IO, class T>
void transfer_keys(IO& io, T& t) {
  io.field("from_stage", t.from_stage, index(IndexOf::stage));
  io.field("to_stage", t.to_stage, index(IndexOf::stage));
  io.field("from_device", t.from_device, index(IndexOf::device));
  io.field("to_device", t.to_device, index(IndexOf::device));
  io.field("kind", t.kind, choice({"main", "skip"}));
  io.object("forward_bytes_per_microbatch", t.forward,
            [](auto& sub, auto& x) { bytes_keys(sub, x); });
  io.object("backward_bytes_per_microbatch", t.backward,
            [](auto& sub, auto& x) { bytes_keys(sub, x); });
  io.field("forward_messages", t.forward_messages, count());
  io.field("backward_messages", t.backward_messages, count());
  io.field("forward_s", t.forward_s, seconds());
  io.field("backward_s", t.backward_s, seconds());
  io.field("forward_link", t.forward_link, text());
  io.field("backward_link", t.backward_link, text());
  io.list("skips", t.skips, text().defaulted());
  io.list("carried", t.carried, text());
}

template <class IO, class T>
void op_keys(IO& io, T& o) {
  io.field("op", o.op.kind, op_kind());
  io.field("stage", o.op.stage, index(IndexOf::stage));
  io.field("mb", o.op.mb, index(IndexOf::microbatch));
  io.field("start_s", o.start_s, seconds());
  io.field("end_s", o.end_s, seconds());
}

template <class IO, class T>
void schedule_info_keys(IO& io, T& x) {
  io.field("policy", x.policy, text());
  io.field("split_backward", x.split_backward, flag());
  io.field("makespan_s", x.makespan_s, seconds());
}

template <class IO, class T>
void solver_keys(IO& io, T& x) {
  io.field("status", x.status, text());
  io.field("method", x.method, text());
  io.field("stopped_by", x.stopped_by, text());
  io.field("makespan_s", x.makespan_s, seconds());
  io.field("lower_bound_s", x.lower_bound_s, seconds());
  io.field("gap", x.gap, number(Format::ratio, Range::finite));
  io.field("heuristic_makespan_s", x.heuristic_makespan_s, seconds());
  io.field("list_evaluations", x.list_evaluations, count());
  io.field("order_evaluations", x.order_evaluations, count());
  io.field("milp_solves", x.milp_solves, count());
  io.field("milp_nodes", x.milp_nodes, count());
  io.object("limits", x.limits, [](auto& sub, auto& l) {
    sub.field("max_nodes", l.max_nodes, count());
    sub.field("max_seconds", l.max_seconds, number(Format::raw, Range::nonnegative));
  });
  io.field("activation_budget_bytes", x.activation_budget_bytes, bytes().nullable_or_absent());
  io.field("peak_activation_bytes", x.peak_activation_bytes, bytes().defaulted());
  io.objects(
      "memory_curve", x.memory_curve,
      [](auto& sub, auto& point) {
        sub.field("activation_budget_bytes", point.activation_budget_bytes, bytes());
        sub.field("makespan_s", point.makespan_s, seconds());
      },
      Need::defaulted);
}

template <class IO, class T>
void cost_model_keys(IO& io, T& x) {
  io.field("overlap_comm", x.overlap_comm, flag());
  io.field("allreduce", x.allreduce, choice({"ring", "hierarchical"}));
  io.field("time_quantum_s", x.time_quantum_s, number(Format::raw, Range::positive));
  io.field("compute_scale", x.compute_scale, scale_factor());
  io.field("link_scale", x.link_scale, scale_factor());
  io.objects("derived_times", x.derived_times, [](auto& sub, auto& d) {
    sub.field("device_type", d.device_type, text());
    sub.field("from_device_type", d.from_device_type, text());
    sub.field("rule", d.rule, text());
    sub.field("device_spec", d.device_spec, text());
    sub.field("from_device_spec", d.from_device_spec, text());
  });
}

template <class IO, class T>
void comm_keys(IO& io, T& x) {
  io.field("p2p_bytes_per_iteration", x.p2p_bytes_per_iteration, bytes());
  io.field("skip_bytes_per_iteration", x.skip_bytes_per_iteration, bytes());
  io.field("activation_bytes_per_iteration", x.activation_bytes_per_iteration, bytes());
  io.field("carried_bytes_per_iteration", x.carried_bytes_per_iteration, bytes());
  io.object("p2p_bytes_per_microbatch_per_pipeline", x.p2p_bytes_per_microbatch_per_pipeline,
            [](auto& sub, auto& b) { bytes_keys(sub, b); });
  io.byte_map("p2p_bytes_per_link_class", x.p2p_bytes_per_link_class);
  io.field("allreduce_bytes_per_iteration", x.allreduce_bytes_per_iteration, bytes());
}

template <class IO, class T>
void breakdown_keys(IO& io, T& m) {
  io.field("weights", m.weights, bytes().defaulted());
  io.field("gradients", m.gradients, bytes().defaulted());
  io.field("optimizer", m.optimizer, bytes().defaulted());
  io.field("activations", m.activations, bytes().defaulted());
  io.field("skip_cache", m.skip_cache, bytes().defaulted());
  io.field("workspace", m.workspace, bytes().defaulted());
}

template <class IO, class T>
void device_prediction_keys(IO& io, T& d) {
  io.field("device", d.device, index(IndexOf::device));
  io.field("compute_s", d.compute_s, seconds());
  io.field("send_s", d.send_s, seconds());
  io.field("idle_s", d.idle_s, seconds());
  io.field("allreduce_s", d.allreduce_s, seconds());
  io.field("max_inflight", d.max_inflight, count());
  io.field("peak_memory_bytes", d.peak_memory_bytes, bytes());
  io.field("capacity_bytes", d.capacity_bytes, bytes());
  io.object("memory", d.memory, [](auto& sub, auto& m) { breakdown_keys(sub, m); });
}

template <class IO, class T>
void predicted_keys(IO& io, T& x) {
  io.field("iteration_s", x.iteration_s, number(Format::seconds, Range::positive));
  io.field("samples_per_s", x.samples_per_s, number(Format::rate, Range::positive));
  io.field("bubble_ratio", x.bubble_ratio, number(Format::ratio, Range::nonnegative));
  io.field("pipeline_makespan_s", x.pipeline_makespan_s, seconds());
  io.field("allreduce_exposed_s", x.allreduce_exposed_s, seconds());
  io.list("peak_memory_bytes", x.peak_memory_bytes, bytes());
  io.objects("devices", x.devices, [](auto& sub, auto& d) { device_prediction_keys(sub, d); });
}

template <class IO, class T>
void rank_keys(IO& io, T& r) {
  io.field("rank", r.rank, rank_id());
  io.field("node", r.node, rank_id());
  io.field("local_device", r.local_device, rank_id());
  io.field("dp_index", r.dp_index, rank_id());
  io.field("pipeline_device", r.pipeline_device, rank_id());
}

template <class IO, class T>
void rank_map_keys(IO& io, T& x) {
  io.field("world_size", x.world_size, rank_count());
  io.objects("ranks", x.ranks, [](auto& sub, auto& r) { rank_keys(sub, r); });
  io.groups("pipeline_groups", x.pipeline_groups);
  io.groups("data_parallel_groups", x.data_parallel_groups);
  io.list("unused_ranks", x.unused_ranks, rank_id().defaulted());
  io.object("placement", x.placement, [](auto& sub, auto& p) {
    sub.field("topology_aware", p.topology_aware, flag());
    sub.field("note", p.note, note());
    sub.list("boundary_links", p.boundary_links, text().defaulted());
  });
  io.groups("sequence_groups", x.sequence_groups);
}

template <class IO, class T>
void candidate_keys(IO& io, T& k) {
  io.field("pp", k.pp, count(1));
  io.field("dp", k.dp, count(1));
  io.field("microbatch_size", k.microbatch_size, count(1));
  io.field("num_microbatches", k.num_microbatches, count());
  io.field("feasible", k.feasible, flag());
  io.field("chosen", k.chosen, flag());
  io.field("synthesized", k.synthesized, flag());
  io.field("iteration_s", k.iteration_s, seconds());
  io.field("samples_per_s", k.samples_per_s, number(Format::rate, Range::nonnegative));
  io.field("step_s", k.step_s, seconds());
  io.field("peak_memory_bytes", k.peak_memory_bytes, bytes());
  io.field("reason", k.reason, text());
  io.field("family", k.family, text());
  io.field("zero_stage", k.zero_stage, count().at_most(3, "the ZeRO stages 0 to 3"));
}

// The figures of an alternative the plan was weighed against (a sharded answer, a
// recomputation mode), or why it has none.
template <class IO, class T>
void answer_figure_keys(IO& io, T& a) {
  io.field("microbatch_size", a.microbatch_size, count(1));
  io.field("iteration_s", a.iteration_s, seconds());
  io.field("samples_per_s", a.samples_per_s, number(Format::rate, Range::nonnegative));
  io.field("peak_memory_bytes", a.peak_memory_bytes, bytes());
  io.field("reason", a.reason, text());
}

template <class IO, class T>
void sharded_keys(IO& io, T& a) {
  io.field("zero_stage", a.zero_stage, count());
  io.field("dp", a.dp, count(1));
  io.field("feasible", a.feasible, flag());
  answer_figure_keys(io, a);
  io.field("frozen_s", a.frozen_s, seconds());
  io.field("step_s", a.step_s, seconds());
  io.field("frozen_reason", a.frozen_reason, text());
}

template <class IO, class T>
void pipeline_or_not_keys(IO& io, T& x) {
  io.field("verdict", x.verdict, choice({"pipeline", "data parallel", "sharded data parallel"}));
  io.field("note", x.note, note());
  io.objects(
      "sharded", x.sharded, [](auto& sub, auto& a) { sharded_keys(sub, a); }, Need::defaulted);
  io.field("layout", x.layout, text());
  io.field("layout_note", x.layout_note, note());
}

template <class IO, class T>
void recompute_answer_keys(IO& io, T& a) {
  io.field("mode", a.mode, choice({"none", "selective", "full"}));
  io.field("layers", a.layers, count());
  io.field("feasible", a.feasible, flag());
  io.field("pp", a.pp, count(1));
  answer_figure_keys(io, a);
}

template <class IO, class T>
void recompute_search_keys(IO& io, T& x) {
  io.field("chosen", x.chosen, choice({"none", "selective", "full"}));
  io.field("note", x.note, note());
  io.objects("modes", x.modes, [](auto& sub, auto& a) { recompute_answer_keys(sub, a); });
}

template <class IO, class T>
void alternative_keys(IO& io, T& a) {
  io.field("axis", a.axis, text());
  io.field("label", a.label, text());
  io.field("strategy", a.strategy, text());
  io.field("recompute", a.recompute, choice({"none", "selective", "full"}));
  io.field("zero_stage", a.zero_stage, count().at_most(3, "the ZeRO stages 0 to 3"));
  io.field("precision", a.precision, text());  // options.memory.precision's vocabulary
  io.field("adoptable", a.adoptable, flag());
  io.field("feasible", a.feasible, flag());
  io.field("chosen", a.chosen, flag());
  io.field("pp", a.pp, count(1));
  io.field("dp", a.dp, count(1));
  io.field("family", a.family, text());
  io.field("configuration", a.configuration, text());
  io.field("p2p_bytes_per_iteration", a.p2p_bytes_per_iteration, bytes());
  io.field("recomputed_layers", a.recomputed_layers, count());
  io.field("sequence", a.sequence, text());
  answer_figure_keys(io, a);
  io.field("step_s", a.step_s, seconds());
}

template <class IO, class T>
void certificate_keys(IO& io, T& x) {
  io.field("bound_s", x.bound_s, seconds());
  io.field("binding", x.binding,
           choice({"device_work", "critical_path", "fill_drain", "allreduce", "memory"}));
  io.field("gap", x.gap, number(Format::ratio, Range::positive));
  io.field("device_work_s", x.device_work_s, seconds());
  io.field("critical_path_s", x.critical_path_s, seconds());
  io.field("fill_drain_s", x.fill_drain_s, seconds());
  io.field("allreduce_s", x.allreduce_s, seconds());
  io.field("memory_s", x.memory_s, seconds());
  io.object("partition", x.partition, [](auto& sub, auto& c) {
    sub.field("largest_layer_s", c.largest_layer_s, seconds());
    sub.field("average_device_load_s", c.average_device_load_s, seconds());
    sub.field("bound_s", c.bound_s, seconds());
    sub.field("gap", c.gap, number(Format::ratio, Range::positive));
  });
  io.objects(
      "published", x.published,
      [](auto& sub, auto& g) {
        sub.field("schedule", g.schedule, text());
        sub.field("feasible", g.feasible, flag());
        sub.field("iteration_s", g.iteration_s, seconds());
        sub.field("gap", g.gap, number(Format::ratio, Range::positive));
        sub.field("reason", g.reason, text());
      },
      Need::defaulted);
}

template <class IO, class T>
void frozen_keys(IO& io, T& x) {
  io.field("placement", x.placement, choice({"cached", "before_step", "bubbles"}));
  io.field("option", x.option, choice({"auto", "cached", "before_step", "bubbles"}));
  io.list("components", x.components, text());
  io.field("samples", x.samples, count(1));
  io.field("before_step_s", x.before_step_s, seconds());
  io.field("bubble_s", x.bubble_s, seconds());
  io.field("step_s", x.step_s, number(Format::seconds, Range::positive));
  io.field("samples_per_s", x.samples_per_s, number(Format::rate, Range::positive));
  io.field("cached_bytes_per_sample", x.cached_bytes_per_sample, bytes());
  io.list("weight_bytes", x.weight_bytes, bytes());
  io.list("activation_bytes", x.activation_bytes, bytes());
  io.field("note", x.note, note());
  io.objects("placements", x.placements, [](auto& sub, auto& p) {
    sub.field("placement", p.placement, choice({"cached", "before_step", "bubbles"}));
    sub.field("feasible", p.feasible, flag());
    sub.field("before_step_s", p.before_step_s, seconds());
    sub.field("step_s", p.step_s, seconds());
    sub.field("reason", p.reason, text());
  });
  io.objects(
      "ops", x.ops,
      [](auto& sub, auto& o) {
        sub.field("component", o.component, text());
        sub.field("device", o.device, index(IndexOf::device));
        sub.field("slot", o.slot, choice({"before_step", "bubble"}));
        sub.field("start_s", o.start_s, seconds());
        sub.field("end_s", o.end_s, seconds());
        sub.field("first_sample", o.first_sample, count());
        sub.field("samples", o.samples, count(1));
        sub.field("gap_start_s", o.gap_start_s, seconds());
        sub.field("gap_end_s", o.gap_end_s, seconds());
      },
      Need::defaulted);
}

template <class IO, class T>
void bucket_row_keys(IO& io, T& b) {
  io.field("name", b.name, note());
  io.field("frames", b.frames, count());
  io.field("height", b.height, count());
  io.field("width", b.width, count());
  io.field("tokens", b.tokens, count(1));
  io.field("share", b.share, number(Format::ratio, Range::positive));
  io.field("microbatch_size", b.microbatch_size, count(1));
  io.field("num_microbatches", b.num_microbatches, count(1));
  io.field("family", b.family, text());
  io.field("iteration_s", b.iteration_s, seconds());
  io.field("samples_per_s", b.samples_per_s, number(Format::rate, Range::nonnegative));
  io.field("bubble_ratio", b.bubble_ratio, number(Format::ratio, Range::nonnegative));
  io.field("peak_memory_bytes", b.peak_memory_bytes, bytes());
  io.field("largest_plan_iteration_s", b.largest_plan_iteration_s, seconds());
}

// `plan --buckets` (docs/buckets.md).
template <class IO, class T>
void buckets_keys(IO& io, T& x) {
  io.field("file", x.file, text());
  io.field("sha256", x.sha256, sha256());
  io.field("name", x.name, note());
  io.field("source", x.source, note());
  io.field("share_of", x.share_of, choice({"samples", "steps"}));
  io.field("profile_tokens", x.profile_tokens, count(1));
  io.field("body", x.body, count());
  io.field("partition_from", x.partition_from, choice({"largest", "average"}));
  io.field("weighted_iteration_s", x.weighted_iteration_s, seconds());
  io.field("weighted_samples_per_s", x.weighted_samples_per_s,
           number(Format::rate, Range::nonnegative));
  io.field("largest_plan_samples_per_s", x.largest_plan_samples_per_s,
           number(Format::rate, Range::nonnegative));
  io.field("capacity_bytes", x.capacity_bytes, bytes());
  io.objects("candidates", x.candidates, [](auto& sub, auto& c) {
    sub.field("from", c.from, choice({"largest", "average"}));
    sub.field("feasible", c.feasible, flag());
    sub.field("chosen", c.chosen, flag());
    sub.field("weighted_samples_per_s", c.weighted_samples_per_s,
              number(Format::rate, Range::nonnegative));
    sub.field("reason", c.reason, note());
  });
  io.objects("rows", x.rows, [](auto& sub, auto& b) { bucket_row_keys(sub, b); });
}

// The whole plan. `schema` is checked before anything else (plan_codec.cpp), so it is
// written here and not read. The degrees come before every index they bound.
template <class IO, class P>
void all_keys(IO& io, P& p) {
  io.object("generator", p.generator, [](auto& sub, auto& x) { generator_keys(sub, x); });
  io.object("inputs", p.inputs, [](auto& sub, auto& x) { inputs_keys(sub, x); });
  io.object("options", p.options, [](auto& sub, auto& x) { options_keys(sub, x); });
  io.object("chosen", p.chosen, [](auto& sub, auto& x) { chosen_keys(sub, x); });
  io.object("parallelism", p.parallelism, [](auto& sub, auto& x) { parallelism_keys(sub, x); });
  io.object("partition", p.partition, [](auto& sub, auto& x) { partition_keys(sub, x); });
  io.objects(
      "stages", p.stages, [](auto& sub, auto& x) { stage_keys(sub, x); }, Need::required,
      Length::num_stages);
  io.objects("devices", p.devices, [](auto& sub, auto& x) { device_keys(sub, x); });
  io.objects("skips", p.skips, [](auto& sub, auto& x) { skip_keys(sub, x); });
  io.objects("carried", p.carried, [](auto& sub, auto& x) { carried_keys(sub, x); });
  io.objects("transfers", p.transfers, [](auto& sub, auto& x) { transfer_keys(sub, x); });
  io.device_schedules("schedule", p.schedule, [](auto& sub, auto& x) { op_keys(sub, x); });
  io.object("schedule_info", p.schedule_info,
            [](auto& sub, auto& x) { schedule_info_keys(sub, x); });
  io.object("solver", p.solver, [](auto& sub, auto& x) { solver_keys(sub, x); });
  io.object("cost_model", p.cost_model, [](auto& sub, auto& x) { cost_model_keys(sub, x); });
  io.object("comm", p.comm, [](auto& sub, auto& x) { comm_keys(sub, x); });
  io.object("predicted", p.predicted, [](auto& sub, auto& x) { predicted_keys(sub, x); });
  io.object("rank_map", p.rank_map, [](auto& sub, auto& x) { rank_map_keys(sub, x); });
  io.objects(
      "search", p.search, [](auto& sub, auto& x) { candidate_keys(sub, x); }, Need::defaulted);
  io.object("pipeline_or_not", p.pipeline_or_not,
            [](auto& sub, auto& x) { pipeline_or_not_keys(sub, x); });
  io.object("recompute_search", p.recompute_search,
            [](auto& sub, auto& x) { recompute_search_keys(sub, x); });
  io.objects("alternatives", p.alternatives, [](auto& sub, auto& x) { alternative_keys(sub, x); });
  io.object("certificate", p.certificate, [](auto& sub, auto& x) { certificate_keys(sub, x); });
  io.object("frozen", p.frozen, [](auto& sub, auto& x) { frozen_keys(sub, x); });
  io.object("buckets", p.buckets, [](auto& sub, auto& x) { buckets_keys(sub, x); });
  io.list("warnings", p.warnings, note().defaulted());
}

}  // namespace

void op_keys(PlanWriter& io, const PlanOp& op) {
  op_keys<PlanWriter, const PlanOp>(io, op);
}

void op_keys(PlanReader& io, PlanOp& op) {
  op_keys<PlanReader, PlanOp>(io, op);
}

void plan_keys(PlanWriter& io, const Plan& plan) {
  io.field("schema", plan.schema, text());
  all_keys(io, plan);
}

void plan_keys(PlanReader& io, Plan& plan) {
  all_keys(io, plan);
}

void plan_keys(KeyLister& io, const Plan& plan) {
  io.field("schema", plan.schema, text());
  all_keys(io, plan);
}

void degree_keys(PlanReader& io, Plan& plan) {
  io.object("parallelism", plan.parallelism, [](auto& sub, auto& x) {
    sub.field("pp", x.pp, pp_spec());
    sub.field("dp", x.dp, dp_spec());
    sub.field("num_microbatches", x.num_microbatches, microbatches_spec());
    sub.field("num_stages", x.num_stages, stages_spec());
  });
}

void figure_keys(PlanWriter& io, const Plan& plan) {
  io.object("comm", plan.comm, [](auto& sub, auto& x) { comm_keys(sub, x); });
  io.object("predicted", plan.predicted, [](auto& sub, auto& x) { predicted_keys(sub, x); });
}

}  // namespace pulse::detail
