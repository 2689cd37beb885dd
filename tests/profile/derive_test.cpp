// Derived times: the rule on hand-built specs (arithmetic in the comments), the messages when
// a spec is missing, and every shipped model and cluster: times derived with the specs the
// files carry are, to the bit, those of the table compiled into pulse-plan before the specs
// were data (kCompiledTable below, its figures as src/profile/derive.cpp had them at 2113041).
#include "pulse/profile/derive.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace pulse {
namespace {

const std::string kDeriveRoot = PULSE_SOURCE_DIR;
constexpr const char* kCuda = "CUDA, eager PyTorch";
constexpr const char* kAscend = "Ascend, MindSpore graph mode";

DeviceSpec make_spec(std::string name, std::string stack, double peak, double bandwidth,
                     double efficiency, double floor_s, std::string where = "") {
  DeviceSpec s;
  s.name = std::move(name);
  s.stack = std::move(stack);
  s.peak_flops = {{"fp16", peak}};
  s.memory_bytes_per_s = bandwidth;
  s.memory_efficiency = efficiency;
  s.layer_floor_s = floor_s;
  s.source = "test figures";
  s.where = where.empty() ? "t.json $.spec." + s.name : where;
  return s;
}

// The figures of the former compiled table (datasheet peak and bandwidth, achieved fraction).
DeviceSpec v100() {
  return make_spec("V100-SXM2", kCuda, 125e12, 900e9, 0.9, 298e-6);
}
DeviceSpec a910() {
  return make_spec("Ascend-910A", kAscend, 256e12, 1.2e12, 0.8, 20e-6);
}
DeviceSpec h100() {
  return make_spec("H100-SXM", kCuda, 989.4e12, 3.35e12, 0.85, 24.4e-6 * 1256 / 47);
}
DeviceSpec h200() {
  return make_spec("H200-SXM", kCuda, 989.4e12, 4.8e12, 0.85, 24.4e-6 * 1256 / 47);
}
DeviceSpec b910() {
  return make_spec("Ascend-910B", kAscend, 354e12, 1.6e12, 0.8, 5e-6 * 1256 / 47);
}

// Two layers timed on the given device types at microbatch 1 and 2, with their specs.
ModelProfile two_layer_model(std::vector<DeviceSpec> specs, std::vector<std::string> bare = {}) {
  ModelProfile m;
  m.name = "two";
  m.file.path = "two.json";
  m.microbatch_sizes = {1, 2};
  for (const DeviceSpec& s : specs) m.device_types.push_back(s.name);
  for (const std::string& t : bare) m.device_types.push_back(t);
  m.device_specs = std::move(specs);
  Layer plain;  // no FLOPs stated: all of its time scales with the peak
  plain.name = "plain";
  Layer heavy;  // 1 TFLOP and 1 GB of saved activations per sample, no parameters
  heavy.name = "heavy";
  heavy.forward_flops_per_sample = 1e12;
  heavy.activation_bytes_per_sample = 1'000'000'000;
  for (std::size_t t = 0; t < m.device_types.size(); ++t) {
    plain.forward_s.push_back({10e-3, 20e-3});
    plain.backward_s.push_back({20e-3, 40e-3});
    heavy.forward_s.push_back({0.1, 0.2});
    heavy.backward_s.push_back({1e-3, 2e-3});
  }
  m.layers = {plain, heavy};
  return m;
}

ClusterProfile cluster_of(std::string type, std::optional<DeviceSpec> device_spec) {
  ClusterProfile c;
  c.file.path = "c.json";
  c.schema = "pulse.cluster/v2";
  c.device_type = std::move(type);
  if (device_spec) device_spec->where = "c.json $.device.spec";
  c.device_spec = std::move(device_spec);
  return c;
}

ClusterProfile cluster_of(const DeviceSpec& s) {
  return cluster_of(s.name, s);
}

TEST(DeriveTimes, ScalesTheComputeAndTheMemoryShareByTheSpecs) {
  ModelProfile m = two_layer_model({v100()});
  auto d = derive_device_times(m, cluster_of(h100()));
  ASSERT_TRUE(d.ok()) << d.error().message;
  ASSERT_TRUE(d->has_value());
  EXPECT_EQ((*d)->from_device_type, "V100-SXM2");
  EXPECT_EQ(m.device_types, (std::vector<std::string>{"V100-SXM2", "H100-SXM"}));
  // plain: x 125 / 989.4 = 0.126339 (no FLOPs: all compute).
  EXPECT_NEAR(m.layers[0].forward_s[1][0], 1.263392e-3, 1e-9);
  EXPECT_NEAR(m.layers[0].backward_s[1][1], 5.053568e-3, 1e-9);
  // heavy at b = 1 on the V100: compute 1e12 / 125e12 = 8 ms, memory 2 x 1 GB / (0.9 x 900
  // GB/s) = 2.469 ms, so 76.415% compute; x (0.76415 x 0.126339 + 0.23585 x 810 / 2847.5)
  // = x 0.163632. The same share at b = 2 (no parameters: both parts grow with b).
  EXPECT_NEAR(m.layers[1].forward_s[1][0], 0.1 * 0.163632, 1e-7);
  EXPECT_NEAR(m.layers[1].forward_s[1][1], 0.2 * 0.163632, 1e-7);
  // Its backward, 1 ms x 0.1636 = 0.16 ms, is below the H100's floor: 2 x 24.4 us x 1256 /
  // 47 ops per layer = 1.304 ms.
  EXPECT_NEAR(m.layers[1].backward_s[1][0], 2 * 24.4e-6 * 1256 / 47, 1e-12);
  EXPECT_NE((*d)->rule.find("V100-SXM2 times x"), std::string::npos) << (*d)->rule;
  // The plan names both specs: where each was read and its source.
  EXPECT_EQ((*d)->device_spec, "c.json $.device.spec: test figures");
  EXPECT_EQ((*d)->from_device_spec, "t.json $.spec.V100-SXM2: test figures");
  EXPECT_EQ((*d)->summary,
            "H100-SXM times derived from V100-SXM2 with the specs in c.json $.device.spec and "
            "t.json $.spec.V100-SXM2");
}

TEST(DeriveTimes, TheFiguresAreTheSpecsNotTheNames) {
  // A device the compiled table never knew, twice the V100 in peak and bandwidth, with no
  // floor: every time halves (the compute and the memory share both scale by 1/2).
  ModelProfile m = two_layer_model({v100()});
  auto d = derive_device_times(m, cluster_of(make_spec("X2", kCuda, 250e12, 1800e9, 0.9, 0)));
  ASSERT_TRUE(d.ok() && d->has_value()) << d.error().message;
  EXPECT_DOUBLE_EQ(m.layers[0].forward_s[1][0], 5e-3);
  EXPECT_DOUBLE_EQ(m.layers[1].forward_s[1][1], 0.1);
  EXPECT_DOUBLE_EQ(m.layers[1].backward_s[1][0], 0.5e-3);
}

TEST(DeriveTimes, ThePeakIsAtTheModelsPrecision) {
  // dtype bf16: the bf16 peaks are read. The source's bf16 peak is 4x its fp16 one here, so
  // the all-compute layer derives 4x slower than at fp16: 10 ms x 500 / 989.4 = 5.0536 ms.
  DeviceSpec from = v100();
  from.peak_flops["bf16"] = 500e12;
  DeviceSpec to = h100();
  to.peak_flops["bf16"] = 989.4e12;
  ModelProfile m = two_layer_model({from});
  m.dtype = "bf16";
  auto d = derive_device_times(m, cluster_of(to));
  ASSERT_TRUE(d.ok() && d->has_value()) << d.error().message;
  EXPECT_NEAR(m.layers[0].forward_s[1][0], 10e-3 * 500 / 989.4, 1e-12);
  // A spec without that precision cannot be a source or a target.
  ModelProfile n = two_layer_model({v100()});
  n.dtype = "bf16";
  auto e = derive_device_times(n, cluster_of(to));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("the model profile states no bf16 peak in its device specs "
                                   "(\"V100-SXM2\") to derive \"H100-SXM\" times from: to plan on "
                                   "it, add $.timing.device_specs[\"V100-SXM2\"]"),
            std::string::npos)
      << e.error().message;
  ModelProfile k = two_layer_model({from});
  k.dtype = "bf16";
  auto f = derive_device_times(k, cluster_of(h100()));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("and its device spec (c.json $.device.spec) states no "
                                   "peak_flops.bf16 (the model profile's dtype)"),
            std::string::npos)
      << f.error().message;
}

