// Times for a device type the model profile does not list (derive.hpp has the rule).

#include "pulse/profile/derive.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "pulse/base/limits.hpp"

namespace pulse {

namespace {

// The names of one device pulse-plan took before device specs were data: what
// torch.cuda.get_device_name prints and MLPerf's names beside the clusters' types. A
// pulse.cluster/v1 file has no spec to list them, so a profile measured on "NVIDIA H200"
// still plans on an "H200-SXM" cluster of that format. Names only, no figures.
const std::vector<std::vector<std::string_view>>& legacy_names() {
  static const std::vector<std::vector<std::string_view>> names = {
      {"V100-SXM2", "Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"},
      {"H100-SXM", "NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"},
      {"H200-SXM", "NVIDIA H200", "H200-SXM5-141GB"},
      {"A100-SXM", "NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"},
  };
  return names;
}

}  // namespace

bool same_device(std::string_view a, std::string_view b) {
  if (a == b) return true;
  for (const auto& names : legacy_names()) {
    const bool has_a = std::find(names.begin(), names.end(), a) != names.end();
    if (has_a) return std::find(names.begin(), names.end(), b) != names.end();
  }
  return false;
}

namespace {

// What one derivation reads of the two specs, at the model's precision.
struct Figures {
  const DeviceSpec* spec = nullptr;
  double peak_flops = 0;
  double bytes_per_s = 0;  ///< Achieved.
};

// A device of another software stack is farther than any of the same stack.
double distance(const Figures& a, const Figures& b) {
  constexpr double kOtherStack = 1e6;
  return (a.spec->stack == b.spec->stack ? 0.0 : kOtherStack) +
         std::abs(std::log(a.peak_flops / b.peak_flops)) +
         std::abs(std::log(a.bytes_per_s / b.bytes_per_s));
}

std::optional<Figures> figures(const DeviceSpec* spec, const std::string& precision) {
  if (!spec) return std::nullopt;
  const std::optional<double> peak = spec->peak(precision);
  if (!peak) return std::nullopt;
  return Figures{spec, *peak, spec->achieved_bytes_per_s()};
}

// The listed device type nearest the target by spec, or -1 when no listed type has a spec
// with a peak at the precision.
int nearest_source(const ModelProfile& model, const Figures& target, const std::string& precision,
                   Figures& out) {
  int best = -1;
  double best_distance = 0;
  for (std::size_t t = 0; t < model.device_types.size(); ++t) {
    const auto from = figures(model.device_spec(model.device_types[t]), precision);
    if (!from) continue;
    const double d = distance(*from, target);
    if (best < 0 || d < best_distance) {
      best = static_cast<int>(t);
      best_distance = d;
      out = *from;
    }
  }
  return best;
}

// The share of a layer's source time its work sets (the rest: its memory traffic).
double compute_share(const Layer& layer, int b, const Figures& from) {
  if (layer.forward_flops_per_sample <= 0) return 1.0;
  const double compute = b * layer.forward_flops_per_sample / from.peak_flops;
  const double bytes = 2.0 * static_cast<double>(layer.params) +
                       2.0 * b * static_cast<double>(layer.activation_bytes_per_sample);
  return compute / (compute + bytes / from.bytes_per_s);
}

std::vector<double> derived(const std::vector<double>& times, const Layer& layer,
                            const ModelProfile& model, const Figures& from, const Figures& to,
                            double floor_s) {
  std::vector<double> out(times.size());
  for (std::size_t i = 0; i < times.size(); ++i) {
    const double share = compute_share(layer, model.microbatch_sizes[i], from);
    const double factor =
        share * from.peak_flops / to.peak_flops + (1 - share) * from.bytes_per_s / to.bytes_per_s;
    out[i] = std::max(times[i] * factor, floor_s);
  }
  return out;
}

std::string list(const std::vector<std::string>& types) {
  std::string out;
  for (const auto& t : types) out += (out.empty() ? "\"" : ", \"") + t + "\"";
  return out;
}

constexpr const char* kSpecKeys =
    "stack, peak_flops, memory_bytes_per_s, memory_efficiency, layer_floor_s, source; "
    "docs/formats.md, \"Device spec\"";

std::string ways_out(const ModelProfile& model, const ClusterProfile& cluster) {
  return fmt::format(
      "; or profile the model on that device (scripts/profile_torch.py or pulse-profile, device "
      "type \"{}\"), regenerate an analytic profile with the device (scripts/gen_profiles.py, "
      "docs/profiles.md), or add \"{}\" times to {} by hand",
      cluster.device_type, cluster.device_type, model.file.path);
}

// Why the cluster's device cannot be a target: it has no spec (a v1 file: a spec needs v2).
Error no_target(const std::string& head, const ModelProfile& model, const ClusterProfile& cluster) {
  std::string v1;
  if (cluster.schema == "pulse.cluster/v1") {
    v1 = " and \"schema\": \"pulse.cluster/v2\"";
    if (cluster.v1_peak_fp16_flops) {
      v1 += fmt::format(" (its $.device.peak_fp16_flops, {:g}, is the spec's peak_flops.fp16)",
                        *cluster.v1_peak_fp16_flops);
    }
  }
  return input_error(fmt::format(
      "{}, and the cluster profile has no device spec to derive \"{}\" times with: to plan on "
      "it, add $.device.spec ({}){} to {}{}",
      head, cluster.device_type, kSpecKeys, v1, cluster.file.path, ways_out(model, cluster)));
}

Error no_source(const std::string& head, const ModelProfile& model, const ClusterProfile& cluster,
                const std::string& precision) {
  std::string specs;
  for (const DeviceSpec& s : model.device_specs) {
    specs += fmt::format("{}\"{}\"", specs.empty() ? "" : ", ", s.name);
  }
  const std::string stated =
      specs.empty() ? "states no device spec"
                    : fmt::format("states no {} peak in its device specs ({})", precision, specs);
  return input_error(fmt::format(
      "{}, and the model profile {} to derive \"{}\" times from: to plan on it, add "
      "$.timing.device_specs[\"{}\"] (the spec of the device its times were taken on, with "
      "peak_flops.{}; {}) to {}{}",
      head, stated, cluster.device_type, model.device_types.front(), precision, kSpecKeys,
      model.file.path, ways_out(model, cluster)));
}

// A listed type the cluster's spec names as another name of its device: the same times.
std::optional<DerivedTimes> same_device_times(ModelProfile& model, const ClusterProfile& cluster) {
  const DeviceSpec& spec = *cluster.device_spec;
  for (std::size_t t = 0; t < model.device_types.size(); ++t) {
    if (!spec.names(model.device_types[t])) continue;
    for (Layer& layer : model.layers) {
      layer.forward_s.push_back(layer.forward_s[t]);
      layer.backward_s.push_back(layer.backward_s[t]);
    }
    for (FrozenComponent& c : model.frozen) c.forward_s.push_back(c.forward_s[t]);
    DerivedTimes out;
    out.device_type = cluster.device_type;
    out.from_device_type = model.device_types[t];
    out.rule = fmt::format(
        "the same device: \"{}\" is another name of \"{}\" ({}.aliases); "
        "its times as they are",
        out.from_device_type, out.device_type, spec.where);
    out.device_spec = fmt::format("{}: {}", spec.where, spec.source);
    out.summary = fmt::format("{} times as profiled on \"{}\" (an alias in {})", out.device_type,
                              out.from_device_type, spec.where);
    model.device_types.push_back(cluster.device_type);
    return out;
  }
  return std::nullopt;
}

// The limits (pulse/base/limits.hpp) keep a derived time finite; one a layer may take is the
// loader's limit too, as if the profile had stated it.
std::optional<Error> over_the_layer_limit(const ModelProfile& model, const Layer& layer,
                                          const std::string& type) {
  for (const auto* times : {&layer.forward_s.back(), &layer.backward_s.back()}) {
    for (double t : *times) {
      if (std::isfinite(t) && t <= kMaxLayerSeconds) continue;
      return input_error(fmt::format(
          "{}: layer \"{}\": its {} time derived for \"{}\" is {:g} s, over the {:g} s a "
          "layer may take; its forward_flops_per_sample ({:g}) or the device specs' figures "
          "are off",
          model.file.path, layer.name, times == &layer.forward_s.back() ? "forward" : "backward",
          type, t, kMaxLayerSeconds, layer.forward_flops_per_sample));
    }
  }
  return std::nullopt;
}

}  // namespace

Result<std::optional<DerivedTimes>> derive_device_times(ModelProfile& model,
                                                        const ClusterProfile& cluster) {
  if (model.device_type_index(cluster.device_type) >= 0) return std::optional<DerivedTimes>{};
  const std::string head = fmt::format(
      "{}: model profile has times for device types [{}], not for \"{}\" (cluster profile {})",
      model.file.path, list(model.device_types), cluster.device_type, cluster.file.path);
  if (!cluster.device_spec) return no_target(head, model, cluster);
  if (auto same = same_device_times(model, cluster)) return same;
  const std::string precision = model.dtype.empty() ? "fp16" : model.dtype;
  if (model.device_specs.empty()) return no_source(head, model, cluster, precision);
  const auto to = figures(&*cluster.device_spec, precision);
  if (!to) {
    return input_error(
        fmt::format("{}, and its device spec ({}) states no peak_flops.{} (the "
                    "model profile's dtype) to derive them with",
                    head, cluster.device_spec->where, precision));
  }
  Figures from;
  const int source = nearest_source(model, *to, precision, from);
  if (source < 0) return no_source(head, model, cluster, precision);
  for (Layer& layer : model.layers) {
    layer.forward_s.push_back(
        derived(layer.forward_s[source], layer, model, from, *to, to->spec->layer_floor_s));
    layer.backward_s.push_back(
        derived(layer.backward_s[source], layer, model, from, *to, 2 * to->spec->layer_floor_s));
    if (auto over = over_the_layer_limit(model, layer, cluster.device_type)) return *over;
  }
  for (FrozenComponent& c : model.frozen) {
    // A frozen component's forward by the layers' rule: its weights, working set and FLOPs
    // set its compute and memory shares.
    Layer view;
    view.params = c.weight_bytes / 2;
    view.activation_bytes_per_sample = c.activation_bytes_per_sample;
    view.forward_flops_per_sample = c.forward_flops_per_sample;
    c.forward_s.push_back(
        derived(c.forward_s[source], view, model, from, *to, to->spec->layer_floor_s));
  }
  model.device_types.push_back(cluster.device_type);
  DerivedTimes out;
  out.device_type = cluster.device_type;
  out.from_device_type = model.device_types[source];
  out.rule = fmt::format(
      "{} times x (compute share x peak {:.4g} / {:.4g} TFLOP/s + memory share x bandwidth "
      "{:.4g} / {:.4g} GB/s), at least {:.3g} us per layer forward and twice that backward "
      "(include/pulse/profile/derive.hpp)",
      out.from_device_type, from.peak_flops / 1e12, to->peak_flops / 1e12, from.bytes_per_s / 1e9,
      to->bytes_per_s / 1e9, to->spec->layer_floor_s * 1e6);
  out.device_spec = fmt::format("{}: {}", to->spec->where, to->spec->source);
  out.from_device_spec = fmt::format("{}: {}", from.spec->where, from.spec->source);
  out.summary = fmt::format("{} times derived from {} with the specs in {} and {}", out.device_type,
                            out.from_device_type, to->spec->where, from.spec->where);
  return std::optional<DerivedTimes>{std::move(out)};
}

}  // namespace pulse
