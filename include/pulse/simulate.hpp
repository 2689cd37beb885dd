// Evaluate pass: replays a schedule on the cost model and reports every number the planner
// publishes: op start and end times, per-device busy, send and idle time, memory peaks with
// their breakdown, bytes moved. Plans, baselines and `pulse-plan simulate` all use it.
#pragma once

#include <cstdint>
#include <vector>

#include "pulse/costs.hpp"
#include "pulse/pipeline_model.hpp"
#include "pulse/result.hpp"
#include "pulse/schedule.hpp"

namespace pulse {

struct MemoryBreakdown {
  std::int64_t weights = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer = 0;
  std::int64_t activations = 0;
  std::int64_t skip_cache = 0;  ///< Skip tensors (or their gradients) cached, sent or received.
  std::int64_t total() const { return weights + gradients + optimizer + activations + skip_cache; }
};

struct TimedOp {
  Op op;
  double start_s = 0;
  double end_s = 0;         ///< Compute done.
  double busy_until_s = 0;  ///< Blocking sends done (== end_s when sends overlap compute).
};

/// One point-to-point message batch: a transfer's tensors for one microbatch, one way.
struct TimedSend {
  std::size_t transfer = 0;  ///< Index into PipelineModel::transfers.
  int microbatch = 0;
  bool forward = true;  ///< Activations (true) or gradients (false).
  DeviceId to = 0;
  double start_s = 0;
  double end_s = 0;
};

struct DeviceTimeline {
  std::vector<TimedOp> ops;
  std::vector<TimedSend> sends;  ///< Sends this device made, in order.
  double compute_s = 0;
  double send_s = 0;     ///< Time blocked in sends.
  double idle_s = 0;     ///< Up to the pipeline makespan.
  MemoryBreakdown peak;  ///< At the moment of the peak.
  int max_inflight = 0;  ///< Largest number of microbatches in flight.
  /// Largest bytes held under the memory rule the schedules obey (see within_memory).
  std::int64_t resident_peak = 0;
};

struct Timeline {
  std::vector<DeviceTimeline> devices;
  double makespan_s = 0;
};

/// Static training state per device for the model's stages under `memory` at `dp`.
std::vector<MemoryBreakdown> static_memory(const PipelineModel& model, const MemoryModel& memory,
                                           int dp);

/// The memory rule every synthesized schedule obeys, checked on a replay: at every instant
/// the device's static state, plus each stage's activations for every microbatch between the
/// start of its forward and the end of its last backward there, plus the device's skip
/// bytes (PipelineModel::per_microbatch_skip_bytes) for every microbatch in flight, stays
/// within `capacity`. It never charges more than "microbatches in flight times the
/// per-microbatch bound", and, for skips kept on their device, never less than the
/// replay's own peak.
bool within_memory(const Timeline& timeline, const std::vector<MemoryBreakdown>& static_bytes,
                   std::int64_t capacity);

/// Replays `schedule`: every op starts as soon as its device is free and its inputs have
/// arrived. Fails (internal error) if the schedule misses an op, repeats one or deadlocks.
Result<Timeline> simulate(const PipelineModel& model, const Schedule& schedule,
                          int num_microbatches, const std::vector<MemoryBreakdown>& static_bytes);

}  // namespace pulse
