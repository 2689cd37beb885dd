// The request against the profiles, before any pass runs (see pulse/base/limits.hpp); the
// options alone were checked by their table (plan_options.cpp).
//
// Every byte a pass adds up is bounded by B = S x G x (L + 1) + P x (bytes of state per
// parameter): S the bytes per sample of all layers, skips and carried tensors together, G
// the global batch (a pipeline holds or sends at most G samples' worth per boundary), L + 1
// the boundaries a tensor may cross, P the parameters. Every second, by the same count of
// compute per sample (the profile's times over their microbatch sizes, which interpolation
// never exceeds), transfers at the slowest link and a ring all-reduce of every gradient.
// Computed in long double, where neither can overflow; beyond the limits the request is
// refused, so the passes' 64-bit sums cannot overflow and their times stay finite.

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compile_internal.hpp"
#include "pulse/base/limits.hpp"
#include "pulse/base/units.hpp"
#include "pulse/cost/cost_model.hpp"
#include "pulse/profile/derive.hpp"
#include "pulse/profile/recompute.hpp"
#include "pulse/profile/scaling.hpp"

namespace pulse::detail {

namespace {

// The most a profile's worst case can come to: per sample (bytes, compute seconds) and in
// all (parameters).
struct WorstCase {
  long double global_batch = 0;
  long double bytes_per_sample = 0;
  long double params = 0;
  long double seconds_per_sample = 0;
};

// Plans state times in whole nanoseconds. A layer's forward time at any microbatch size
// is at least the smaller of its per-sample time at the smallest profiled size and its
// smallest profiled time (interpolate_time); the stage holding the slowest such layer then
// takes at least 1 ns, so no iteration is 0 s long (nor its throughput infinite).
Status check_slowest_layer(const ModelProfile& model, const ClusterProfile& cluster,
                           int device_type) {
  const Layer* slowest_layer = nullptr;
  double slowest_forward = -1;
  for (const Layer& l : model.layers) {
    const std::vector<double>& times = l.forward_s.at(device_type);
    double least = times.front() / model.microbatch_sizes.front();
    for (double t : times) least = std::min(least, t);
    if (least > slowest_forward) {
      slowest_forward = least;
      slowest_layer = &l;
    }
  }
  static_assert(kMinSlowestLayerSeconds == kTimeQuantum_s);
  if (!slowest_layer || slowest_forward >= kMinSlowestLayerSeconds) return Ok{};
  return input_error(fmt::format(
      "{}: no layer of model {} takes 1 ns forward on {} (the slowest, \"{}\", may take as "
      "little as {:.3g} s); plans state times in whole nanoseconds, so every stage would take "
      "0 s. Are the times in seconds?",
      model.file.path, model.name, cluster.device_type, slowest_layer->name, slowest_forward));
}

WorstCase worst_case(const ModelProfile& model, const ClusterProfile& cluster,
                     const PlanOptions& options, int device_type) {
  WorstCase w;
  w.global_batch = options.global_batch.value_or(kDefaultSamplesPerDevice * cluster.num_devices());
  auto most_per_sample = [&](const std::vector<double>& times) {
    long double most = 0;
    for (std::size_t i = 0; i < times.size() && i < model.microbatch_sizes.size(); ++i) {
      most = std::max(most, static_cast<long double>(times[i]) / model.microbatch_sizes[i]);
    }
    return most;
  };
  for (const Layer& l : model.layers) {
    w.bytes_per_sample +=
        static_cast<long double>(l.activation_bytes_per_sample) + l.output_bytes_per_sample;
    w.params += l.params;
    w.seconds_per_sample += most_per_sample(l.forward_s.at(device_type)) +
                            most_per_sample(l.backward_s.at(device_type));
  }
  for (const Skip& k : model.skips) w.bytes_per_sample += k.bytes_per_sample;
  for (const Carried& c : model.carried) w.bytes_per_sample += c.bytes_per_sample;
  return w;
}

Status check_worst_bytes(const ModelProfile& model, const PlanOptions& options,
                         const WorstCase& w) {
  const long double boundaries = static_cast<long double>(model.layers.size()) + 1;
  const MemoryModel& mem = options.memory;
  const long double state_per_param = static_cast<long double>(mem.weight_bytes_per_param) +
                                      mem.gradient_bytes_per_param + mem.optimizer_bytes_per_param;
  const long double bytes =
      w.bytes_per_sample * w.global_batch * boundaries + w.params * state_per_param;
  if (bytes <= kMaxRequestBytes) return Ok{};
  return input_error(fmt::format(
      "{}: {} at a global batch of {} could hold or send up to {:.3g} bytes in one iteration "
      "({} per sample across {} layers, {:.3g} parameters), above the {:.3g} pulse-plan counts "
      "in 64-bit integers (see docs/limits.md)",
      model.file.path, model.name, static_cast<long long>(w.global_batch),
      static_cast<double>(bytes), format_bytes(static_cast<std::int64_t>(w.bytes_per_sample)),
      model.layers.size(), static_cast<double>(w.params), static_cast<double>(kMaxRequestBytes)));
}

Status check_worst_seconds(const ModelProfile& model, const ClusterProfile& cluster,
                           const PlanOptions& options, const WorstCase& w) {
  const long double boundaries = static_cast<long double>(model.layers.size()) + 1;
  long double slowest = std::numeric_limits<double>::max(), latency = 0;
  for (const LinkClass& l : cluster.link_classes) {
    slowest = std::min<long double>(slowest, l.bandwidth_bytes_per_s);
    latency = std::max<long double>(latency, l.latency_s);
  }
  const long double G = w.global_batch;
  const long double seconds = w.seconds_per_sample * G +
                              (w.bytes_per_sample * G / slowest + latency * G) * boundaries +
                              2 * w.params * options.memory.gradient_bytes_per_param / slowest +
                              2 * latency * cluster.num_devices();
  if (seconds <= kMaxRequestSeconds) return Ok{};
  return input_error(fmt::format(
      "{} on {} at a global batch of {} could take up to {:.3g} s an iteration (compute {:.3g} "
      "s per sample; slowest link {:.3g} B/s), above the {:.3g} s pulse-plan plans for (see "
      "docs/limits.md)",
      model.name, cluster.name, static_cast<long long>(G), static_cast<double>(seconds),
      static_cast<double>(w.seconds_per_sample), static_cast<double>(slowest), kMaxRequestSeconds));
}

}  // namespace

Status scale_inputs(const ModelProfile& model, const ClusterProfile& cluster, PlanOptions& options,
                    PlannedInputs& out) {
  out.model = &model;
  out.cluster = &cluster;
  if (model.device_type_index(cluster.device_type) < 0) {
    ModelProfile& copy = out.scaled_model.emplace(model);
    auto derived = derive_device_times(copy, cluster);
    if (!derived) return derived.error();
    out.derived_times = std::move(*derived);
    out.model = &copy;
  }
  CostScales& scales = options.scales;
  if (auto resolved = resolve_compute_scale(scales, *out.model, cluster.device_type); !resolved) {
    return Error{resolved.error().kind, "plan: " + resolved.error().message};
  }
  if (auto s = check_scale_limit("plan", "--compute-scale", scales.compute); !s) return s.error();
  const double headroom = options.headroom_fraction();
  if (scales.identity() && options.recompute == "none" && headroom == 1 &&
      options.sequence.none()) {
    return Ok{};
  }
  // The plan is made from the scaled (and recomputing) profiles, on devices whose usable
  // memory is capped at the headroom, and names the files as they are.
  if (!out.scaled_model) out.scaled_model.emplace(model);
  out.model = &*out.scaled_model;
  out.cluster = &out.scaled_cluster.emplace(cluster);
  apply_scales(scales, *out.scaled_model, *out.scaled_cluster);
  apply_recompute(options.recompute, *out.scaled_model);
  apply_headroom(headroom, *out.scaled_cluster);
  if (!options.sequence.none()) {  // one device of each sequence group (alternatives.cpp)
    // The cluster planned has one device per group: the batch stays the whole cluster's.
    if (!options.global_batch)
      options.global_batch = kDefaultSamplesPerDevice * cluster.num_devices();
    if (auto s = check_sequence_layout(*out.model, *out.cluster, options.sequence); !s) {
      return Error{s.error().kind, "plan: " + s.error().message};
    }
    *out.scaled_model = sequence_parallel_model(*out.scaled_model, options.sequence, cluster);
    *out.scaled_cluster = sequence_group_cluster(*out.scaled_cluster, options.sequence);
  }
  return Ok{};
}

// A given cut (--cuts, --partition-from) names layers of this model, each after the last.
Status check_cut_layers(const ModelProfile& model, const PlanOptions& options) {
  std::map<std::string, int> index;
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    index.emplace(model.layers[l].name, static_cast<int>(l));
  }
  int previous = 0;
  for (const std::string& name : options.cuts) {
    const auto it = index.find(name);
    if (it == index.end()) {
      return usage_error(
          fmt::format("plan: the cut names layer \"{}\", which model {} does not "
                      "have",
                      name, model.name));
    }
    if (it->second <= previous) {
      return usage_error(fmt::format(
          "plan: the cut's stage starting at layer {} (layer {} of model {}) does not come after "
          "the previous stage's first layer (layer {}): a cut names each stage's first layer, "
          "in model order",
          name, it->second, model.name, previous));
    }
    previous = it->second;
  }
  return Ok{};
}