TEST(DeriveTimes, TakesTheNearestListedDevice) {
  // H200 has the H100's peak: nearer than either older device.
  ModelProfile m = two_layer_model({v100(), h200(), a910()});
  auto d = derive_device_times(m, cluster_of(h100()));
  ASSERT_TRUE(d.ok() && d->has_value());
  EXPECT_EQ((*d)->from_device_type, "H200-SXM");
  // plain: all compute, the same peak: the same time.
  EXPECT_EQ(m.layers[0].forward_s[3], m.layers[0].forward_s[1]);
}

TEST(DeriveTimes, PrefersTheSameSoftwareStackOverANearerSpec) {
  // By spec the 910A is nearer an H100 (|ln 256/989.4| + |ln 960/2847.5| = 2.44) than the
  // V100 (|ln 125/989.4| + |ln 810/2847.5| = 3.33), but its times are MindSpore's.
  ModelProfile m = two_layer_model({a910(), v100()});
  auto d = derive_device_times(m, cluster_of(h100()));
  ASSERT_TRUE(d.ok() && d->has_value());
  EXPECT_EQ((*d)->from_device_type, "V100-SXM2");
  ModelProfile n = two_layer_model({v100(), a910()});
  auto e = derive_device_times(n, cluster_of(b910()));
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->from_device_type, "Ascend-910A");
}

