// Model and cluster profiles: the planner's inputs, loaded and fully validated before any
// work starts. docs/formats.md is the format reference; schema/ has the JSON Schemas.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulse/base/result.hpp"

namespace pulse {

/// Index of a layer in execution order, 0-based.
using LayerId = int;
/// Index of a pipeline stage along the main path, 0-based (0 .. num_stages-1).
using StageId = int;
/// Index of a device within one pipeline, 0-based (0 .. pp-1).
using DeviceId = int;
/// Global device index in the cluster: node * devices_per_node + local device.
using RankId = int;

/// Where a profile's numbers came from.
struct Provenance {
  std::string method;  ///< "analytic", "measured" or "hand-written".
  std::string source;
  std::string generator;
  std::vector<std::string> references;
  std::vector<std::string> assumptions;
};

/// The file a profile was read from: display name and content hash for the plan.
struct SourceFile {
  std::string path;
  std::string name;    ///< File name without directories, as recorded in plans.
  std::string sha256;  ///< Hex SHA-256 of the file's bytes.
};

/// A device's datasheet, host floor and software, as a profile states it (docs/formats.md,
/// "Device spec"): a cluster profile's `device.spec` says what its device is, a model
/// profile's `timing.device_specs` what the devices its times were taken on are. The planner
/// derives a device type's times from another's with the two (profile/derive.hpp).
struct DeviceSpec {
  std::string name;                          ///< The device type it describes.
  std::vector<std::string> aliases;          ///< Other names of the same device ("NVIDIA H200").
  std::string stack;                         ///< The software its times are fitted in.
  std::map<std::string, double> peak_flops;  ///< Dense FLOP/s by precision ("fp16").
  double memory_bytes_per_s = 0;             ///< HBM bandwidth, datasheet.
  double memory_efficiency = 0;              ///< The fraction of it achieved, (0, 1].
  double layer_floor_s = 0;  ///< Host/launch cost of one layer's forward (backward: 2x).
  std::string source;        ///< Where the figures come from, in words.
  std::string where;         ///< Where it was read: "c.json $.device.spec".

  /// Achieved HBM bytes per second.
  double achieved_bytes_per_s() const { return memory_efficiency * memory_bytes_per_s; }
  /// The peak at `precision`, or nullopt when the spec does not state it.
  std::optional<double> peak(const std::string& precision) const;
  /// Whether `type` is this device's name or one of its aliases.
  bool names(std::string_view type) const;
};

/// What a sequence-parallel layout splits of one layer (the profile's `layers[].sequence`,
/// docs/formats.md): the tokens of its sequence, the heads and head width of its attention
/// over them (0 heads: a token-wise layer with no attention), and that attention core's
/// forward FLOPs per sample. A layer without it is not split: every device of a sequence
/// group runs all of it (cost/sequence_parallel.hpp).
struct SequenceShape {
  std::int64_t tokens = 0;
  int heads = 0;
  int head_dim = 0;
  double attention_flops_per_sample = 0;
  bool operator==(const SequenceShape&) const = default;
};

struct Layer {
  std::string name;
  std::string kind;
  std::int64_t params = 0;
  /// Seconds per microbatch, [device type index][microbatch size index].
  std::vector<std::vector<double>> forward_s;
  std::vector<std::vector<double>> backward_s;
  double backward_weight_fraction = 0.5;
  std::int64_t activation_bytes_per_sample = 0;
  std::int64_t output_bytes_per_sample = 0;
  double forward_flops_per_sample = 0;
  std::optional<SequenceShape> sequence;
  /// Set by recomputation (profile/recompute.hpp), never read from a file: what the layer's
  /// backward rebuilds beyond activation_bytes_per_sample.
  std::int64_t recompute_workspace_bytes_per_sample = 0;
};

/// A long skip connection: `producer`'s output is consumed again by `consumer`.
struct Skip {
  std::string name;
  LayerId producer = 0;
  LayerId consumer = 0;
  std::int64_t bytes_per_sample = 0;
};

/// A tensor every later stage needs besides the main path (timestep embedding, text states).
struct Carried {
  std::string name;
  LayerId producer = -1;  ///< -1: comes with the input batch.
  std::int64_t bytes_per_sample = 0;
  bool needs_gradient = false;
};

/// A frozen module of the training step (the profile's `frozen[]`, docs/frozen.md): a VAE
/// encoder, a text encoder or an image encoder run forward-only on every sample before the
/// denoiser sees it. Its weights stay resident (no gradient, no optimizer state); its
/// forward keeps nothing, so its activation is a transient working set.
struct FrozenComponent {
  std::string name;
  std::string kind;  ///< "vae_encoder", "text_encoder" or "image_encoder".
  std::int64_t params = 0;
  std::int64_t weight_bytes = 0;
  /// Forward seconds per microbatch, [device type index][microbatch size index].
  std::vector<std::vector<double>> forward_s;
  std::int64_t activation_bytes_per_sample = 0;
  std::int64_t output_bytes_per_sample = 0;
  double forward_flops_per_sample = 0;
  std::string source;
};

struct ModelProfile {
  SourceFile file;
  std::string name;
  std::string description;
  Provenance provenance;
  std::vector<int> microbatch_sizes;
  std::vector<std::string> device_types;
  /// `timing.device_specs`: the specs of listed device types the file states, in the order of
  /// device_types (optional; derivation reads them).
  std::vector<DeviceSpec> device_specs;
  std::string dtype;  ///< `dtype`, empty when absent: the precision derivation reads peaks at.
  std::vector<Layer> layers;
  std::vector<Skip> skips;
  std::vector<Carried> carried;
  /// `frozen`: the frozen encoders the step runs before the denoiser (optional; empty: the
  /// profile has none, or they run outside the plan).
  std::vector<FrozenComponent> frozen;

