#include "pulse/tools/diff.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pulse/base/io.hpp"
#include "pulse/base/text.hpp"
#include "pulse/base/units.hpp"
#include "pulse/plan/buckets_view.hpp"

namespace pulse {

namespace {

enum class Better { neither, lower, higher };

std::optional<double> percent_change(double a, double b) {
  if (a == b || a == 0) return std::nullopt;
  return 100.0 * (b - a) / std::fabs(a);
}

std::string percent_delta(double a, double b) {
  if (a == b) return "";
  if (a == 0) return "new";
  const double pct = *percent_change(a, b);
  return std::fabs(pct) < 0.1 ? fmt::format("{:+.3f}%", pct) : fmt::format("{:+.1f}%", pct);
}

// One numeric row's values before it is judged: the texts, the numbers, the delta both ways.
struct NumericRow {
  std::string old_text;
  std::string new_text;
  double old_value = 0;
  double new_value = 0;
  std::string delta;
  std::optional<double> delta_value;
  Better better = Better::neither;
  bool integral = false;
};

// Appends rows of one section; each helper formats both values the same way.
class RowWriter {
 public:
  RowWriter(PlanDiff& d, std::string section) : diff_(d), section_(std::move(section)) {}

  void text(std::string key, std::string label, std::string a, std::string b) {
    DiffRow r;
    r.section = section_;
    r.key = std::move(key);
    r.label = std::move(label);
    r.old_text = printable(a);
    r.new_text = printable(b);
    r.change = r.old_text == r.new_text ? Change::same : Change::changed;
    if (r.change != Change::same) r.delta = "changed";
    diff_.rows.push_back(std::move(r));
  }
  void count(std::string key, std::string label, double a, double b,
             Better better = Better::neither) {
    add(std::move(key), std::move(label),
        {fmt::format("{}", a), fmt::format("{}", b), a, b, fmt::format("{:+}", b - a), b - a,
         better, true});
  }
  void seconds(std::string key, std::string label, double a, double b) {
    add(std::move(key), std::move(label),
        {format_seconds(a), format_seconds(b), a, b, percent_delta(a, b), percent_change(a, b),
         Better::lower});
  }
  void bytes(std::string key, std::string label, std::int64_t a, std::int64_t b) {
    const double x = static_cast<double>(a), y = static_cast<double>(b);
    add(std::move(key), std::move(label),
        {format_bytes(a), format_bytes(b), x, y, percent_delta(x, y), percent_change(x, y),
         Better::lower, true});
  }
  void rate(std::string key, std::string label, double a, double b) {
    add(std::move(key), std::move(label),
        {fmt::format("{:.1f}", a), fmt::format("{:.1f}", b), a, b, percent_delta(a, b),
         percent_change(a, b), Better::higher});
  }
  /// Bytes per second, shown in GB/s (10^9, as link bandwidths are quoted).
  void bandwidth(std::string key, std::string label, double a, double b) {
    add(std::move(key), std::move(label),
        {fmt::format("{:.1f} GB/s", a / 1e9), fmt::format("{:.1f} GB/s", b / 1e9), a, b,
         percent_delta(a, b), percent_change(a, b), Better::higher});
  }
  void ratio(std::string key, std::string label, double a, double b) {
    add(std::move(key), std::move(label),
        {fmt::format("{:.1f}%", 100 * a), fmt::format("{:.1f}%", 100 * b), a, b,
         a == b ? "" : fmt::format("{:+.1f} pp", 100 * (b - a)), 100 * (b - a), Better::lower});
  }

 private:
  // The texts carry names from the plans: every output of a diff (table, JSON, page) shows
  // them printable.
  void add(std::string key, std::string label, NumericRow n) {
    DiffRow r;
    r.section = section_;
    r.key = std::move(key);
    r.label = std::move(label);
    r.old_text = printable(n.old_text);
    r.new_text = printable(n.new_text);
    r.old_value = n.old_value;
    r.new_value = n.new_value;
    r.delta = std::move(n.delta);
    r.integral = n.integral;
    if (n.old_value == n.new_value) {
      r.change = Change::same;
      r.delta.clear();
    } else {
      r.delta_value = n.delta_value;
      r.change = n.better == Better::neither                                  ? Change::changed
                 : (n.better == Better::lower) == (n.new_value < n.old_value) ? Change::better
                                                                              : Change::worse;
    }
    diff_.rows.push_back(std::move(r));
  }

