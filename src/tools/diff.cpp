#include "pulse/tools/diff.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pulse/base/io.hpp"
#include "pulse/base/text.hpp"
#include "pulse/base/units.hpp"

namespace pulse {

namespace {

enum class Better { neither, lower, higher };

std::string percent_delta(double a, double b) {
  if (a == b) return "";
  if (a == 0) return "new";
  const double pct = 100.0 * (b - a) / std::fabs(a);
  return std::fabs(pct) < 0.1 ? fmt::format("{:+.3f}%", pct) : fmt::format("{:+.1f}%", pct);
}

// Appends rows of one section; each helper formats both values the same way.
class RowWriter {
 public:
  RowWriter(PlanDiff& d, std::string section) : diff_(d), section_(std::move(section)) {}

  void text(std::string key, std::string label, std::string a, std::string b) {
    // Compared before the moves: the order in which add's parameters are initialized is
    // unspecified (clang moves a and b out first; the sanitized CI build found it).
    std::string delta = a == b ? "" : "changed";
    add(std::move(key), std::move(label), std::move(a), std::move(b), {}, {}, std::move(delta),
        Better::neither);
  }
  void count(std::string key, std::string label, double a, double b,
             Better better = Better::neither) {
    add(std::move(key), std::move(label), fmt::format("{}", a), fmt::format("{}", b), a, b,
        a == b ? "" : fmt::format("{:+}", b - a), better);
  }
  void seconds(std::string key, std::string label, double a, double b) {
    add(std::move(key), std::move(label), format_seconds(a), format_seconds(b), a, b,
        percent_delta(a, b), Better::lower);
  }
  void bytes(std::string key, std::string label, std::int64_t a, std::int64_t b) {
    add(std::move(key), std::move(label), format_bytes(a), format_bytes(b), static_cast<double>(a),
        static_cast<double>(b), percent_delta(static_cast<double>(a), static_cast<double>(b)),
        Better::lower);
  }
  void rate(std::string key, std::string label, double a, double b) {
    add(std::move(key), std::move(label), fmt::format("{:.1f}", a), fmt::format("{:.1f}", b), a, b,
        percent_delta(a, b), Better::higher);
  }
  void ratio(std::string key, std::string label, double a, double b) {
    add(std::move(key), std::move(label), fmt::format("{:.1f}%", 100 * a),
        fmt::format("{:.1f}%", 100 * b), a, b,
        a == b ? "" : fmt::format("{:+.1f} pp", 100 * (b - a)), Better::lower);
  }