TEST(DeriveTimes, NothingToDeriveForAListedDeviceOrAnAlias) {
  ModelProfile m = two_layer_model({}, {"NVIDIA H200"});
  auto d = derive_device_times(m, cluster_of("H200-SXM", std::nullopt));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->has_value());
  EXPECT_EQ(m.device_types.size(), 1u);
  EXPECT_EQ(m.device_type_index("H200-SXM"), 0);
  EXPECT_EQ(m.device_type_index("H100-SXM"), -1);
  EXPECT_TRUE(same_device("Tesla V100-SXM2-32GB", "V100-SXM2"));
  EXPECT_FALSE(same_device("NVIDIA H200", "H100-SXM"));
  EXPECT_FALSE(same_device("NVIDIA B200", "B200"));  // a new device's aliases are data
}

TEST(DeriveTimes, AnExactNameWinsOverAnAlias) {
  ModelProfile m = two_layer_model({}, {"NVIDIA H200", "H200-SXM"});
  EXPECT_EQ(m.device_type_index("H200-SXM"), 1);
  EXPECT_EQ(m.device_type_index("NVIDIA H200"), 0);
}

TEST(DeriveTimes, AnAliasInTheClustersSpecIsTheSameDevice) {
  // A profile measured as "NVIDIA B200" on a "B200" cluster: its times as they are, and the
  // plan says where the alias is.
  ModelProfile m = two_layer_model({}, {"NVIDIA B200"});
  DeviceSpec b200 = make_spec("B200", kCuda, 2.25e15, 8e12, 0.85, 1e-3);
  b200.aliases = {"NVIDIA B200"};
  auto d = derive_device_times(m, cluster_of(b200));
  ASSERT_TRUE(d.ok() && d->has_value()) << d.error().message;
  EXPECT_EQ((*d)->from_device_type, "NVIDIA B200");
  EXPECT_EQ((*d)->rule,
            "the same device: \"NVIDIA B200\" is another name of \"B200\" (c.json "
            "$.device.spec.aliases); its times as they are");
  EXPECT_EQ((*d)->from_device_spec, "");
  EXPECT_EQ(m.layers[1].forward_s[1], m.layers[1].forward_s[0]);  // no floor, no scaling
  EXPECT_EQ(m.device_type_index("B200"), 1);
}

