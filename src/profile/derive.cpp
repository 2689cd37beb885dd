// Times for a device type the model profile does not list (derive.hpp has the rule).

#include "pulse/profile/derive.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace pulse {

namespace {

// Mean host cost of one SD2 UNet layer's eager forward on the 2026 NVIDIA devices: the
// Hopper fit's seconds per dispatched op (scripts/profilegen/calibrate.py) x the SD2 UNet's
// 1,256 dispatched ops over its 47 layers. tests/test_profiles.py checks it against the fit.
constexpr double kEagerHopperLayerFloor_s = 24.4e-6 * 1256 / 47;
// The 910B in graph mode: 5 us per dispatched task (an assumption, calibrate.py) x the same
// 1,256 / 47 ops per layer.
constexpr double kAscend910bLayerFloor_s = 5e-6 * 1256 / 47;

// The software a device's times were fitted in: a time derived across stacks carries the
// other stack's efficiency (the 910A's MindSpore 2.1 figures run 2.5-2.9x slower than the
// H200 measured; the V100's PyTorch ones come within 15%: docs/profiles.md).
constexpr std::string_view kCuda = "CUDA, eager PyTorch";
constexpr std::string_view kAscend = "Ascend, MindSpore graph mode";

constexpr std::string_view kNvidiaSheets =
    "NVIDIA datasheets (bf16/fp16 dense tensor peak, HBM bandwidth); achieved bandwidth and the "
    "host floor from scripts/profilegen (timing.py, hostfloor.py, calibrate.py)";

}  // namespace

const std::vector<DeviceSpec>& device_specs() {
  // Achieved bandwidth = datasheet x the fraction scripts/profilegen assumes for each device.
  static const std::vector<DeviceSpec> specs = {
      {"V100-SXM2",
       {"Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"},
       kCuda,
       125e12,
       0.9 * 900e9,
       298e-6,
       "V100 datasheet: 125 TFLOPS fp16, 900 GB/s HBM2 at 0.9; per-layer overhead 298 us "
       "fitted to diffusers' PyTorch 2.0 sampling (timing.py)"},
      {"Ascend-910A",
       {},
       kAscend,
       256e12,
       0.8 * 1.2e12,
       20e-6,
       "Hot Chips 2019: 256 TFLOPS fp16; 1.2 TB/s HBM at 0.8; 20 us per layer (graph mode, "
       "assumed; timing.py)"},
      {"H100-SXM",
       {"NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"},
       kCuda,
       989.4e12,
       0.85 * 3.35e12,
       kEagerHopperLayerFloor_s,
       kNvidiaSheets},
      {"H200-SXM",
       {"NVIDIA H200", "H200-SXM5-141GB"},
       kCuda,
       989.4e12,
       0.85 * 4.8e12,
       kEagerHopperLayerFloor_s,
       kNvidiaSheets},
      {"A100-SXM",
       {"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"},
       kCuda,
       312e12,
       0.85 * 2.039e12,
       kEagerHopperLayerFloor_s,
       kNvidiaSheets},
      {"Ascend-910B",
       {},
       kAscend,
       354e12,
       0.8 * 1.6e12,
       kAscend910bLayerFloor_s,
       "Ascend 910B: 354 TFLOPS fp16 (24 AI cores x 1.8 GHz x 4096 MAC x 2), 1.6 TB/s HBM2e at "
       "0.8; 5 us per dispatched task in graph mode (assumed; calibrate.py)"},
  };
  return specs;
}

const DeviceSpec* find_device_spec(std::string_view type) {
  for (const DeviceSpec& spec : device_specs()) {
    if (spec.name == type) return &spec;
    if (std::find(spec.aliases.begin(), spec.aliases.end(), type) != spec.aliases.end()) {
      return &spec;
    }
  }
  return nullptr;
}

bool same_device(std::string_view a, std::string_view b) {
  if (a == b) return true;
  const DeviceSpec* spec = find_device_spec(a);
  return spec && spec == find_device_spec(b);
}