  /// Index into device_types of `type` or of another name of the same device (an alias in
  /// this profile's specs, or profile/derive.hpp's same_device: "NVIDIA H200" is
  /// "H200-SXM"), or -1.
  int device_type_index(std::string_view type) const;
  /// The spec the file states for a listed device type, or nullptr.
  const DeviceSpec* device_spec(std::string_view type) const;
  std::int64_t total_params() const;
};

/// A named kind of link: achieved bandwidth per direction and per-message latency.
struct LinkClass {
  std::string name;
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;

  bool operator==(const LinkClass&) const = default;
};

struct ClusterProfile {
  SourceFile file;
  std::string name;
  std::string description;
  Provenance provenance;
  std::string schema;  ///< "pulse.cluster/v2", or "pulse.cluster/v1" for a file of that format.
  std::string device_type;
  std::int64_t memory_bytes = 0;
  std::int64_t reserved_bytes = 0;
  /// `device.spec` (pulse.cluster/v2): what the device is; absent, times of its type are not
  /// derived.
  std::optional<DeviceSpec> device_spec;
  /// `device.peak_fp16_flops` of a pulse.cluster/v1 file (v2 has it in the spec): named in
  /// the message that asks for a spec, as the start of one.
  std::optional<double> v1_peak_fp16_flops;
  int devices_per_node = 1;
  int nodes = 1;
  std::vector<LinkClass> link_classes;
  /// Class index of the link between local devices [a][b]; -1 on the diagonal.
  std::vector<std::vector<int>> intra_node;
  int inter_node = -1;  ///< Class index between nodes; -1 when there is one node.
  bool overlap_comm = false;
  /// Data-parallel gradient all-reduce: "ring" over all replicas, or "hierarchical"
  /// (reduce-scatter in the node, all-reduce across nodes, all-gather in the node).
  std::string allreduce = "ring";
  /// Set on the cluster of sequence groups only (cost/sequence_parallel.hpp), never read from
  /// a file: each device stands for this many ranks, linked by class `sequence_link`.
  int sequence_degree = 1;
  int sequence_link = -1;

  int num_devices() const { return devices_per_node * nodes; }
  /// Whether `type` names this cluster's device: its type, an alias its device spec lists, or
  /// another name derive.hpp knows ("NVIDIA H200" for "H200-SXM"), as the planner takes
  /// a model's times for it (ModelProfile::device_type_index).
  bool names_device(std::string_view type) const;
  int node_of(RankId r) const { return r / devices_per_node; }
  int local_of(RankId r) const { return r % devices_per_node; }
  /// The link between two distinct ranks.
  const LinkClass& link(RankId a, RankId b) const;
  /// Bytes a plan may use per device: memory_bytes - reserved_bytes.
  std::int64_t usable_memory() const { return memory_bytes - reserved_bytes; }
};

/// Seconds for a microbatch of `b` samples, from times measured at `sizes`: linear between
/// sizes, per-sample scaling of the nearest size outside them.
double interpolate_time(const std::vector<double>& times, const std::vector<int>& sizes, int b);
/// The same rule at a real size `b` (a bucket's equivalent microbatch, buckets.hpp).
double interpolate_time_at(const std::vector<double>& times, const std::vector<int>& sizes,
                           double b);

/// Whether `b` is one of the profiled sizes (otherwise plans say the time is interpolated).
bool is_profiled_size(const std::vector<int>& sizes, int b);

/// Loads and validates a model profile. Errors name the file and JSON path.
Result<ModelProfile> load_model_profile(const std::string& path);
/// The same from text in memory; `file` is the name used in messages.
Result<ModelProfile> parse_model_profile(std::string_view text, const std::string& file);

Result<ClusterProfile> load_cluster_profile(const std::string& path);
Result<ClusterProfile> parse_cluster_profile(std::string_view text, const std::string& file);

}  // namespace pulse