TEST(DeriveTimes, ADerivedTimeOverTheLayerLimitNamesTheLayer) {
  // plain: 10 ms forward at microbatch 1 on the V100, no FLOPs stated (all of it compute);
  // on a device of 10^6 FLOP/s the factor is 125e12 / 1e6 = 1.25e8: 1.25e6 s, finite and
  // over the 3600 s a layer may take.
  ModelProfile m = two_layer_model({v100()});
  const DeviceSpec slow = make_spec("Slow", kCuda, 1e6, 1e12, 1, 0);
  auto d = derive_device_times(m, cluster_of(slow));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().kind, ErrorKind::input);
  EXPECT_EQ(d.error().message,
            "two.json: layer \"plain\": its forward time derived for \"Slow\" is 1.25e+06 s, "
            "over the 3600 s a layer may take; its forward_flops_per_sample (0) or the device "
            "specs' figures are off");
}

TEST(DeriveTimes, WithoutASourceSpecTheErrorSaysWhatToAdd) {
  ModelProfile cpu = two_layer_model({}, {"CPU"});
  auto d = derive_device_times(cpu, cluster_of(h100()));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message,
            "two.json: model profile has times for device types [\"CPU\"], not for \"H100-SXM\" "
            "(cluster profile c.json), and the model profile states no device spec to derive "
            "\"H100-SXM\" times from: to plan on it, add $.timing.device_specs[\"CPU\"] (the spec "
            "of the device its times were taken on, with peak_flops.fp16; stack, peak_flops, "
            "memory_bytes_per_s, memory_efficiency, layer_floor_s, source; docs/formats.md, "
            "\"Device spec\") to two.json; or profile the model on that device "
            "(scripts/profile_torch.py or pulse-profile, device type \"H100-SXM\"), regenerate "
            "an analytic profile with the device (scripts/gen_profiles.py, docs/profiles.md), "
            "or add \"H100-SXM\" times to two.json by hand");
  EXPECT_EQ(cpu.device_types.size(), 1u);  // left as it was
}

TEST(DeriveTimes, WithoutATargetSpecTheErrorSaysWhatToAdd) {
  ModelProfile m = two_layer_model({v100()});
  auto d = derive_device_times(m, cluster_of("B200", std::nullopt));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message,
            "two.json: model profile has times for device types [\"V100-SXM2\"], not for "
            "\"B200\" (cluster profile c.json), and the cluster profile has no device spec to "
            "derive \"B200\" times with: to plan on it, add $.device.spec (stack, peak_flops, "
            "memory_bytes_per_s, memory_efficiency, layer_floor_s, source; docs/formats.md, "
            "\"Device spec\") to c.json; or profile the model on that device "
            "(scripts/profile_torch.py or pulse-profile, device type \"B200\"), regenerate an "
            "analytic profile with the device (scripts/gen_profiles.py, docs/profiles.md), or "
            "add \"B200\" times to two.json by hand");
  // A file of the old format: the spec needs the new one, and its peak is a start.
  ClusterProfile old = cluster_of("H100-SXM", std::nullopt);
  old.schema = "pulse.cluster/v1";
  old.v1_peak_fp16_flops = 989.4e12;
  auto e = derive_device_times(m, old);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find(
                "add $.device.spec (stack, peak_flops, memory_bytes_per_s, memory_efficiency, "
                "layer_floor_s, source; docs/formats.md, \"Device spec\") and \"schema\": "
                "\"pulse.cluster/v2\" (its $.device.peak_fp16_flops, 9.894e+14, is the spec's "
                "peak_flops.fp16) to c.json"),
            std::string::npos)
      << e.error().message;
  EXPECT_EQ(m.device_types.size(), 1u);
}