 private:
  // The texts carry names from the plans: every output of a diff (table, JSON, page) shows
  // them printable.
  void add(std::string key, std::string label, std::string a, std::string b,
           std::optional<double> va, std::optional<double> vb, std::string delta, Better better) {
    DiffRow r{section_, std::move(key),  std::move(label), printable(a), printable(b), va,
              vb,       std::move(delta)};
    const bool same = va && vb ? *va == *vb : r.old_text == r.new_text;
    if (same) {
      r.change = Change::same;
      r.delta.clear();
    } else if (better == Better::neither || !va || !vb) {
      r.change = Change::changed;
    } else {
      r.change = (better == Better::lower) == (*vb < *va) ? Change::better : Change::worse;
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
  RowWriter deg(d, "degrees");
  const PlanParallelism &x = a.parallelism, &y = b.parallelism;
  deg.count("pp", "pp", x.pp, y.pp);
  deg.count("dp", "dp", x.dp, y.dp);
  deg.count("microbatch_size", "microbatch size", x.microbatch_size, y.microbatch_size);
  deg.count("num_microbatches", "microbatches", x.num_microbatches, y.num_microbatches);
  deg.count("global_batch", "global batch", x.global_batch, y.global_batch);
  deg.count("num_stages", "stages", a.num_stages(), b.num_stages());
  deg.count("devices_used", "devices used", x.pp * x.dp, y.pp * y.dp);
  for (const DiffRow& r : d.rows) {
    if (r.section == "degrees" && r.change != Change::same) d.changed_degrees.push_back(r.key);
  }
}

void placement_and_stages(PlanDiff& d, const Plan& a, const Plan& b) {
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

const char* kBold = "\033[1m";
const char* kReset = "\033[0m";

const char* color_of(Change c) {
  switch (c) {
    case Change::better:
      return "\033[32m";
    case Change::worse:
      return "\033[31m";
    case Change::changed:
      return "\033[33m";
    case Change::same:
      break;
  }
  return "";
}

std::string where(StageId s, DeviceId d) {
  return s < 0 ? std::string("(absent)") : fmt::format("stage {} (device {})", s, d);
}

const char* change_name(Change c) {
  switch (c) {
    case Change::same:
      return "same";
    case Change::changed:
      return "changed";
    case Change::better:
      return "better";
    case Change::worse:
      return "worse";
  }
  return "";
}

}  // namespace

std::string format_diff_table(const PlanDiff& d, const DiffTableOptions& o) {
  std::size_t wl = 0, wa = d.old_name.size(), wb = d.new_name.size();
  for (const DiffRow& r : d.rows) {
    wl = std::max(wl, r.label.size() + 2);
    wa = std::max(wa, r.old_text.size());
    wb = std::max(wb, r.new_text.size());
  }
  std::string out =
      fmt::format("{:<{}}  {:<{}}  {:<{}}  change\n", "", wl, d.old_name, wa, d.new_name, wb);
  std::string section;
  for (const DiffRow& r : d.rows) {
    if (r.section != section) {
      section = r.section;
      out += o.color ? fmt::format("{}{}{}\n", kBold, section, kReset) : section + "\n";
    }
    const std::string label = "  " + r.label;
    std::string line = fmt::format("{:<{}}  {:<{}}  ", label, wl, r.old_text, wa);
    const std::string rest = r.delta.empty() ? fmt::format("{}", r.new_text)
                                             : fmt::format("{:<{}}  {}", r.new_text, wb, r.delta);
    if (o.color && r.change != Change::same) {
      line += fmt::format("{}{}{}", color_of(r.change), rest, kReset);
    } else {
      line += rest;
    }
    out += line + "\n";
  }
  if (d.moved_layers.empty()) return out + "moved layers: none\n";
  out += fmt::format("moved layers: {} of {}\n", d.moved_layers.size(), d.num_layers);
  std::size_t wn = 0, wo = 0;
  for (const LayerMove& m : d.moved_layers) {
    wn = std::max(wn, m.layer.size());
    wo = std::max(wo, where(m.old_stage, m.old_device).size());
  }
  for (const LayerMove& m : d.moved_layers) {
    out += fmt::format("  {:<{}}  {:<{}}  -> {}\n", m.layer, wn, where(m.old_stage, m.old_device),
                       wo, where(m.new_stage, m.new_device));
  }
  return out;
}

std::string format_diff_json(const PlanDiff& d) {
  using ojson = nlohmann::ordered_json;
  ojson rows = ojson::array();
  for (const DiffRow& r : d.rows) {
    rows.push_back({{"section", r.section},
                    {"key", r.key},
                    {"label", r.label},
                    {"old", r.old_value ? ojson(*r.old_value) : ojson(r.old_text)},
                    {"new", r.new_value ? ojson(*r.new_value) : ojson(r.new_text)},
                    {"delta", r.delta},
                    {"change", change_name(r.change)}});
  }
  ojson moved = ojson::array();
  for (const LayerMove& m : d.moved_layers) {
    auto opt = [](int v) { return v < 0 ? ojson(nullptr) : ojson(v); };
    moved.push_back({{"layer", m.layer},
                     {"old_stage", opt(m.old_stage)},
                     {"new_stage", opt(m.new_stage)},
                     {"old_device", opt(m.old_device)},
                     {"new_device", opt(m.new_device)}});
  }
  auto finite = [](double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); };
  ojson out = {{"schema", "pulse.plan-diff/v1"},
               {"old", d.old_name},
               {"new", d.new_name},
               {"changed_degrees", d.changed_degrees},
               {"moved_layers", moved},
               {"slowdown_pct", finite(d.slowdown_pct)},
               {"traffic_increase_pct", finite(d.traffic_increase_pct)},
               {"rows", rows}};
  return out.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

Status check_inputs_agree(const Plan& a, const Plan& b, bool allow_changed) {
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
    if (!allow_changed && x->sha256 != y->sha256 && x->name == y->name && x->file == y->file) {
      return input_error(fmt::format(
          "diff: {} and {} were made from {} profile {} ({}) with different contents (sha256 "
          "{}... and {}...): one of them is stale or edited; give --allow-changed-inputs to "
          "compare them anyway",
          a.file, b.file, kind, x->name, x->file, x->sha256.substr(0, 12),
          y->sha256.substr(0, 12)));
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
  d.moved_layers = moved_layers(a, b);
  inputs_and_degrees(d, a, b);
  placement_and_stages(d, a, b);
  schedule_and_time(d, a, b);
  traffic_and_memory(d, a, b);
  const double old_rate = a.predicted.samples_per_s, new_rate = b.predicted.samples_per_s;
  d.slowdown_pct = old_rate > 0 ? 100.0 * (1.0 - new_rate / old_rate) : 0.0;
  const double old_bytes =
      static_cast<double>(a.comm.p2p_bytes_per_iteration) / std::max(1, a.parallelism.global_batch);
  const double new_bytes =
      static_cast<double>(b.comm.p2p_bytes_per_iteration) / std::max(1, b.parallelism.global_batch);
  d.traffic_increase_pct = old_bytes > 0   ? 100.0 * (new_bytes / old_bytes - 1.0)
                           : new_bytes > 0 ? std::numeric_limits<double>::infinity()
                                           : 0.0;
  return d;
}

}  // namespace pulse
