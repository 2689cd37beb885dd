// Evaluate pass: replays a schedule on the cost model and reports every number the planner
// publishes: op start and end times, per-device busy, send and idle time, memory peaks with
// their breakdown, bytes moved. Plans, baselines and `pulse-plan simulate` all use it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pulse/base/result.hpp"
#include "pulse/cost/memory.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse {

struct TimedOp {
  Op op;
  double start_s = 0;
  double end_s = 0;         ///< Compute done.
  double busy_until_s = 0;  ///< Blocking sends done (== end_s when sends overlap compute).
};

/// One point-to-point message batch: a transfer's tensors for one microbatch, one way.
struct TimedSend {
  std::size_t transfer = 0;  ///< Index into PipelineModel::transfers.
  int mb = 0;                ///< Microbatch index, 0 .. num_microbatches-1.
  bool forward = true;       ///< Activations (true) or gradients (false).
  DeviceId to = 0;
  double start_s = 0;
  double end_s = 0;
};

struct DeviceTimeline {
  std::vector<TimedOp> ops;
  /// Sends this device made, in order, where the replay recorded them (Sends::recorded: a
  /// trace's replay). Empty otherwise: the planner's replays read none of them, and at pp 128
  /// over 2048 layers they were 360 MB of a tuned plan's 780 MB peak.
  std::vector<TimedSend> sends;
  double compute_s = 0;
  double send_s = 0;     ///< Time blocked in sends.
  double idle_s = 0;     ///< Up to the pipeline makespan.
  MemoryBreakdown peak;  ///< What the device really holds at its fullest, by kind.
  int max_inflight = 0;  ///< Largest number of microbatches in flight (cost/memory.hpp).
  /// Largest bytes the memory rule charges beyond the static state (cost/memory.hpp).
  std::int64_t resident_peak = 0;
};

struct Timeline {
  std::vector<DeviceTimeline> devices;
  double makespan_s = 0;
  /// Each device's peak has the bytes really held, not the memory rule's figures alone (a
  /// replay with Peaks::held); keep_last_ops and with_last_ops keep it. With every op here
  /// (not last_ops_only), another such replay of the same schedule gives this timeline to
  /// the bit.
  bool peaks_held = false;
  /// Only each device's last ops are here (keep_last_ops, with_last_ops, a replay with
  /// KeptOps::last); every figure is the whole timeline's.
  bool last_ops_only = false;
};

/// Whether every device of a replayed timeline keeps within `capacity` under the memory
/// rule (cost/memory.hpp): its static state plus its residency peak.
bool within_memory(const Timeline& timeline, const std::vector<MemoryBreakdown>& static_bytes,
                   std::int64_t capacity);

/// Releases each device's ops but its last (which says where the device's share of the
/// iteration ends) and, where that is of an earlier microbatch, the first of its latest
/// (evaluate counts the microbatches from the ops): the figures stay (the makespan, each
/// device's peaks, times and last end), so the timeline is still weighed as it was; a replay
/// gives the ops back.
void keep_last_ops(Timeline& timeline);

/// A copy of `timeline` as keep_last_ops leaves it, without copying the ops it releases.
Timeline with_last_ops(const Timeline& timeline);

/// What a replay computes of memory: everything (`held`: also the bytes each device really
/// holds at its peak, `DeviceTimeline::peak`, which sorts every allocation and release), or
/// only what the memory rule charges (`rule_only`: `resident_peak` and `max_inflight`, all
/// a search needs to compare candidates and check them; `peak` keeps only the static state).
enum class Peaks { held, rule_only };

/// Whether a replay keeps every send it makes (DeviceTimeline::sends): only a trace shows
/// them; the times, the memory and the bytes a plan states do not need them.
enum class Sends { dropped, recorded };

/// Which ops a replay keeps: every one, or each device's last as keep_last_ops leaves them
/// (the figures, not the ops: a caller that weighs the replay and drops it, or keeps only
/// its figures; at pp 512 over 2048 layers the ops are 6.3 million, 200 MB).
enum class KeptOps { all, last };

/// Replays `schedule`: every op starts as soon as its device is free and its inputs have
/// arrived. Fails (internal error) if the schedule misses an op, repeats one or deadlocks.
/// With KeptOps::last the timeline is the one keep_last_ops leaves of the whole, to the bit.
Result<Timeline> simulate(const PipelineModel& model, const Schedule& schedule,
                          int num_microbatches, const std::vector<MemoryBreakdown>& static_bytes,
                          Peaks peaks = Peaks::held, Sends sends = Sends::dropped,
                          KeptOps ops = KeptOps::all);

