// Another device without re-profiling: a model profile's times on a device type it does
// not list, derived at plan time from a device type it does list, by the two devices' specs.
//
// For a layer at microbatch size b, with the source device's time t (forward or backward),
// forward FLOPs per sample F, parameters P and saved activation bytes per sample A:
//
//   compute   = b F / peak_src                 (the layer's work at the source's peak)
//   memory    = (2 P + 2 b A) / bandwidth_src  (weights read, activations written and read)
//   share     = compute / (compute + memory)   (1 when the profile gives no FLOPs)
//   scaled    = t x (share x peak_src / peak_dst + (1 - share) x bandwidth_src / bandwidth_dst)
//   derived   = max(scaled, k x layer_floor_dst)        k = 1 forward, 2 backward
//
// so the source's achieved efficiency carries over to the target, split between the part of
// the time the work sets and the part the memory traffic sets, and no layer runs faster
// than the target's host can launch it (the launch floor of docs/profiles.md, "Host
// floor", as one mean figure per layer). The source is the listed device type whose spec is
// nearest the target's: of the same software stack if the profile lists one (CUDA eager
// PyTorch, Ascend graph mode: an efficiency carries over within a stack, not across), then
// by |ln peak ratio| + |ln bandwidth ratio|; ties: the profile's order.
// A plan made this way says so (cost_model.derived_times); validate derives the same way.
//
// Device names: a spec answers to its name and its aliases (what torch.cuda.get_device_name
// prints), so a profile measured on "NVIDIA H200" plans on an "H200-SXM" cluster as it is.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulse/base/result.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// What the derivation needs to know of a device (the datasheet and the host floor).
struct DeviceSpec {
  std::string_view name;                  ///< The device type clusters use ("H200-SXM").
  std::vector<std::string_view> aliases;  ///< Other names of the same device.
  std::string_view stack;                 ///< The software its times are fitted in.
  double peak_flops = 0;                  ///< Dense fp16/bf16 FLOP/s.
  double memory_bytes_per_s = 0;          ///< Achieved HBM bandwidth.
  double layer_floor_s = 0;  ///< Host/launch cost of one layer's forward (backward: 2x).
  std::string_view source;   ///< Where the figures come from.
};

/// Every device the derivation knows, in a fixed order (docs/profiles.md lists them).
const std::vector<DeviceSpec>& device_specs();

/// The spec named `type` or one of its aliases; nullptr for a device no spec covers.
const DeviceSpec* find_device_spec(std::string_view type);

/// Whether two device type names are one device: equal, or names of one spec.
bool same_device(std::string_view a, std::string_view b);

/// `cost_model.derived_times[]`: a device type the plan's times were derived for.
struct DerivedTimes {
  std::string device_type;       ///< The cluster's.
  std::string from_device_type;  ///< The model profile's, whose times were scaled.
  std::string rule;              ///< The rule and its figures, in words.
};

/// Adds the cluster's device type to `model` with times derived from the nearest listed
/// device (the rule above) and says how. An input error when the model already lists the
/// type is not raised: nullopt then (nothing to derive). When no derivation is possible
/// (no spec for the cluster's device, or none for any listed type) the input error lists
/// the profile's device types and the ways to add one.
Result<std::optional<DerivedTimes>> derive_device_times(ModelProfile& model,
                                                        const ClusterProfile& cluster);

}  // namespace pulse
