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

// The limits a plan file is held to while it is read are pulse/base/limits.hpp's ("What a
// plan file may state").

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
