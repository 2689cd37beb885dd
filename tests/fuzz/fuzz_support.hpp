// What the libFuzzer targets share: a check that stops the run (libFuzzer then saves the
// input that broke it), and the promises a loaded profile or a read plan makes to the code
// that uses it, restated here so a loader that lets a broken value through is a finding
// even where nothing downstream happens to trip on it.
//
// The promises are profile.hpp's ("loaded and fully validated before any work starts") and
// plan.hpp's ("every stage, device, op and skip index in a Plan that came through the
// reader is in range"); each check below names the one it stands for.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "pulse/base/result.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse::fuzz {

/// The fuzzer's bytes as text (JSON parsers take any bytes; invalid UTF-8 is an input error).
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Stops the run with `what` on stderr when `ok` is false. abort() rather than an
/// exception: libFuzzer reports it as a crash and writes the input to crash-<sha1>.
inline void require(bool ok, std::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "pulse fuzz check failed: %.*s\n", static_cast<int>(what.size()),
               what.data());
  std::abort();
}

/// A refused input: an input error (exit 2, never "internal") whose message starts with
/// the file name, as every loader message does.
inline void require_input_error(const Error& error, std::string_view file) {
  require(error.kind == ErrorKind::input, "a bad input must be an input error: " + error.message);
  require(error.message.rfind(std::string(file) + ":", 0) == 0,
          "an input error must start with the file name: " + error.message);
}

/// profile.hpp: the model's arrays agree with each other and its indices are in range.
inline void require_valid_model(const ModelProfile& m) {
  require(m.layers.size() >= 2, "a model has at least two layers");
  require(!m.microbatch_sizes.empty() && !m.device_types.empty(),
          "a model has microbatch sizes and device types");
  for (std::size_t i = 0; i < m.microbatch_sizes.size(); ++i) {
    require(m.microbatch_sizes[i] >= 1, "microbatch sizes are positive");
    require(i == 0 || m.microbatch_sizes[i] > m.microbatch_sizes[i - 1],
            "microbatch sizes increase");
  }
  for (const Layer& l : m.layers) {
    require(!l.name.empty(), "every layer has a name");
    require(l.params >= 0 && l.activation_bytes_per_sample >= 0 && l.output_bytes_per_sample >= 0,
            "layer sizes are not negative: " + l.name);
    require(l.backward_weight_fraction > 0 && l.backward_weight_fraction < 1,
            "backward_weight_fraction is in (0, 1): " + l.name);
    for (const auto* times : {&l.forward_s, &l.backward_s}) {
      require(times->size() == m.device_types.size(), "times for every device type: " + l.name);
      for (const auto& per_size : *times) {
        require(per_size.size() == m.microbatch_sizes.size(),
                "a time for every microbatch size: " + l.name);
        for (double t : per_size) require(t >= 0, "times are not negative: " + l.name);
      }
    }
  }
  const auto layers = static_cast<LayerId>(m.layers.size());
  for (const Skip& s : m.skips) {
    require(s.producer >= 0 && s.producer < s.consumer && s.consumer < layers,
            "a skip goes forward between layers that exist: " + s.name);
    require(s.bytes_per_sample >= 1, "a skip carries bytes: " + s.name);
  }
  for (const Carried& c : m.carried) {
    require(c.producer >= -1 && c.producer < layers, "a carried tensor's producer exists");
  }
  require(!m.file.sha256.empty(), "a loaded model records its hash");
}

/// profile.hpp: the cluster's link matrix is devices_per_node square, every link it names
/// exists, and the memory left for plans is positive.
inline void require_valid_cluster(const ClusterProfile& c) {
  require(c.devices_per_node >= 1 && c.nodes >= 1, "a cluster has devices");
  require(c.memory_bytes > 0 && c.reserved_bytes >= 0 && c.usable_memory() > 0,
          "a cluster leaves memory for plans");
  require(!c.link_classes.empty(), "a cluster has link classes");
  for (const LinkClass& l : c.link_classes) {
    require(l.bandwidth_bytes_per_s > 0 && l.latency_s >= 0, "a link moves bytes: " + l.name);
  }
  const auto classes = static_cast<int>(c.link_classes.size());
  const auto n = static_cast<std::size_t>(c.devices_per_node);
  require(c.intra_node.size() == n, "intra_node has a row per device");
  for (std::size_t a = 0; a < n; ++a) {
    require(c.intra_node[a].size() == n, "intra_node is square");
    for (std::size_t b = 0; b < n; ++b) {
      const int link = c.intra_node[a][b];
      require(a == b ? link == -1 : link >= 0 && link < classes, "intra_node names a link class");
    }
  }
  require(c.nodes == 1 || (c.inter_node >= 0 && c.inter_node < classes),
          "a cluster of several nodes names its inter-node link class");
  require(c.inter_node >= -1 && c.inter_node < classes, "inter_node is a link class or none");
  require(!c.file.sha256.empty(), "a loaded cluster records its hash");
}

/// plan.hpp: stages 0 .. num_stages-1 in order, devices 0 .. pp-1, microbatches
/// 0 .. num_microbatches-1, wherever the plan names one.
inline void require_indices_in_range(const Plan& p) {
  const int stages = p.num_stages(), devices = p.pp(), mbs = p.parallelism.num_microbatches;
  auto stage = [&](StageId s) { require(s >= 0 && s < stages, "a stage index is in range"); };
  auto device = [&](DeviceId d) { require(d >= 0 && d < devices, "a device index is in range"); };
  for (int s = 0; s < stages; ++s) {
    require(p.stages[s].id == s, "stages are listed in id order");
    device(p.stages[s].device);
  }
  for (const PlanDevice& d : p.devices) {
    device(d.device);
    for (StageId s : d.stages) stage(s);
  }
  for (const PlanSkip& k : p.skips) {
    stage(k.producer_stage);
    stage(k.consumer_stage);
    if (k.producer_device) device(*k.producer_device);
    if (k.consumer_device) device(*k.consumer_device);
  }
  for (const PlanTransfer& t : p.transfers) {
    stage(t.from_stage);
    stage(t.to_stage);
    if (t.from_device) device(*t.from_device);
    if (t.to_device) device(*t.to_device);
  }
  require(p.schedule.size() == static_cast<std::size_t>(devices), "a schedule per device");
  for (const auto& ops : p.schedule) {
    for (const PlanOp& o : ops) {
      stage(o.op.stage);
      require(o.op.mb >= 0 && o.op.mb < mbs, "a microbatch index is in range");
    }
  }
  if (p.predicted.devices) {
    for (const PlanDevicePrediction& d : *p.predicted.devices) device(d.device);
  }
}

}  // namespace pulse::fuzz
