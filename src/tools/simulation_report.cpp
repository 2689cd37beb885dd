// The simulation report (simulation_report.hpp): as text, and as JSON.
#include "pulse/tools/simulation_report.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pulse/base/io.hpp"
#include "pulse/base/text.hpp"
#include "pulse/base/units.hpp"
#include "pulse/plan/buckets_view.hpp"
#include "pulse/plan/certificate.hpp"
#include "pulse/tools/frozen_check.hpp"

namespace pulse {

namespace {

std::string gib(std::int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

// The certificate of the replayed stages: the plan's memory term still holds on its own
// costs; the others are recomputed (a what-if replay moves them).
PlanCertificate replayed_certificate(const Plan& plan, const Replay& r) {
  std::vector<double> allreduce;
  for (const AllReduce& a : r.evaluation.allreduce) allreduce.push_back(a.seconds);
  std::optional<double> memory;
  if (r.own_costs && plan.certificate) memory = plan.certificate->memory_s;
  PlanCertificate c = iteration_bounds(r.model, plan.parallelism.num_microbatches,
                                       r.schedule.split_backward, allreduce, memory);
  if (r.own_costs && plan.certificate) {
    c.partition = plan.certificate->partition;
    c.published = plan.certificate->published;
  }
  return with_gap(std::move(c), r.evaluation.iteration_s);
}

}  // namespace

namespace {

// The plan's frozen encoders against the replayed timeline (tools/frozen_check.hpp): the
// step with them, and whether every bubble op still fits an idle gap of the replay.
std::string frozen_line(const Plan& plan, const Replay& r) {
  const PlanFrozen& f = *plan.frozen;
  const std::vector<std::string> problems = check_frozen_plan({&plan, &r.timeline});
  const auto bubbles = std::count_if(f.ops.begin(), f.ops.end(),
                                     [](const FrozenOp& o) { return o.slot == "bubble"; });
  return fmt::format("  frozen      {:>12}  ({}: +{} before the step, {} in {} bubble ops; {})",
                     format_seconds(r.evaluation.iteration_s + f.before_step_s), f.placement,
                     format_seconds(f.before_step_s), format_seconds(f.bubble_s), bubbles,
                     problems.empty()
                         ? "every op fits the replayed timeline"
                         : fmt::format("{} problem{} with the replay, first: {}", problems.size(),
                                       problems.size() == 1 ? "" : "s", problems.front()));
}

}  // namespace

std::string simulation_report_text(const std::string& name, const Plan& plan, const Replay& r,
                                   const std::vector<FigureDifference>& differences) {
  const PlanParallelism& par = plan.parallelism;
  const Evaluation& e = r.evaluation;
  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  line(fmt::format("{}: replayed with {}", name, r.cost_source));
  line(fmt::format("  {} {}, {}, microbatch size {}, {} microbatches, global batch {}{}",
                   plan.inputs.model.name.empty() ? "plan" : plan.inputs.model.name,
                   plan.options.strategy ? "(" + *plan.options.strategy + ")" : "", plan.layout(),
                   par.microbatch_size, par.num_microbatches, par.global_batch,
                   r.schedule.split_backward ? ", split backward" : ""));
  line(fmt::format("  verdict     {}{}", plan.verdict(),
                   plan.pipeline_or_not && !plan.pipeline_or_not->note.empty()
                       ? ": " + plan.pipeline_or_not->note
                       : ""));
  const double exposed = e.iteration_s - r.timeline.makespan_s;
  line(fmt::format("  iteration   {:>12}  (pipeline {} + exposed all-reduce {})",
                   format_seconds(e.iteration_s), format_seconds(r.timeline.makespan_s),
                   format_seconds(exposed)));
  line(fmt::format("  throughput  {:>12.2f}  samples/s", e.samples_per_s));
  line(fmt::format("  bubble      {:>11.1f}%  of pipeline device time idle", 100 * e.bubble_ratio));
  line("  " + certificate_line(replayed_certificate(plan, r)));
  if (plan.frozen) line(frozen_line(plan, r));
  line("");
  line(
      "  device  compute_s  send_s  idle_s  allreduce_s  in-flight  peak GiB = weights + grads "
      "+ optim + activ + skips  capacity GiB");
  for (int d = 0; d < par.pp; ++d) {
    const DeviceTimeline& t = r.timeline.devices[d];
    const MemoryBreakdown& m = t.peak;
    line(fmt::format(
        "  {:>6}  {:>9.6f}  {:>6.4f}  {:>6.4f}  {:>11.6f}  {:>9}  {:>8} = {:>7} + "
        "{:>5} + {:>5} + {:>5} + {:>5}  {:>12}",
        d, t.compute_s, t.send_s, t.idle_s, e.allreduce[d].seconds, t.max_inflight, gib(m.total()),
        gib(m.weights), gib(m.gradients), gib(m.optimizer), gib(m.activations), gib(m.skip_cache),
        r.capacity_bytes > 0 ? gib(r.capacity_bytes) : "-"));
  }
  for (int d = 0; d < par.pp; ++d) {
    const std::int64_t peak = r.timeline.devices[d].peak.total();
    if (r.capacity_bytes > 0 && peak > r.capacity_bytes) {
      line(fmt::format("  device {} does not fit: peak {} exceeds the usable {} by {}", d,
                       format_bytes(peak), format_bytes(r.capacity_bytes),
                       format_bytes(peak - r.capacity_bytes)));
    }
  }
  line("");
  const PlanComm& comm = r.figures.comm;
  line(fmt::format("  P2P per iteration  {} (activations {}, skips {}, carried {})",
                   format_bytes(comm.p2p_bytes_per_iteration),
                   format_bytes(comm.activation_bytes_per_iteration.value_or(0)),
                   format_bytes(comm.skip_bytes_per_iteration),
                   format_bytes(comm.carried_bytes_per_iteration.value_or(0))));
  std::string classes;
  for (const auto& [cls, bytes] :
       comm.p2p_bytes_per_link_class.value_or(std::map<std::string, std::int64_t>{})) {
    classes += fmt::format("{}{} {}", classes.empty() ? "" : ", ", cls, format_bytes(bytes));
  }
  line(fmt::format("  by link class      {}", classes.empty() ? "none" : classes));
  line(fmt::format("  all-reduce         {}",
                   format_bytes(comm.allreduce_bytes_per_iteration.value_or(0))));
  if (plan.buckets) {  // as planned: the replay above is the largest bucket's (the body)
    line("");
    line("  " + buckets_headline(*plan.buckets) + "; as planned, the replay above is bucket " +
         plan.buckets->rows.at(plan.buckets->body).name + "'s");
    for (const std::string& l : bucket_lines(*plan.buckets)) line("    " + l);
  }
  line("");
  if (differences.empty()) {
    line("  matches the plan's comm and predicted figures");
  } else {
    line(fmt::format("  {} figure{} differ{} from the plan's (plan -> replay):", differences.size(),
                     differences.size() == 1 ? "" : "s", differences.size() == 1 ? "s" : ""));
    for (const FigureDifference& d : differences) {
      line(fmt::format("    {}: {} -> {}", d.path, d.plan, d.replay));
    }
  }
  return printable(out, LineBreaks::keep);  // names from the plan, shown on a terminal
}

namespace {

// The plan's frozen ops against the replay, for the JSON report: the placement, the step on
// the replayed iteration, every op as the plan lists it, and what the check found.
nlohmann::ordered_json frozen_json(const Plan& plan, const Replay& r) {
  const PlanFrozen& f = *plan.frozen;
  const double step = r.evaluation.iteration_s + f.before_step_s;
  nlohmann::ordered_json out;
  out["placement"] = f.placement;
  out["before_step_s"] = f.before_step_s;
  out["bubble_s"] = f.bubble_s;
  out["step_s"] = step;
  out["samples_per_s"] = step > 0 ? plan.parallelism.global_batch / step : 0.0;
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const FrozenOp& o : f.ops) {
    nlohmann::ordered_json op = {{"component", o.component}, {"device", o.device},
                                 {"slot", o.slot},           {"start_s", o.start_s},
                                 {"end_s", o.end_s},         {"first_sample", o.first_sample},
                                 {"samples", o.samples}};
    if (o.gap_start_s) op["gap_start_s"] = *o.gap_start_s;
    if (o.gap_end_s) op["gap_end_s"] = *o.gap_end_s;
    ops.push_back(std::move(op));
  }
  out["ops"] = std::move(ops);
  out["problems"] = check_frozen_plan({&plan, &r.timeline});
  return out;
}

// A buckets plan's rows as planned (the replay above them is the body's, the largest
// bucket's): each bucket's microbatching, schedule family and figures, and the weighted
// throughput.
nlohmann::ordered_json buckets_json(const PlanBuckets& b) {
  nlohmann::ordered_json out;
  out["replayed"] = b.rows.at(b.body).name;
  out["weighted_samples_per_s"] = b.weighted_samples_per_s;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const BucketRow& r : b.rows) {
    rows.push_back({{"name", r.name},
                    {"tokens", r.tokens},
                    {"share", r.share},
                    {"microbatch_size", r.microbatch_size},
                    {"num_microbatches", r.num_microbatches},
                    {"family", r.family},
                    {"iteration_s", r.iteration_s},
                    {"samples_per_s", r.samples_per_s},
                    {"peak_memory_bytes", r.peak_memory_bytes},
                    {"largest_plan_iteration_s", r.largest_plan_iteration_s}});
  }
  out["rows"] = std::move(rows);
  return out;
}

}  // namespace

std::string simulation_report_json(const std::string& plan_name, std::string_view plan_text,
                                   const Plan& plan, const Replay& replay,
                                   const std::vector<FigureDifference>& differences) {
  const nlohmann::ordered_json figures = figure_sections(replay.figures);
  nlohmann::ordered_json out;
  out["schema"] = kSimulationSchema;
  out["plan"] = {{"file", plan_name}, {"sha256", sha256_hex(plan_text)}};
  out["cost_source"] = replay.cost_source;
  out["comm"] = figures["comm"];
  out["predicted"] = figures["predicted"];
  if (plan.frozen) out["frozen"] = frozen_json(plan, replay);
  if (plan.buckets) out["buckets"] = buckets_json(*plan.buckets);
  out["matches_plan"] = differences.empty();
  nlohmann::ordered_json diffs = nlohmann::ordered_json::array();
  for (const FigureDifference& d : differences) {
    diffs.push_back({{"path", d.path}, {"plan", d.plan}, {"replay", d.replay}});
  }
  out["differences"] = diffs;
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace pulse
