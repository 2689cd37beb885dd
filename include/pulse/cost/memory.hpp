// The memory rule, in one place. Every pass that asks "does it fit" calls this module: the
// partitioner (memory_bound), the schedule synthesizer (the in-flight limits and
// within_memory on each replay), the simulator (residency) and the plan's figures.
// (The independent checker, simulate/schedule_check.cpp, restates the rule on purpose.)
//
// What a device d holds, in bytes:
//
//   static(d)      = sum over its parameters of weight + gradient + optimizer bytes, each
//                    divided by dp where the ZeRO stage shards it (MemoryModel below), plus
//                    two workspaces a microbatch does not multiply: the unsharded weights
//                    ZeRO-3 gathers (the largest layer twice: the one running and the one
//                    prefetched) and the activations a recomputed layer rebuilds during its
//                    backward (the largest recompute_workspace_bytes of the device's stages)
//   act(s)         = the activations stage s keeps for backward, per microbatch
//   skip(d)        = the skip tensors (or their gradients) d caches, sends or receives, per
//                    microbatch: skips kept on d, and the skip bytes of every transfer d
//                    sends or receives
//
// The rule every schedule obeys: at every instant t,
//
//   static(d) + sum over stages s on d and microbatches m with
//                   start of F(s, m) <= t < end of the last backward of (s, m)   of act(s)
//             + sum over microbatches m in flight on d at t                       of skip(d)
//             <= capacity
//
// where m is in flight on d from the start of F(first stage of d, m) to the end of that
// stage's last backward. Two in-flight counts follow from it, per device:
//
//   memory_inflight_limits    n with static(d) + n * (sum of act(s) on d + skip(d)) <= capacity:
//                             fits whatever the order of the ops (the heuristic's limit,
//                             and the partitioner's bound, memory_bound)
//   resident_inflight_limits  n with static(d) + n * (act(first stage of d) + skip(d)) <= capacity:
//                             no schedule within the rule holds more (a device's later
//                             stages hold their activations for part of the stay only)
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"

namespace pulse {

/// Per-parameter bytes of the training state, by precision, and how ZeRO shards them. The
/// names are the runtime's too (pulse-run --precision, pulse-profile --precision, docs/torch.md):
///
///   "mixed" (the default; alias "bf16-mixed"): bf16 compute with fp32 master weights,
///     2 + 2 + 12 = 16 bytes: half-precision weights and gradients, an fp32 master copy and
///     Adam's fp32 m and v (ZeRO paper, Rajbhandari et al. 2020, section 3.1: "2Psi + 2Psi +
///     12Psi"; ../shared/reference/models_hw.md section 0). PyTorch autocast keeps fp32 weights
///     (4) and gradients (4) with Adam's m and v (8): the same 16 split otherwise.
///   "fp16-mixed": the same with fp16 compute and loss scaling: 2 + 2 + 12.
///   "bf16" (pure bf16): 2 + 2 + 4 = 8 bytes: bf16 weights and gradients, Adam's m and v in
///     bf16, no master copy.
///   "fp32": 4 + 4 + 8 = 16 bytes, everything in fp32; "fp64": 8 + 8 + 16 = 32 (the runtime's
///     exact tests train in it).
///
/// Activations are the profile's either way (its `dtype` and assumptions say which regime
/// they were counted in; docs/plans.md).
///
/// ZeRO stage: 0 every replica holds everything; 1 optimizer state / dp; 2 gradients too
/// (reduce-scattered every microbatch); 3 weights too (FSDP FULL_SHARD: each layer
/// all-gathered in forward and again in backward).
struct MemoryModel {
  std::string precision = "mixed";
  double weight_bytes_per_param = 2;
  double gradient_bytes_per_param = 2;
  double optimizer_bytes_per_param = 12;
  int zero_stage = 0;
  /// Ranks per data-parallel replica that share its samples by sequence parallelism
  /// (cost/sequence_parallel.hpp): ZeRO shards over dp x sequence_degree ranks.
  int sequence_degree = 1;

  /// The bytes per parameter of the precision `name` (above); false for another name.
  bool set_precision(const std::string& name);
  /// Empty when the bytes per parameter are those of `precision` (set_precision's); else
  /// what contradicts what, in words ("precision \"fp32\" holds 4 + 4 + 8 bytes per
  /// parameter, not 2 + 2 + 12"). A plan states both, and a runtime trains by the name.
  std::string precision_contradiction() const;