namespace {

// A device of another software stack is farther than any of the same stack.
double distance(const DeviceSpec& a, const DeviceSpec& b) {
  constexpr double kOtherStack = 1e6;
  return (a.stack == b.stack ? 0.0 : kOtherStack) +
         std::abs(std::log(a.peak_flops / b.peak_flops)) +
         std::abs(std::log(a.memory_bytes_per_s / b.memory_bytes_per_s));
}

// The listed device type nearest the target by spec, or -1 when no listed type has one.
int nearest_source(const ModelProfile& model, const DeviceSpec& target) {
  int best = -1;
  double best_distance = 0;
  for (std::size_t t = 0; t < model.device_types.size(); ++t) {
    const DeviceSpec* spec = find_device_spec(model.device_types[t]);
    if (!spec) continue;
    const double d = distance(*spec, target);
    if (best < 0 || d < best_distance) {
      best = static_cast<int>(t);
      best_distance = d;
    }
  }
  return best;
}

// The share of a layer's source time its work sets (the rest: its memory traffic).
double compute_share(const Layer& layer, int b, const DeviceSpec& from) {
  if (layer.forward_flops_per_sample <= 0) return 1.0;
  const double compute = b * layer.forward_flops_per_sample / from.peak_flops;
  const double bytes = 2.0 * static_cast<double>(layer.params) +
                       2.0 * b * static_cast<double>(layer.activation_bytes_per_sample);
  return compute / (compute + bytes / from.memory_bytes_per_s);
}

std::vector<double> derived(const std::vector<double>& times, const Layer& layer,
                            const ModelProfile& model, const DeviceSpec& from, const DeviceSpec& to,
                            double floor_s) {
  std::vector<double> out(times.size());
  for (std::size_t i = 0; i < times.size(); ++i) {
    const double share = compute_share(layer, model.microbatch_sizes[i], from);
    const double factor = share * from.peak_flops / to.peak_flops +
                          (1 - share) * from.memory_bytes_per_s / to.memory_bytes_per_s;
    out[i] = std::max(times[i] * factor, floor_s);
  }
  return out;
}

std::string ways_out(const ModelProfile& model, const ClusterProfile& cluster) {
  std::string known;
  for (const DeviceSpec& spec : device_specs()) {
    known += (known.empty() ? "" : ", ") + std::string(spec.name);
  }
  return fmt::format(
      "; to plan on it: profile the model on that device (scripts/profile_torch.py or "
      "pulse-profile, device type \"{}\"), regenerate an analytic profile with the device "
      "(scripts/gen_profiles.py, docs/profiles.md), or add \"{}\" times to {} by hand; "
      "times are derived without re-profiling between devices with a spec ({})",
      cluster.device_type, cluster.device_type, model.file.path, known);
}

std::string list(const std::vector<std::string>& types) {
  std::string out;
  for (const auto& t : types) out += (out.empty() ? "\"" : ", \"") + t + "\"";
  return out;
}

}  // namespace

Result<std::optional<DerivedTimes>> derive_device_times(ModelProfile& model,
                                                        const ClusterProfile& cluster) {
  if (model.device_type_index(cluster.device_type) >= 0) return std::optional<DerivedTimes>{};
  const std::string head = fmt::format(
      "{}: model profile has times for device types [{}], not for \"{}\" (cluster profile {})",
      model.file.path, list(model.device_types), cluster.device_type, cluster.file.path);
  const DeviceSpec* to = find_device_spec(cluster.device_type);
  if (!to) {
    return input_error(fmt::format("{}, and no device spec covers \"{}\" to derive its times{}",
                                   head, cluster.device_type, ways_out(model, cluster)));
  }
  const int source = nearest_source(model, *to);
  if (source < 0) {
    return input_error(
        fmt::format("{}, and none of the profile's device types has a device spec "
                    "to derive \"{}\" times from{}",
                    head, cluster.device_type, ways_out(model, cluster)));
  }
  const DeviceSpec& from = *find_device_spec(model.device_types[source]);
  for (Layer& layer : model.layers) {
    layer.forward_s.push_back(
        derived(layer.forward_s[source], layer, model, from, *to, to->layer_floor_s));
    layer.backward_s.push_back(
        derived(layer.backward_s[source], layer, model, from, *to, 2 * to->layer_floor_s));
  }
  model.device_types.push_back(cluster.device_type);
  DerivedTimes out;
  out.device_type = cluster.device_type;
  out.from_device_type = model.device_types[source];
  out.rule = fmt::format(
      "{} times x (compute share x peak {:.4g} / {:.4g} TFLOP/s + memory share x bandwidth "
      "{:.4g} / {:.4g} GB/s), at least {:.3g} us per layer forward and twice that backward "
      "(include/pulse/profile/derive.hpp)",
      out.from_device_type, from.peak_flops / 1e12, to->peak_flops / 1e12,
      from.memory_bytes_per_s / 1e9, to->memory_bytes_per_s / 1e9, to->layer_floor_s * 1e6);
  return std::optional<DerivedTimes>{std::move(out)};
}

}  // namespace pulse