namespace detail {

class ExecutionEngine;  // engine.hpp

/// simulate's bookkeeping, for a caller whose engine runs the ops itself (the list
/// scheduler): record_op adds an op device d ran (TimedOp from ExecutionEngine::execute_at),
/// in its order on d; once every op has run, finish_timeline sets the rest as simulate does
/// (idle times, the sends kept, the memory `peaks` asks for, the static state). The timeline
/// is then the one simulate gives for the same ops at the same times, to the bit.
inline void record_op(Timeline& timeline, DeviceId d, const TimedOp& op);
void finish_timeline(const PipelineModel& model, ExecutionEngine& engine, int num_microbatches,
                     const std::vector<MemoryBreakdown>& static_bytes, Peaks peaks,
                     Timeline& timeline);

/// The same bookkeeping for a timeline of figures: record_last_op keeps of device d's ops
/// only the two keep_last_ops would choose from (its last, and the first of its latest
/// microbatch), the sums and the makespan as record_op does. After finish_timeline,
/// keep_last_ops leaves the timeline that with_last_ops gives of the whole one, to the bit.
inline void record_last_op(Timeline& timeline, DeviceId d, const TimedOp& op);

// Defined here, not in simulate.cpp, so that the list scheduler (another library) inlines
// them: both run for every op it schedules, and at pp 512 over 2048 layers a call of
// record_last_op across the libraries was 7.7% of a plan's samples (perf).

// What record_op and record_last_op both count of an op, in the same order: the sums.
inline DeviceTimeline& count_recorded_op(Timeline& timeline, DeviceId d, const TimedOp& op) {
  DeviceTimeline& dev = timeline.devices[d];
  dev.compute_s += op.end_s - op.start_s;
  dev.send_s += op.busy_until_s - op.end_s;
  timeline.makespan_s = std::max(timeline.makespan_s, op.busy_until_s);
  return dev;
}

inline void record_op(Timeline& timeline, DeviceId d, const TimedOp& op) {
  count_recorded_op(timeline, d, op).ops.push_back(op);
}

inline void record_last_op(Timeline& timeline, DeviceId d, const TimedOp& op) {
  std::vector<TimedOp>& ops = count_recorded_op(timeline, d, op).ops;
  // ops holds [the first op of the latest microbatch so far, the last op]: the two that
  // last_ops would pick from the whole list (its max_element keeps the first of the
  // largest), from which keep_last_ops picks the same.
  if (ops.empty()) {
    ops.assign(2, op);
    return;
  }
  if (op.op.mb > ops[0].op.mb) ops[0] = op;
  ops[1] = op;
}

/// record_last_op's bookkeeping for every device side by side, put into a timeline once
/// every op has run: the same sums in the same order, the same ops kept, the same makespan.
/// A replay that keeps the last ops alone records each op here rather than through its
/// device's timeline and that device's ops vector, whose loads were the costliest of the
/// list scheduler's and the replay's runs at pp 512 over 2048 layers (perf).
class LastOpsRecorder {
 public:
  explicit LastOpsRecorder(std::size_t devices) : devices_(devices) {}
  void record(DeviceId d, const TimedOp& op) {
    Device& dev = devices_[d];
    dev.compute_s += op.end_s - op.start_s;
    dev.send_s += op.busy_until_s - op.end_s;
    makespan_ = std::max(makespan_, op.busy_until_s);
    if (!dev.any || op.op.mb > dev.first_of_latest.op.mb) dev.first_of_latest = op;
    dev.last = op;
    dev.any = true;
  }
  /// Into a timeline with no op recorded yet: what record_last_op would have left there.
  void put(Timeline& timeline) const {
    for (std::size_t d = 0; d < devices_.size(); ++d) {
      const Device& dev = devices_[d];
      DeviceTimeline& into = timeline.devices[d];
      into.compute_s = dev.compute_s;
      into.send_s = dev.send_s;
      if (dev.any) into.ops = {dev.first_of_latest, dev.last};
    }
    timeline.makespan_s = std::max(timeline.makespan_s, makespan_);
  }

 private:
  struct Device {
    double compute_s = 0, send_s = 0;
    TimedOp first_of_latest, last;
    bool any = false;
  };
  std::vector<Device> devices_;
  double makespan_ = 0;
};

}  // namespace detail

}  // namespace pulse