// A given cut is a pipeline: its stages on 2 devices or more, at a degree where a family
// searched has as many stages (the V 2 x pp, a chain pp, k waves 2k x pp). At pp 1 every stage
// would run on one device, data parallelism that throws the cut away, so the degree the cut
// implies is 2 or more (the tuner tries those, pipeline_degrees); a cut no degree takes is
// refused here, never planned as another partition.
Status check_cut_degrees(const ClusterProfile& cluster, const PlanOptions& options) {
  if (options.cuts.empty()) return Ok{};
  const int stages = static_cast<int>(options.cuts.size()) + 1;
  const auto takes = [&](int pp) {
    for (const Family* f : searched_families(options)) {
      if (f->num_stages(pp) == stages) return true;
    }
    return false;
  };
  if (options.pp == 1) {
    return usage_error(fmt::format(
        "plan: the given cut is a pipeline of {} stages; --pp 1 would run them all on one device "
        "(data parallelism, the cut thrown away): give --pp 2 or more, or leave --pp out",
        stages));
  }
  const auto sizes = [&](int pp) {
    std::vector<int> out;
    for (const Family* f : searched_families(options)) out.push_back(f->num_stages(pp));
    return fmt::format("{}", fmt::join(out, ", "));
  };
  if (options.pp) {
    if (takes(*options.pp)) return Ok{};
    return usage_error(fmt::format(
        "plan: the given cut has {} stages; at --pp {} the families searched have [{}] stages",
        stages, *options.pp, sizes(*options.pp)));
  }
  const int most = std::min(kMaxPipelineDegree, cluster.num_devices() / options.dp.value_or(1));
  for (int pp = 2; pp <= most; ++pp) {
    if (takes(pp)) return Ok{};
  }
  return usage_error(fmt::format(
      "plan: the given cut has {} stages, which no family searched makes at a pipeline degree "
      "from 2 to {} (cluster {}{}): the V has 2 x pp stages, a chain pp, k waves 2k x pp",
      stages, most, cluster.name, options.dp ? fmt::format(" at --dp {}", *options.dp) : ""));
}