  std::int64_t weight_bytes(std::int64_t params) const {
    return scaled(params, weight_bytes_per_param);
  }
  std::int64_t gradient_bytes(std::int64_t params) const {
    return scaled(params, gradient_bytes_per_param);
  }
  /// The shares one replica of dp holds under the ZeRO stage.
  std::int64_t weight_share(std::int64_t params, int dp) const {
    return scaled(params, sharded(weight_bytes_per_param, 3, dp));
  }
  std::int64_t gradient_share(std::int64_t params, int dp) const {
    return scaled(params, sharded(gradient_bytes_per_param, 2, dp));
  }
  std::int64_t optimizer_bytes(std::int64_t params, int dp) const {
    return scaled(params, sharded(optimizer_bytes_per_param, 1, dp));
  }
  /// Weights + gradients + optimizer state held; the one formula partition and simulator share.
  std::int64_t static_bytes(std::int64_t params, int dp) const {
    return weight_share(params, dp) + gradient_share(params, dp) + optimizer_bytes(params, dp);
  }

  /// Field by field: the compiler's cache keeps answers by it (compile/compile_internal.hpp).
  auto operator<=>(const MemoryModel&) const = default;

 private:
  double sharded(double per_param, int from_stage, int dp) const {
    const int ranks = dp * sequence_degree;
    return zero_stage >= from_stage && ranks > 1 ? per_param / ranks : per_param;
  }
  static std::int64_t scaled(std::int64_t params, double per_param) {
    return static_cast<std::int64_t>(static_cast<double>(params) * per_param);
  }
};

struct MemoryBreakdown {
  std::int64_t weights = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer = 0;
  std::int64_t activations = 0;
  std::int64_t skip_cache = 0;  ///< Skip tensors (or their gradients) cached, sent or received.
  /// ZeRO-3's gathered layers and the activations a recomputed layer rebuilds (static(d)).
  std::int64_t workspace = 0;
  std::int64_t total() const {
    return weights + gradients + optimizer + activations + skip_cache + workspace;
  }
  bool operator==(const MemoryBreakdown&) const = default;
};

/// Static training state per device for the model's stages under `memory` at `dp`.
std::vector<MemoryBreakdown> static_memory(const PipelineModel& model, const MemoryModel& memory,
                                           int dp);

/// Per device: skip(d), the skip bytes one in-flight microbatch holds there.
std::vector<std::int64_t> skip_bytes_per_microbatch(const PipelineModel& model);
/// Per device: the most one in-flight microbatch holds there, the activations of all its
/// stages plus skip(d).
std::vector<std::int64_t> bytes_per_microbatch_at_most(const PipelineModel& model);
/// Per device: what an in-flight microbatch holds for its whole stay there, the activations
/// of the device's first stage plus skip(d).
std::vector<std::int64_t> bytes_per_microbatch_staying(const PipelineModel& model);

/// The partitioner's bound on one device: its static state (for `params` parameters at data
/// parallel degree `dp`) plus `inflight` microbatches holding `per_microbatch` bytes each.
/// A schedule that keeps within memory_inflight_limits never holds more.
/// Inline, as the partitioner's DP calls it for every transition it tries.
inline std::int64_t memory_bound(const MemoryModel& memory, std::int64_t params, int dp,
                                 int inflight, std::int64_t per_microbatch) {
  return memory.static_bytes(params, dp) + static_cast<std::int64_t>(inflight) * per_microbatch;
}

/// Microbatches each device may hold in flight whatever the order of its ops, capped at
/// `wanted` (memory_inflight_limits above). An entry of 0: not even one fits.
std::vector<int> memory_inflight_limits(const PipelineModel& model,
                                        const std::vector<std::int64_t>& static_bytes,
                                        std::int64_t capacity, const std::vector<int>& wanted);

/// The most microbatches any schedule within the rule can hold in flight on each device,
/// capped at `wanted` (resident_inflight_limits above). At least memory_inflight_limits;
/// an upper limit for searches and lower bounds, not a guarantee: schedules that reach it
/// are checked by replay (within_memory).
std::vector<int> resident_inflight_limits(const PipelineModel& model,
                                          const std::vector<std::int64_t>& static_bytes,
                                          std::int64_t capacity, const std::vector<int>& wanted);

/// One stage holding one microbatch's activations: from the start of its forward to the end
/// of its last backward (B, or W with a split backward).
struct ActivationHold {
  StageId stage = 0;
  double from_s = 0;
  double until_s = 0;
};

/// What the rule charges one device at its fullest, beyond the static state.
struct Residency {
  std::int64_t peak_bytes = 0;  ///< The largest sum of act and skip terms at any instant.
  int max_inflight = 0;         ///< The most microbatches in flight at once.
};

/// The rule's charge on device `device` over the holds of its stages (in any order). At one
/// instant, holds that end are released before holds that start are charged.
Residency residency(const PipelineModel& model, DeviceId device,
                    const std::vector<ActivationHold>& holds);

/// Whether a device with `static_bytes` of state and a residency peak of `resident_bytes`
/// keeps within `capacity`.
bool within_memory(std::int64_t static_bytes, std::int64_t resident_bytes, std::int64_t capacity);

}  // namespace pulse