// --- Every shipped model on every shipped cluster -------------------------------------------

// The table src/profile/derive.cpp compiled in before the specs were data, and its rule.
struct Compiled {
  const char* name;
  const char* stack;
  double peak_flops;
  double bytes_per_s;
  double floor_s;
};
const Compiled kCompiledTable[] = {
    {"V100-SXM2", kCuda, 125e12, 0.9 * 900e9, 298e-6},
    {"Ascend-910A", kAscend, 256e12, 0.8 * 1.2e12, 20e-6},
    {"H100-SXM", kCuda, 989.4e12, 0.85 * 3.35e12, 24.4e-6 * 1256 / 47},
    {"H200-SXM", kCuda, 989.4e12, 0.85 * 4.8e12, 24.4e-6 * 1256 / 47},
    {"A100-SXM", kCuda, 312e12, 0.85 * 2.039e12, 24.4e-6 * 1256 / 47},
    {"Ascend-910B", kAscend, 354e12, 0.8 * 1.6e12, 5e-6 * 1256 / 47},
};

const Compiled* compiled(const std::string& name) {
  for (const Compiled& c : kCompiledTable) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

// The compiled rule: the nearest listed device (stack first), then the scaled time.
struct OldDerivation {
  int source = -1;
  std::vector<std::vector<double>> forward_s, backward_s;  // [layer][size]
};

OldDerivation old_derivation(const ModelProfile& m, const Compiled& to) {
  OldDerivation out;
  double best = 0;
  for (std::size_t t = 0; t < m.device_types.size(); ++t) {
    const Compiled* c = compiled(m.device_types[t]);
    if (!c) continue;
    const double d = (std::string(c->stack) == to.stack ? 0.0 : 1e6) +
                     std::abs(std::log(c->peak_flops / to.peak_flops)) +
                     std::abs(std::log(c->bytes_per_s / to.bytes_per_s));
    if (out.source < 0 || d < best) out.source = static_cast<int>(t), best = d;
  }
  if (out.source < 0) return out;
  const Compiled& from = *compiled(m.device_types[out.source]);
  for (const Layer& l : m.layers) {
    std::vector<double> f, b;
    for (std::size_t i = 0; i < m.microbatch_sizes.size(); ++i) {
      double share = 1.0;
      if (l.forward_flops_per_sample > 0) {
        const int mb = m.microbatch_sizes[i];
        const double compute = mb * l.forward_flops_per_sample / from.peak_flops;
        const double bytes = 2.0 * static_cast<double>(l.params) +
                             2.0 * mb * static_cast<double>(l.activation_bytes_per_sample);
        share = compute / (compute + bytes / from.bytes_per_s);
      }
      const double factor =
          share * from.peak_flops / to.peak_flops + (1 - share) * from.bytes_per_s / to.bytes_per_s;
      f.push_back(std::max(l.forward_s[out.source][i] * factor, to.floor_s));
      b.push_back(std::max(l.backward_s[out.source][i] * factor, 2 * to.floor_s));
    }
    out.forward_s.push_back(f);
    out.backward_s.push_back(b);
  }
  return out;
}

// The model without its times (and spec) for `type`: the planner derives them then.
ModelProfile without_type(ModelProfile m, const std::string& type) {
  const int t = m.device_type_index(type);
  if (t < 0) return m;
  m.device_types.erase(m.device_types.begin() + t);
  for (Layer& l : m.layers) {
    l.forward_s.erase(l.forward_s.begin() + t);
    l.backward_s.erase(l.backward_s.begin() + t);
  }
  std::erase_if(m.device_specs, [&](const DeviceSpec& s) { return s.name == type; });
  return m;
}

std::vector<std::string> shipped_files(const std::string& kind) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(kDeriveRoot + "/profiles/" + kind)) {
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(DeriveTimes, SpecsInTheFilesGiveTheCompiledTablesTimesOnEveryShippedPair) {
  std::vector<ModelProfile> models;
  for (const std::string& path : shipped_files("models")) {
    auto m = load_model_profile(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    models.push_back(std::move(*m));
  }
  int compared = 0;
  for (const std::string& path : shipped_files("clusters")) {
    auto c = load_cluster_profile(path);
    ASSERT_TRUE(c.ok()) << c.error().message;
    const Compiled* to = compiled(c->device_type);
    if (!to) continue;  // no compiled spec: the B200 (below), the CPU and emulated clusters
    for (const ModelProfile& full : models) {
      // The model as shipped (tiny-unet has no 2026 times) and without the cluster's type.
      ModelProfile m = without_type(full, c->device_type);
      const OldDerivation old = old_derivation(m, *to);
      auto d = derive_device_times(m, *c);
      SCOPED_TRACE(full.name + " on " + c->name);
      if (old.source < 0) {  // the compiled table could not derive these either
        EXPECT_FALSE(d.ok());
        continue;
      }
      ASSERT_TRUE(d.ok() && d->has_value()) << d.error().message;
      EXPECT_EQ((*d)->from_device_type, m.device_types[old.source]);
      const int t = static_cast<int>(m.device_types.size()) - 1;
      for (std::size_t l = 0; l < m.layers.size(); ++l) {
        EXPECT_EQ(m.layers[l].forward_s[t], old.forward_s[l]) << m.layers[l].name;
        EXPECT_EQ(m.layers[l].backward_s[t], old.backward_s[l]) << m.layers[l].name;
      }
      ++compared;
    }
  }
  // 32 clusters of the six compiled devices (V100 8, 910A 4, H100, H200, A100 and 910B 5
  // each) x the 10 models with specs (all but small-unet-cpu).
  EXPECT_EQ(compared, 320);
}

TEST(DeriveTimes, TheB200ClusterAloneBringsItsDevice) {
  auto m = load_model_profile(kDeriveRoot + "/profiles/models/sd2-unet-512.json");
  auto c = load_cluster_profile(kDeriveRoot + "/profiles/clusters/dgx-b200-1n.json");
  ASSERT_TRUE(m.ok() && c.ok());
  ASSERT_EQ(m->device_type_index("B200"), -1);
  // The compiled rule from the H200's times alone, with the B200's figures typed in: 2250
  // TFLOP/s, 0.85 x 8 TB/s, the Hopper floor.
  ModelProfile h200 = *m;
  for (const char* other : {"V100-SXM2", "Ascend-910A", "H100-SXM", "A100-SXM", "Ascend-910B"}) {
    h200 = without_type(h200, other);
  }
  const Compiled b200{"B200", kCuda, 2.25e15, 0.85 * 8e12, 24.4e-6 * 1256 / 47};
  const OldDerivation old = old_derivation(h200, b200);
  ASSERT_EQ(old.source, 0);

  auto d = derive_device_times(*m, *c);
  ASSERT_TRUE(d.ok() && d->has_value()) << d.error().message;
  // The nearest CUDA device: the H200 (|ln 2250/989.4| + |ln 6800/4080| = 1.33; H100 1.69).
  EXPECT_EQ((*d)->from_device_type, "H200-SXM");
  EXPECT_EQ(
      (*d)->device_spec.rfind("dgx-b200-1n.json $.device.spec: datasheet: NVIDIA HGX B200", 0), 0u)
      << (*d)->device_spec;
  EXPECT_EQ((*d)->from_device_spec.rfind(
                "sd2-unet-512.json $.timing.device_specs[\"H200-SXM\"]: datasheet: NVIDIA H200", 0),
            0u)
      << (*d)->from_device_spec;
  const int t = m->device_type_index("B200");
  for (std::size_t l = 0; l < m->layers.size(); ++l) {
    EXPECT_EQ(m->layers[l].forward_s[t], old.forward_s[l]) << m->layers[l].name;
    EXPECT_EQ(m->layers[l].backward_s[t], old.backward_s[l]) << m->layers[l].name;
  }
}

}  // namespace
}  // namespace pulse
