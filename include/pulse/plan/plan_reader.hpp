// Reading a plan back: a pulse.plan/v1 JSON document (written by `pulse-plan plan`, by
// another tool or by hand) parsed into plain structs for diff, validate, export and
// simulate. The reader checks the shape (types, required keys, as schema/plan.schema.json
// requires them) and that every index is in range, so consumers can index without
// checking; whether the plan is *right* (layers, placement, timing, memory) is validate's
// job. Keys the reader does not know are ignored: plans may gain keys within v1.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pulse/cost/cost_model.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/base/result.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/simulate/simulate.hpp"
#include "pulse/cost/memory.hpp"

namespace pulse {

/// The schema tag of plans this version writes and reads.
inline constexpr const char* kPlanSchema = "pulse.plan/v1";

/// `inputs.model` or `inputs.cluster`: the profile a plan was made from.
struct PlanInput {
  std::string file;  ///< File name without directories.
  std::string name;  ///< The profile's `name`.
  std::string sha256;
  std::string provenance;
};

/// `parallelism`: the degrees.
struct PlanParallelism {
  int pp = 1;
  int dp = 1;
  int microbatch_size = 1;
  int num_microbatches = 1;
  int global_batch = 1;
  int num_stages = 1;
  int devices_used = 0;   ///< 0 when absent.
  int devices_total = 0;  ///< 0 when absent.
  std::string device_type;
};

/// `partition`: how the cut was found.
struct PlanPartition {
  std::string method;
  double objective_s = 0;
  double lower_bound_s = 0;
  bool exact = false;
  bool all_skips_local = false;
};

struct PlanStage {
  StageId id = 0;
  DeviceId device = 0;
  std::string side;                 ///< "encoder", "decoder", "chain" or "" when absent.
  std::vector<std::string> layers;  ///< Layer names in execution order.
  double forward_s = 0;
  double backward_s = 0;
  bool has_times = false;         ///< forward_s and backward_s were both given.
  double backward_weight_s = -1;  ///< The W share of backward_s; -1 when absent.
  std::int64_t params = 0;
  std::int64_t activation_bytes_per_microbatch = 0;
};

struct PlanDevice {
  DeviceId device = 0;
  std::vector<StageId> stages;
  double load_s = 0;
  std::int64_t params = 0;
  int inflight_limit = 0;  ///< 0 when absent.
  std::vector<std::string> cached_skips;
};

struct PlanSkip {
  std::string name;  ///< "producer->consumer" when the plan gives none.
  std::string producer;
  std::string consumer;
  std::int64_t bytes_per_sample = 0;
  StageId producer_stage = 0;
  StageId consumer_stage = 0;
  DeviceId producer_device = -1;  ///< As claimed; -1 when absent.
  DeviceId consumer_device = -1;  ///< As claimed; -1 when absent.
  bool local = false;
  std::string route;  ///< "local", "direct", "forwarded" or "" when absent.
};

struct PlanCarried {
  std::string name;
  std::string producer;  ///< Empty: comes with the input batch.
  std::int64_t bytes_per_sample = 0;
  bool needs_gradient = false;
};

struct PlanTransfer {
  StageId from_stage = 0;
  StageId to_stage = 0;
  DeviceId from_device = -1;  ///< As claimed; -1 when absent.
  DeviceId to_device = -1;    ///< As claimed; -1 when absent.
  std::string kind;           ///< "main" or "skip" ("" when absent).
  Bytes forward;              ///< Per microbatch.
  Bytes backward;             ///< Per microbatch.
  double forward_s = 0;
  double backward_s = 0;
  bool has_times = false;     ///< forward_s and backward_s were both given.
  int forward_messages = -1;  ///< -1 when absent.
  int backward_messages = -1;
  std::string forward_link;  ///< Link class name, or "" when absent.
  std::string backward_link;
  std::vector<std::string> skips;
};

/// `cost_model`: the cluster settings the predicted figures assume.
struct PlanCostModel {
  bool present = false;
  bool overlap_comm = false;
  std::string allreduce;  ///< "ring" or "hierarchical".
};

/// One operation of a device's schedule with its predicted times.
struct PlanOp {
  Op op;
  double start_s = 0;
  double end_s = 0;
};

struct PlanScheduleInfo {
  std::string policy;
  /// From `schedule_info.split_backward`; when absent, whether any op is I or W.
  bool split_backward = false;
  double makespan_s = 0;
};

struct PlanComm {
  std::int64_t p2p_bytes_per_iteration = 0;
  std::int64_t skip_bytes_per_iteration = 0;
  std::int64_t activation_bytes_per_iteration = 0;
  std::int64_t carried_bytes_per_iteration = 0;
  std::int64_t allreduce_bytes_per_iteration = 0;
};

/// `predicted.devices[]`: one pipeline device's predicted figures.
struct PlanDevicePrediction {
  DeviceId device = 0;
  double compute_s = 0;
  double send_s = 0;
  double idle_s = 0;
  double allreduce_s = 0;
  std::int64_t peak_memory_bytes = 0;
  std::int64_t capacity_bytes = 0;  ///< 0 when absent.
  MemoryBreakdown memory;           ///< At the peak; zeros when absent.
};

struct PlanPredicted {
  double iteration_s = 0;
  double samples_per_s = 0;
  double bubble_ratio = 0;
  double pipeline_makespan_s = 0;
  double allreduce_exposed_s = 0;
  std::vector<std::int64_t> peak_memory_bytes;  ///< Per pipeline device.
  std::vector<PlanDevicePrediction> devices;    ///< Empty when absent.
};

struct PlanRank {
  RankId rank = 0;
  int node = 0;
  int local_device = 0;
  int dp_index = 0;
  DeviceId pipeline_device = 0;
};

struct PlanRankMap {
  int world_size = 0;  ///< 0 when absent.
  std::vector<PlanRank> ranks;
  std::vector<std::vector<RankId>> pipeline_groups;       ///< [dp_index][pipeline device].
  std::vector<std::vector<RankId>> data_parallel_groups;  ///< [pipeline device][dp_index].
  std::vector<RankId> unused_ranks;
};

/// A plan as read from its JSON. Every stage, device, op and skip index in it is in range
/// (stages are 0 .. parallelism.num_stages-1 in order, devices 0 .. pp-1, microbatches
/// 0 .. num_microbatches-1); nothing else is guaranteed.
struct Plan {
  std::string file;  ///< As given to load_plan / parse_plan, for messages.
  std::string schema;
  std::string generator;  ///< "name version", or "" when absent.
  PlanInput model;
  PlanInput cluster;
  std::string strategy;  ///< `options.strategy` ("pulse", "sequential", ...), or "".
  MemoryModel memory;    ///< `options.memory`, defaults where absent.
  PlanParallelism parallelism;
  PlanPartition partition;
  std::vector<PlanStage> stages;
  std::vector<PlanDevice> devices;
  std::vector<PlanSkip> skips;
  std::vector<PlanCarried> carried;
  std::vector<PlanTransfer> transfers;
  std::vector<std::vector<PlanOp>> schedule;  ///< [pipeline device]: ops in execution order.
  PlanScheduleInfo schedule_info;
  PlanCostModel cost_model;
  PlanComm comm;
  PlanPredicted predicted;
  PlanRankMap rank_map;

  int pp() const { return parallelism.pp; }
  int num_stages() const { return static_cast<int>(stages.size()); }
  /// The V (2P stages, stage d and 2P-1-d on device d) as opposed to a chain.
  bool is_v() const;
  /// Stage of every layer name, in the plan's order: (layer, stage) pairs.
  std::vector<std::pair<std::string, StageId>> layer_stages() const;
  /// Total number of schedule operations.
  std::size_t num_ops() const;
};

/// Reads and checks a plan file. Errors (input kind, exit 2) are every problem found, each
/// as "FILE: $.json.path: expected ..., got ...".
Result<Plan> load_plan(const std::string& path);
/// The same from text in memory; `file` is the name used in messages.
Result<Plan> parse_plan(std::string_view text, const std::string& file);

}  // namespace pulse
