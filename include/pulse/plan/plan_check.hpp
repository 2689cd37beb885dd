// What a plan file must be before any tool works on it: within the size limits below, and
// structurally whole. The codec (plan_codec.hpp) checks both when it reads a plan, so diff,
// export, simulate and validate never see a plan that would make them allocate without
// bound, run for ever, index out of range or silently report on half a schedule. validate
// reads without the structural check and lists its problems as violations instead.
//
// The limits are checked while the plan is read, before anything a plan's numbers size is
// allocated: the degrees ($.parallelism) first, then every count, time and byte count as
// it is read. Each is far beyond any job pulse-plan plans and close enough to keep a
// corrupt plan's cost in memory and time to seconds and hundreds of MiB.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pulse/base/json_check.hpp"
#include "pulse/base/limits.hpp"
#include "pulse/plan/plan.hpp"

namespace pulse {

// The pipeline degree ($.parallelism.pp) and microbatches per iteration
// ($.parallelism.num_microbatches) are held to the planner's own limits, kMaxPipelineDegree
// and kMaxMicrobatches (pulse/base/limits.hpp): no plan beyond them is one pulse-plan wrote.

/// Stages ($.parallelism.num_stages): 16 per device at the largest pipeline degree (the
/// families use 1, 2, 4 or 6).
inline constexpr int kMaxStages = 16 * kMaxPipelineDegree;
/// Ranks: pp x dp, world_size, devices_used and devices_total are at most this, and every
/// rank id is below it (2^20: a million devices).
inline constexpr int kMaxRanks = 1 << 20;
/// Schedule operations: num_stages x num_microbatches x 2 (F, B) or 3 (F, I, W) at most
/// this. Each op costs the reader, the replay and the exports about a hundred bytes, so the
/// largest plan stays under a GiB in memory (a 64-device W3 plan with 512 microbatches
/// and a split backward has 0.6M ops).
inline constexpr std::int64_t kMaxOps = std::int64_t{1} << 22;
/// Any time a plan states, in seconds ($.schedule[].ops[].end_s, stage and transfer times,
/// makespans, the iteration): 10^6 s, 11.6 days. Below 2^53 ns every time is still exact to
/// the nanosecond quantum in a double, and sums over kMaxOps ops stay finite.
inline constexpr double kMaxSeconds = 1e6;
/// Any byte or parameter count a plan states: 2^53 (8 PiB), the largest integer a double
/// holds exactly (the codec compares figures as doubles). What the tools derive from them is
/// held to it as well, so that no int64 sum or product of them overflows: a microbatch's
/// skip and carried tensors (bytes_per_sample x microbatch_size), an iteration's
/// point-to-point and all-reduce bytes, the static state of all stages, and their
/// activations and skips with every microbatch in flight.
inline constexpr std::int64_t kMaxBytes = std::int64_t{1} << 53;
/// What-if factors ($.options and $.cost_model compute_scale, link_scale; plan and diff
/// --compute-scale, --link-scale): from 1/1000 to 1000.
inline constexpr double kMaxScale = 1000;
inline constexpr double kMinScale = 1 / kMaxScale;
/// Bytes per parameter ($.options.memory): 10^6 (mixed-precision Adam needs 16); weights,
/// gradients and optimizer state of 9 * 10^12 parameters on one device still fit an int64.
inline constexpr double kMaxBytesPerParam = 1e6;
/// A plan file's size, checked before it is read: 1 GiB.
inline constexpr std::int64_t kMaxPlanFileBytes = std::int64_t{1} << 30;

/// One structural problem of a plan.
struct PlanProblem {
  std::string check;  ///< The validate check it belongs to: "schedule", "rank_map", "memory".
  JsonPath path;      ///< Where in the plan: $.schedule[1].ops[3].
  std::string message;
  /// How many problems this stands for: 1, or N for the "... and N more" of a check.
  std::size_t count = 1;
};

/// What every tool relies on beyond the shape the reader checks (types, required keys, each
/// index in range, the limits above); empty when the plan is whole. Checks:
///   schedule  schedule[] lists every pipeline device once, in device order (the reader);
///             every op's kind is F or B (F, I or W with a split backward), its stage runs
///             on the device whose list holds it, it ends no earlier than it starts, and
///             every op of every stage and microbatch is listed exactly once;
///   rank_map  world_size is pp x dp; ranks[] has pp x dp entries, each rank once, each
///             (dp_index, pipeline_device) within dp x pp and once; every rank id below
///             devices_total (when stated); pipeline_groups and data_parallel_groups hold
///             ranks[]'s ranks in their places;
///   memory    predicted.peak_memory_bytes has pp entries; predicted.devices[], when given,
///             one per device.
/// At most kMaxProblemsShown problems of one check are listed; one more says how many
/// were left out ("... and N more").
std::vector<PlanProblem> check_plan_structure(const Plan& plan);

/// What a plan says of itself that its own numbers contradict, checked without the profiles
/// by every command but validate (which checks each against the profiles, as its degrees,
/// layers, skips, schedule and rank_map violations):
///   degrees   global_batch = dp x microbatch_size x num_microbatches;
///   layers    no layer in two stages;
///   skips     each skip's producer_device, consumer_device and local agree with the devices
///             of its producer_stage and consumer_stage;
///   schedule  on each device, F before B (or I) before W of the same stage and microbatch;
///   rank_map  every rank's node and local_device as one count of devices per node numbers
///             them (rank = node x devices per node + local device).
/// Run on a plan that passed check_plan_structure.
std::vector<PlanProblem> check_plan_claims(const Plan& plan);

/// "global_batch G is not dp x microbatch_size x num_microbatches = N" when the degrees
/// disagree (check_plan_claims's degrees, and validate's), else nothing.
std::optional<std::string> global_batch_contradiction(const PlanParallelism& degrees);

inline constexpr std::size_t kMaxProblemsShown = 10;

}  // namespace pulse