Result<int> check_request(const ModelProfile& model, const ClusterProfile& cluster,
                          const PlanOptions& options) {
  // scale_inputs derived the cluster's device type when the model had none (or said why not).
  if (auto s = check_cut_layers(model, options); !s) return s.error();
  if (auto s = check_cut_degrees(cluster, options); !s) return s.error();
  const int device_type = model.device_type_index(cluster.device_type);
  if (options.dp && *options.dp > cluster.num_devices()) {
    return usage_error(fmt::format("--dp {} needs at least {} devices; cluster {} has {}",
                                   *options.dp, *options.dp, cluster.name, cluster.num_devices()));
  }
  if (auto s = check_slowest_layer(model, cluster, device_type); !s) return s.error();
  const WorstCase w = worst_case(model, cluster, options, device_type);
  if (auto s = check_worst_bytes(model, options, w); !s) return s.error();
  if (auto s = check_worst_seconds(model, cluster, options, w); !s) return s.error();
  return device_type;
}

Result<Config> resolve_config(const CompileInputs& in, int pp, int dp, int microbatch_size) {
  const ModelProfile& model = *in.model;
  const ClusterProfile& cluster = *in.cluster;
  const PlanOptions& options = *in.options;
  Config c;
  const int devices = cluster.num_devices();
  c.pp = pp;
  c.dp = dp;
  c.microbatch_size = microbatch_size;
  c.global_batch = options.global_batch.value_or(kDefaultSamplesPerDevice * devices);
  const int layers = static_cast<int>(model.layers.size());
  int least = 0;
  for (const Family* f : searched_families(options)) {
    least = least == 0 ? f->num_stages(pp) : std::min(least, f->num_stages(pp));
  }
  if (!options.dp && pp > devices) {
    return usage_error(
        fmt::format("--pp {} needs {} devices; cluster {} has {}", pp, pp, cluster.name, devices));
  }
  if (pp < 1 || dp < 1 || static_cast<long>(pp) * dp > devices) {
    return usage_error(fmt::format("--pp {} x --dp {} needs {} devices; cluster {} has {}", pp, dp,
                                   static_cast<long>(pp) * dp, cluster.name, devices));
  }
  if (layers < least) {
    return usage_error(
        fmt::format("--pp {} with strategy {} needs at least {} layers ({} stages "
                    "of one layer or more); model {} has {}",
                    pp, strategy_name(options.strategy), least, least, model.name, layers));
  }
  const long per_step = static_cast<long>(dp) * microbatch_size;
  if (c.global_batch % per_step != 0) {
    return usage_error(
        fmt::format("global batch {} is not divisible by dp {} x microbatch size "
                    "{} = {}",
                    c.global_batch, dp, microbatch_size, per_step));
  }
  if (c.global_batch / per_step > kMaxMicrobatches) {
    return usage_error(fmt::format(
        "global batch {} at dp {} x microbatch size {} is {} microbatches per pipeline, above "
        "pulse-plan's limit of {} (use a larger microbatch size or a smaller global batch)",
        c.global_batch, dp, microbatch_size, c.global_batch / per_step, kMaxMicrobatches));
  }
  c.num_microbatches = static_cast<int>(c.global_batch / per_step);
  // The plan states every op of its schedule, and a plan holds at most kMaxOps of them: a
  // configuration beyond that for all its families could be planned but not written (pp
  // 1024 over 2048 layers at 4096 microbatches: 16.8M ops, 192 s of planning, then refused).
  if (const std::int64_t ops = schedule_ops(options, least, c.num_microbatches); ops > kMaxOps) {
    return usage_error(fmt::format(
        "{} microbatches over {} stages (pp {}) are {} schedule ops, above the {} a plan "
        "states (use a larger microbatch size or a smaller global batch)",
        c.num_microbatches, least, pp, ops, kMaxOps));
  }
  return c;
}

std::int64_t schedule_ops(const PlanOptions& options, int stages, int num_microbatches) {
  return std::int64_t{stages} * num_microbatches * (options.split_backward ? 3 : 2);
}

}  // namespace pulse::detail
