// An independent check of a plan against the profiles it claims to come from: written apart
// from the planner, it rebuilds what it can from the plan's own layer lists and the two
// profiles, and compares. Plans written by hand or by another tool are checked the same way.
#pragma once

#include <string>
#include <vector>

#include "pulse/plan/plan.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

struct ValidateRequest {
  const Plan* plan = nullptr;
  const ModelProfile* model = nullptr;
  const ClusterProfile* cluster = nullptr;
  /// At most this many violations of one check are listed; the rest are counted.
  std::size_t max_per_check = 10;
};

/// One thing wrong with a plan.
struct Violation {
  /// Which check: "inputs", "degrees", "layers", "placement", "stages", "skips",
  /// "transfers", "schedule", "timing", "memory", "rank_map", "predicted" or "summary".
  std::string check;
  std::string message;  ///< Names the stage, device, op or layer, and the numbers; one line.
};

struct ValidateResult {
  std::vector<Violation> violations;  ///< In check order; empty when the plan is valid.
  /// Checks that could not run because an earlier one failed (e.g. no schedule check
  /// without a stage layout that covers the model), in order.
  std::vector<std::string> skipped;
  std::size_t total = 0;  ///< Violations found, listed or not.
  bool ok() const { return violations.empty(); }
};

/// A plan whose cost_model states a compute_scale or link_scale is checked against the
/// profiles scaled by them (profile/scaling.hpp), as the planner made it. The plan may come
/// from load_plan(..., PlanCheck::shape_only): its structural problems (plan_check.hpp:
/// schedule, rank_map and memory counts) are violations, listed after inputs and degrees,
/// and the checks after them are skipped. Checks, in order:
///   inputs     sha256 of the model and cluster profiles against inputs.*.sha256, the
///              device type, and cost_model's overlap_comm, allreduce and time quantum;
///   degrees    pp x dp within the cluster, global_batch = dp x microbatch_size x
///              num_microbatches, devices_used / devices_total;
///   (structure check_plan_structure, with each problem's JSON path;)
///   layers     every model layer in exactly one stage, stages in execution order;
///   placement  stage -> device is the V (2P stages) or the chain (P stages) the strategy
///              says, stage sides, devices[].stages;
///   stages     each stage's forward/backward/weight times, params and activation bytes, and
///              each device's load_s and params, against the pipeline model rebuilt from the
///              layer lists and the profiles;
///   skips      each skip's producer/consumer stage, devices, locality and route recomputed
///              from the layer lists; devices[].cached_skips;
///   transfers  the plan's transfers against the rebuilt pipeline model (bytes, times, the
///              link class each way);
///   schedule   every op once on its stage's device, one op at a time per device,
///              dependencies with their transfer times (check_schedule);
///   timing     op durations against the cost model, the claimed makespan;
///   memory     static state plus microbatches in flight within the usable memory, each
///              device's inflight_limit, and the predicted peaks;
///   rank_map   every rank in the cluster, on the node and local device claimed;
///   predicted  when every check above passed: `comm`, `predicted` (iteration, samples/s,
///              bubble, makespan, all-reduce, peaks and the per-device breakdown) and the
///              solver's makespan, peak activation bytes and memory curve, recomputed by
///              replaying the plan on the cluster (tools/replay.hpp) and compared;
///   summary    partition.objective_s (the largest device load) and lower_bound_s, the
///              chosen family's and the chosen search candidate's degrees and figures, and
///              the options given, against what they summarise.
ValidateResult validate_plan(const ValidateRequest& request);

}  // namespace pulse
