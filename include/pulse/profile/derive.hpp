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
// floor", as one mean figure per layer). Peaks are at the model profile's `dtype` (fp16 when
// it states none), bandwidths achieved (datasheet x memory_efficiency). The source is the
// listed device type whose spec is nearest the target's: of the same software stack if the
// profile lists one (CUDA eager PyTorch, Ascend graph mode: an efficiency carries over within
// a stack, not across), then by |ln peak ratio| + |ln bandwidth ratio|; ties: the profile's
// order. A plan made this way says so (cost_model.derived_times); validate derives the same way.
//
// The specs are data (docs/profiles.md, "Another device without re-profiling"): the target's
// is the cluster profile's `device.spec`, the sources' the model profile's
// `timing.device_specs`; scripts/profilegen/datasheets.py writes both from one table. A cluster
// file with a spec alone brings a new device type to every model profile that carries specs.
//
// Device names: a spec answers to its name and its aliases (what torch.cuda.get_device_name
// prints). A model profile whose device type the cluster's spec names as an alias has that
// device's times as they are (derived_times says so, the rule "the same device").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pulse/base/result.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// Whether two device type names are one device without a spec to say so: equal, or two
/// names pulse-plan took for one device before specs were data (pulse.cluster/v1 files have
/// none: "NVIDIA H200" and "H200-SXM"). Names only; every figure is in the profiles.
bool same_device(std::string_view a, std::string_view b);

/// `cost_model.derived_times[]`: a device type the plan's times were derived for.
struct DerivedTimes {
  std::string device_type;       ///< The cluster's.
  std::string from_device_type;  ///< The model profile's, whose times were scaled.
  std::string rule;              ///< The rule and its figures, in words.
  std::string device_spec;       ///< The target's spec: where it was read, and its source.
  std::string from_device_spec;  ///< The source's spec, likewise ("" for the same device).
  std::string summary;           ///< One phrase for the plan's summary line.
};

/// Adds the cluster's device type to `model` with times derived from the nearest listed
/// device (the rule above) and says how. When the model already lists the type there is
/// nothing to derive: nullopt. When no derivation is possible (no spec in the cluster
/// profile, none for any listed type, no peak at the model's precision) the input error says
/// which spec to add where, lists the profile's device types and the other ways out.
Result<std::optional<DerivedTimes>> derive_device_times(ModelProfile& model,
                                                        const ClusterProfile& cluster);

}  // namespace pulse