  PlanDiff& diff_;
  std::string section_;
};

std::string placement_text(const Plan& p) {
  std::vector<DeviceId> devices;
  for (const PlanStage& s : p.stages) devices.push_back(s.device);
  return fmt::format("{} [{}]", p.shape(), fmt::join(devices, " "));
}

std::string stage_text(const Plan& p, StageId s) {
  if (s >= p.num_stages()) return "-";
  const PlanStage& st = p.stages[s];
  const std::string span = st.layers.size() == 1
                               ? st.layers.front()
                               : fmt::format("{}..{}", st.layers.front(), st.layers.back());
  return fmt::format("{} ({}) @{}", span, st.layers.size(), st.device);
}

int local_skips(const Plan& p) {
  int n = 0;
  for (const PlanSkip& s : p.skips) n += s.local ? 1 : 0;
  return n;
}

void inputs_and_degrees(PlanDiff& d, const Plan& a, const Plan& b) {
  RowWriter in(d, "inputs");
  in.text("model", "model", a.inputs.model.name, b.inputs.model.name);
  in.text("cluster", "cluster", a.inputs.cluster.name, b.inputs.cluster.name);
  // A profile both plans name but whose bytes differ (diff --allow-changed-inputs): its hashes.
  for (const auto& [key, label, x, y] :
       {std::tuple{"model_sha256", "model sha256", &a.inputs.model, &b.inputs.model},
        std::tuple{"cluster_sha256", "cluster sha256", &a.inputs.cluster, &b.inputs.cluster}}) {
    if (x->sha256 != y->sha256 && x->name == y->name) {
      in.text(key, label, x->sha256.substr(0, 12), y->sha256.substr(0, 12));
    }
  }
  in.text("device_type", "device type", a.parallelism.device_type.value_or(""),
          b.parallelism.device_type.value_or(""));
  in.text("strategy", "strategy", a.strategy(), b.strategy());
  // What-if scales (plan --compute-scale/--link-scale, diff's replay): rows only when a
  // plan's figures assume any, so that unscaled plans diff as they always did.
  const auto factor = [](const Plan& p, double (PlanCostModel::*get)() const) {
    return p.cost_model ? ((*p.cost_model).*get)() : 1.0;
  };
  for (const auto& [key, label, get] :
       {std::tuple{"compute_scale", "compute scale", &PlanCostModel::compute_factor},
        std::tuple{"link_scale", "link scale", &PlanCostModel::link_factor}}) {
    const double x = factor(a, get), y = factor(b, get);
    if (x != 1 || y != 1) in.text(key, label, fmt::format("x{:g}", x), fmt::format("x{:g}", y));
  }
  RowWriter mode(d, "mode");
  mode.text("verdict", "verdict", a.verdict(), b.verdict());
  const MemoryModel ma = a.memory(), mb = b.memory();
  mode.text("zero_stage", "ZeRO stage", fmt::format("ZeRO-{}", ma.zero_stage),
            fmt::format("ZeRO-{}", mb.zero_stage));
  mode.text("recompute", "recompute", a.recompute(), b.recompute());
  mode.text("precision", "precision", ma.precision, mb.precision);
  RowWriter deg(d, "degrees");
  const PlanParallelism &x = a.parallelism, &y = b.parallelism;
  deg.count("pp", "pp", x.pp, y.pp);
  deg.count("dp", "dp", x.dp, y.dp);
  deg.count("microbatch_size", "microbatch size", x.microbatch_size, y.microbatch_size);
  deg.count("num_microbatches", "microbatches", x.num_microbatches, y.num_microbatches);
  deg.count("global_batch", "global batch", x.global_batch, y.global_batch);
  if (a.pp() > 1 || b.pp() > 1) deg.count("num_stages", "stages", a.num_stages(), b.num_stages());
  deg.count("devices_used", "devices used", x.pp * x.dp, y.pp * y.dp);
  for (const DiffRow& r : d.rows) {
    if (r.section == "degrees" && r.change != Change::same) d.changed_degrees.push_back(r.key);
  }
}

// Both plans without a pipeline: one device runs the whole model, so there are no stages,
// placements or moved layers to compare.
bool no_pipelines(const Plan& a, const Plan& b) {
  return a.pp() == 1 && b.pp() == 1;
}

void placement_and_stages(PlanDiff& d, const Plan& a, const Plan& b) {
  if (no_pipelines(a, b)) return;
  RowWriter pl(d, "placement");
  pl.text("family", "family", a.partition.family.value_or("-"), b.partition.family.value_or("-"));
  pl.text("partition_method", "partition", a.partition.method, b.partition.method);
  pl.text("stage_devices", "stage -> device", placement_text(a), placement_text(b));
  auto ranks = [](const Plan& p) {
    return p.rank_map.pipeline_groups.empty()
               ? std::string("-")
               : fmt::format("[{}]", fmt::join(p.rank_map.pipeline_groups.front(), " "));
  };
  pl.text("pipeline0_ranks", "pipeline 0 ranks", ranks(a), ranks(b));
  pl.text("skips_local", "skips local", fmt::format("{}/{}", local_skips(a), a.skips.size()),
          fmt::format("{}/{}", local_skips(b), b.skips.size()));
  RowWriter st(d, "stages");
  for (StageId s = 0; s < std::max(a.num_stages(), b.num_stages()); ++s) {
    st.text(fmt::format("stage{}", s), fmt::format("stage {}", s), stage_text(a, s),
            stage_text(b, s));
  }
}

// The plan's certificate in a cell: its bound, the term that binds, the plan's gap to it.
std::string certificate_text(const Plan& p) {
  if (!p.certificate) return "-";
  const PlanCertificate& c = *p.certificate;
  return fmt::format("{} ({}), {:.3f}x", format_seconds(c.bound_s), c.binding, c.gap);
}

void schedule_and_time(PlanDiff& d, const Plan& a, const Plan& b) {
  RowWriter sc(d, "schedule");
  sc.text("policy", "policy", a.schedule_info.policy.value_or(""),
          b.schedule_info.policy.value_or(""));
  sc.text("split_backward", "split backward", a.split_backward() ? "yes" : "no",
          b.split_backward() ? "yes" : "no");
  sc.count("ops", "operations", static_cast<double>(a.num_ops()), static_cast<double>(b.num_ops()));
  sc.seconds("makespan_s", "makespan", a.schedule_info.makespan_s.value_or(0),
             b.schedule_info.makespan_s.value_or(0));
  RowWriter t(d, "time");
  const PlanPredicted &x = a.predicted, &y = b.predicted;
  t.seconds("iteration_s", "iteration", x.iteration_s, y.iteration_s);
  t.rate("samples_per_s", "samples/s", x.samples_per_s, y.samples_per_s);
  t.ratio("bubble_ratio", "bubble", x.bubble_ratio, y.bubble_ratio);
  t.seconds("allreduce_exposed_s", "all-reduce exposed", x.allreduce_exposed_s.value_or(0),
            y.allreduce_exposed_s.value_or(0));
  // Plans from before certificates have none: their diff stays as it was.
  if (a.certificate || b.certificate) {
    t.text("certificate", "bound (gap)", certificate_text(a), certificate_text(b));
  }
}

// Plans made with --buckets: the weighted throughput, and each bucket (by name) in either.
void buckets_rows(PlanDiff& d, const Plan& a, const Plan& b) {
  if (!a.buckets && !b.buckets) return;
  RowWriter w(d, "buckets");
  const auto weighted = [](const Plan& p) {
    return p.buckets ? p.buckets->weighted_samples_per_s : p.predicted.samples_per_s;
  };
  w.rate("weighted_samples_per_s", "weighted samples/s", weighted(a), weighted(b));
  const auto cell = [](const Plan& p, const std::string& name) -> std::string {
    if (!p.buckets) return "-";
    for (const BucketRow& r : p.buckets->rows) {
      if (r.name == name) return bucket_cell(r);
    }
    return "-";
  };
  std::vector<std::string> names;
  for (const Plan* p : {&a, &b}) {
    if (!p->buckets) continue;
    for (const BucketRow& r : p->buckets->rows) {
      if (std::find(names.begin(), names.end(), r.name) == names.end()) names.push_back(r.name);
    }
  }
  for (const std::string& name : names) {
    w.text("bucket " + name, "bucket " + name, cell(a, name), cell(b, name));
  }
}

// Plans of a model with frozen encoders (docs/frozen.md): where each side runs them and the
// step with them. A plan without them reads as cached: its step is its iteration.
void frozen_rows(PlanDiff& d, const Plan& a, const Plan& b) {
  if (!a.frozen && !b.frozen) return;
  RowWriter w(d, "frozen");
  const auto placement = [](const Plan& p) { return p.frozen ? p.frozen->placement : "none"; };
  const auto step = [](const Plan& p) {
    return p.frozen ? p.frozen->step_s : p.predicted.iteration_s;
  };
  const auto rate = [](const Plan& p) {
    return p.frozen ? p.frozen->samples_per_s : p.predicted.samples_per_s;
  };
  w.text("placement", "frozen placement", placement(a), placement(b));
  w.seconds("before_step_s", "frozen before the step", a.frozen ? a.frozen->before_step_s : 0,
            b.frozen ? b.frozen->before_step_s : 0);
  // Hidden work is neither better nor worse by itself: the step says which side is faster.
  const auto hidden = [](const Plan& p) {
    return format_seconds(p.frozen ? p.frozen->bubble_s : 0);
  };
  w.text("bubble_s", "frozen in bubbles", hidden(a), hidden(b));
  w.seconds("step_s", "step", step(a), step(b));
  w.rate("samples_per_s", "samples/s per step", rate(a), rate(b));
}

// Device time per sample of one plan: every pipeline device's time over an iteration
// (compute, blocked sends, idle, the exposed all-reduce) over the samples one pipeline
// takes. It adds up to devices used / samples/s, so it says why throughput changed even
// across microbatch sizes and device counts, where per-stage times do not compare.
struct SampleTime {
  bool known = false;
  double device_s = 0;
  double compute_s = 0;
  double send_s = 0;
  double idle_s = 0;
  double allreduce_s = 0;
};

SampleTime sample_time(const Plan& p) {
  SampleTime t;
  const PlanParallelism& par = p.parallelism;
  const double samples = static_cast<double>(par.microbatch_size) * par.num_microbatches;
  if (!p.predicted.devices || samples <= 0 || p.predicted.samples_per_s <= 0) return t;
  for (const PlanDevicePrediction& dev : *p.predicted.devices) {
    t.compute_s += dev.compute_s.value_or(0) / samples;
    t.send_s += dev.send_s.value_or(0) / samples;
    t.idle_s += dev.idle_s.value_or(0) / samples;
  }
  t.allreduce_s = p.predicted.allreduce_exposed_s.value_or(0) * par.pp / samples;
  t.device_s = static_cast<double>(par.pp) * par.dp / p.predicted.samples_per_s;
  t.known = true;
  return t;
}

// Point-to-point bytes over link time (latency included) of the plan's transfers, both
// directions: per link class, and "" for all of them.
std::map<std::string, std::pair<double, double>> link_use(const Plan& p) {
  std::map<std::string, std::pair<double, double>> out;
  const auto add = [&out](const std::optional<std::string>& link, const Bytes& bytes,
                          const std::optional<double>& seconds) {
    if (!seconds || *seconds <= 0 || bytes.total() <= 0) return;
    for (const std::string& key : {std::string(), link.value_or("unnamed")}) {
      out[key].first += static_cast<double>(bytes.total());
      out[key].second += *seconds;
    }
  };
  for (const PlanTransfer& t : p.transfers) {
    add(t.forward_link, t.forward, t.forward_s);
    add(t.backward_link, t.backward, t.backward_s);
  }
  return out;
}

void per_sample(PlanDiff& d, const Plan& a, const Plan& b) {
  RowWriter ps(d, "per sample");
  const SampleTime x = sample_time(a), y = sample_time(b);
  if (x.known && y.known) {
    ps.seconds("device_time_s", "device time", x.device_s, y.device_s);
    ps.seconds("compute_s", "  compute", x.compute_s, y.compute_s);
    ps.seconds("send_s", "  blocked send", x.send_s, y.send_s);
    ps.seconds("idle_s", "  idle", x.idle_s, y.idle_s);
    ps.seconds("allreduce_s", "  exposed all-reduce", x.allreduce_s, y.allreduce_s);
  }
  const auto la = link_use(a), lb = link_use(b);
  std::set<std::string> classes;
  for (const auto* uses : {&la, &lb}) {
    for (const auto& [link, use] : *uses) classes.insert(link);
  }
  for (const std::string& link : classes) {
    const std::string key = link.empty() ? "p2p_bandwidth" : "link_bandwidth." + link;
    const std::string label = link.empty() ? "P2P bandwidth" : "  over " + link;
    const auto ia = la.find(link), ib = lb.find(link);
    if (ia != la.end() && ib != lb.end()) {
      ps.bandwidth(key, label, ia->second.first / ia->second.second,
                   ib->second.first / ib->second.second);
    } else {  // a link class only one plan sends over
      const auto text = [](const auto& uses, const auto& it) {
        return it == uses.end()
                   ? std::string("-")
                   : fmt::format("{:.1f} GB/s", it->second.first / it->second.second / 1e9);
      };
      ps.text(key, label, text(la, ia), text(lb, ib));
    }
  }
}

void traffic_and_memory(PlanDiff& d, const Plan& a, const Plan& b) {
  RowWriter tr(d, "traffic per iteration");
  const PlanComm &x = a.comm, &y = b.comm;
  tr.bytes("p2p_bytes", "point-to-point", x.p2p_bytes_per_iteration, y.p2p_bytes_per_iteration);
  tr.bytes("skip_bytes", "  of it skips", x.skip_bytes_per_iteration, y.skip_bytes_per_iteration);
  tr.bytes("activation_bytes", "  of it activations", x.activation_bytes_per_iteration.value_or(0),
           y.activation_bytes_per_iteration.value_or(0));
  tr.bytes("carried_bytes", "  of it carried", x.carried_bytes_per_iteration.value_or(0),
           y.carried_bytes_per_iteration.value_or(0));
  tr.bytes("allreduce_bytes", "all-reduce", x.allreduce_bytes_per_iteration.value_or(0),
           y.allreduce_bytes_per_iteration.value_or(0));
  tr.bytes("p2p_bytes_per_sample", "point-to-point / sample",
           x.p2p_bytes_per_iteration / std::max(1, a.parallelism.global_batch),
           y.p2p_bytes_per_iteration / std::max(1, b.parallelism.global_batch));
  RowWriter mem(d, "peak memory");
  const auto &pa = a.predicted.peak_memory_bytes, &pb = b.predicted.peak_memory_bytes;
  for (std::size_t i = 0; i < std::max(pa.size(), pb.size()); ++i) {
    const std::string key = fmt::format("device{}", i), label = fmt::format("device {}", i);
    if (i < pa.size() && i < pb.size()) {
      mem.bytes(key, label, pa[i], pb[i]);
    } else {  // a device only one plan has
      mem.text(key, label, i < pa.size() ? format_bytes(pa[i]) : "-",
               i < pb.size() ? format_bytes(pb[i]) : "-");
    }
  }
  auto capacity = [](const Plan& p) {
    const auto& devices = p.predicted.devices;
    return devices && !devices->empty() ? (*devices)[0].capacity_bytes.value_or(0) : 0;
  };
  const auto largest = [](const std::vector<std::int64_t>& peaks) {
    return peaks.empty() ? std::int64_t{0} : *std::max_element(peaks.begin(), peaks.end());
  };
  mem.bytes("largest", "largest", largest(pa), largest(pb));
  mem.bytes("capacity", "capacity", capacity(a), capacity(b));
}

std::vector<LayerMove> moved_layers(const Plan& a, const Plan& b) {
  std::map<std::string, StageId> old_stage;
  for (const auto& [layer, s] : a.layer_stages()) old_stage.emplace(layer, s);
  std::vector<LayerMove> out;
  for (const auto& [layer, s] : b.layer_stages()) {
    const auto it = old_stage.find(layer);
    LayerMove m{layer, -1, s, -1, b.stages[s].device};
    if (it != old_stage.end()) {
      m.old_stage = it->second;
      m.old_device = a.stages[it->second].device;
      old_stage.erase(it);
    }
    if (m.old_stage != m.new_stage || m.old_device != m.new_device) out.push_back(m);
  }
  for (const auto& [layer, s] : a.layer_stages()) {
    if (old_stage.count(layer)) out.push_back({layer, s, -1, a.stages[s].device, -1});
  }
  for (LayerMove& m : out) m.layer = printable(m.layer);
  return out;
}

// "A signed duration": format_seconds takes magnitudes.
std::string signed_seconds(double seconds) {
  return (seconds < 0 ? "-" : "+") + format_seconds(std::fabs(seconds));
}

// Why device time per sample changed: its parts, the largest change first, those under
// 1% of the old total left out.
std::string time_parts(const SampleTime& x, const SampleTime& y) {
  std::vector<std::pair<double, std::string>> parts = {
      {y.compute_s - x.compute_s, "compute"},
      {y.send_s - x.send_s, "blocked send"},
      {y.idle_s - x.idle_s, "idle"},
      {y.allreduce_s - x.allreduce_s, "exposed all-reduce"}};
  std::stable_sort(parts.begin(), parts.end(), [](const auto& p, const auto& q) {
    return std::fabs(p.first) > std::fabs(q.first);
  });
  std::string out;
  for (const auto& [delta, name] : parts) {
    if (std::fabs(delta) < 0.01 * x.device_s) continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, signed_seconds(delta));
  }
  return out;
}

// What changed in how the plans train, "ZeRO-0 -> ZeRO-2, recompute none -> selective", or "".
std::string mode_change(const PlanDiff& d) {
  std::string out;
  for (const DiffRow& r : d.rows) {
    if (r.section != "mode" || r.change == Change::same) continue;
    const bool named = r.key == "zero_stage";  // "ZeRO-0 -> ZeRO-2" names itself
    out += fmt::format("{}{}{} -> {}", out.empty() ? "" : ", ", named ? "" : r.label + " ",
                       r.old_text, r.new_text);
  }
  return out;
}

std::string headline(const PlanDiff& d, const Plan& a, const Plan& b) {
  const std::string& mode = d.mode_change;
  const double ra = a.predicted.samples_per_s, rb = b.predicted.samples_per_s;
  const int na = a.parallelism.pp * a.parallelism.dp, nb = b.parallelism.pp * b.parallelism.dp;
  const std::string devices =
      na == nb ? fmt::format("{} devices", na) : fmt::format("{} -> {} devices", na, nb);
  std::string out = mode.empty() ? "" : mode + ": ";
  out += ra == rb || ra <= 0
             ? fmt::format("{} is as fast as {} ({:.1f} samples/s on {})", d.new_name, d.old_name,
                           rb, devices)
             : fmt::format("{} is {:.1f}% {} than {} ({:.1f} -> {:.1f} samples/s on {})",
                           d.new_name, 100 * std::fabs(rb / ra - 1), rb < ra ? "slower" : "faster",
                           d.old_name, ra, rb, devices);
  const SampleTime x = sample_time(a), y = sample_time(b);
  if (x.known && y.known && x.device_s != y.device_s) {
    const std::string parts = time_parts(x, y);
    out += fmt::format("; device time per sample {} -> {}{}{}", format_seconds(x.device_s),
                       format_seconds(y.device_s), parts.empty() ? "" : ": ", parts);
  }
  for (const auto& [kind, p, q] : {std::tuple{"model", &a.inputs.model, &b.inputs.model},
                                   std::tuple{"cluster", &a.inputs.cluster, &b.inputs.cluster}}) {
    if (p->sha256 != q->sha256 && p->name == q->name) {
      out += fmt::format("; {} profile {} recalibrated (sha256 {} -> {})", kind, p->name,
                         p->sha256.substr(0, 12), q->sha256.substr(0, 12));
    }
  }
  return printable(out);
}

std::vector<DiffGate> gates(const PlanDiff& d, std::optional<double> slower,
                            std::optional<double> traffic) {
  std::vector<DiffGate> out;
  if (slower) {
    DiffGate g{"fail-if-slower", *slower, d.slowdown_pct, d.slowdown_pct > *slower, ""};
    g.reason = fmt::format(
        "{} is {:.1f}% {} than {} (samples/s), {} the --fail-if-slower {} "
        "threshold",
        d.new_name, std::fabs(d.slowdown_pct), d.slowdown_pct < 0 ? "faster" : "slower", d.old_name,
        g.tripped ? "over" : "within", *slower);
    out.push_back(std::move(g));
  }
  if (traffic) {
    const double pct = d.traffic_increase_pct;
    DiffGate g{"fail-if-more-traffic", *traffic, pct, pct > *traffic, ""};
    g.reason = std::isfinite(pct)
                   ? fmt::format(
                         "{} moves {:.1f}% {} point-to-point bytes per sample than {}, "
                         "{} the --fail-if-more-traffic {} threshold",
                         d.new_name, std::fabs(pct), pct < 0 ? "fewer" : "more", d.old_name,
                         g.tripped ? "over" : "within", *traffic)
                   : fmt::format(
                         "{} moves point-to-point bytes, {} moved none "
                         "(--fail-if-more-traffic {})",
                         d.new_name, d.old_name, *traffic);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

Status check_inputs_agree(const Plan& a, const Plan& b) {
  // The same file and name with other bytes is a recalibration (the headline says so); only
  // one set of bytes under two names cannot be true.
  for (const auto& [kind, x, y] : {std::tuple{"model", &a.inputs.model, &b.inputs.model},
                                   std::tuple{"cluster", &a.inputs.cluster, &b.inputs.cluster}}) {
    if (x->sha256 == y->sha256 && (x->name != y->name || x->provenance != y->provenance)) {
      return input_error(fmt::format(
          "diff: {} and {} give their {} profiles the same sha256 ({}...) but different "
          "names or provenance (\"{}\", {} and \"{}\", {}): the same bytes cannot be both, so "
          "one plan's inputs were edited",
          a.file, b.file, kind, x->sha256.substr(0, 12), x->name, x->provenance, y->name,
          y->provenance));
    }
  }
  return Ok{};
}

PlanDiff diff_plans(const DiffRequest& r) {
  const Plan &a = *r.old_plan, &b = *r.new_plan;
  PlanDiff d;
  // Column titles: file names without directories, unless that makes them equal.
  const bool same_base = base_name(a.file) == base_name(b.file);
  d.old_name = printable(!r.old_name.empty() ? r.old_name : same_base ? a.file : base_name(a.file));
  d.new_name = printable(!r.new_name.empty() ? r.new_name : same_base ? b.file : base_name(b.file));
  d.num_layers = static_cast<int>(b.layer_stages().size());
  d.pipelines = !no_pipelines(a, b);
  if (d.pipelines) d.moved_layers = moved_layers(a, b);
  inputs_and_degrees(d, a, b);
  placement_and_stages(d, a, b);
  schedule_and_time(d, a, b);
  per_sample(d, a, b);
  traffic_and_memory(d, a, b);
  buckets_rows(d, a, b);
  frozen_rows(d, a, b);
  const double old_rate = a.predicted.samples_per_s, new_rate = b.predicted.samples_per_s;
  d.slowdown_pct = old_rate > 0 ? 100.0 * (1.0 - new_rate / old_rate) : 0.0;
  const double old_bytes =
      static_cast<double>(a.comm.p2p_bytes_per_iteration) / std::max(1, a.parallelism.global_batch);
  const double new_bytes =
      static_cast<double>(b.comm.p2p_bytes_per_iteration) / std::max(1, b.parallelism.global_batch);
  d.traffic_increase_pct = old_bytes > 0   ? 100.0 * (new_bytes / old_bytes - 1.0)
                           : new_bytes > 0 ? std::numeric_limits<double>::infinity()
                                           : 0.0;
  d.mode_change = mode_change(d);
  d.headline = headline(d, a, b);
  d.gates = gates(d, r.fail_if_slower_pct, r.fail_if_more_traffic_pct);
  return d;
}

}  // namespace pulse
