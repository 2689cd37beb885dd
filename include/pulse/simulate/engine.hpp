// The execution rules every timing in pulse-plan follows, in one place: when an operation
// may start (its device is free and its inputs have arrived), how long it runs, and what
// it sends afterwards. The list scheduler and the simulator both drive this engine, so a
// schedule's times are the same whichever of them computes them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "pulse/cost/memory.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/event_runs.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse::detail {

constexpr double kNotYet = std::numeric_limits<double>::quiet_NaN();

class ExecutionEngine {
 public:
  /// `record_sends` false: sends() stays empty (a caller that never reads it, such as the
  /// list scheduler, saves a record per send).
  ExecutionEngine(const PipelineModel& model, int num_microbatches, bool record_sends = true);

  /// Earliest start of `op` on its device, or nullopt while an input's producer has not
  /// executed yet.
  std::optional<double> ready_time(const Op& op) const;
  /// The same as a plain number, kNotYet (NaN) while an input is missing: the list
  /// scheduler asks this for every candidate, and a returned optional<double> costs a
  /// store-forwarding stall on each call.
  double ready_at(const Op& op) const;
  /// When the last input of `op` is there (-infinity if it has none), kNotYet while one is
  /// missing. Final once known: every input is written once. ready_at is its maximum with
  /// the device's free time.
  double inputs_ready(const Op& op) const;
  /// Runs `op` at its ready time (which must exist) and performs its sends.
  TimedOp execute(const Op& op);
  /// The same, for a caller that already knows ready_at(op) (which must exist): `start`.
  TimedOp execute_at(const Op& op, double start);
  bool executed(const Op& op) const;

  double device_free(DeviceId d) const { return device_free_[d]; }
  /// The devices `op` sends to (its outputs forward, its gradients back; none for W), in
  /// the order of its transfers: with its own, those whose ops may become ready, or ready
  /// earlier, once it has executed. Each stage's lists are made once, with the engine.
  const std::vector<DeviceId>& receivers(const Op& op) const {
    return receivers_[static_cast<std::size_t>(op.stage) * 3 + (op.kind == OpKind::forward ? 0
                                                                : op.kind == OpKind::backward_weight
                                                                    ? 2
                                                                    : 1)];
  }
  double compute_time(const Op& op) const;

  // Recorded times, for the memory pass. NaN until executed.
  double forward_start(StageId s, int m) const { return times_[idx(s, m)].f_start; }
  double forward_end(StageId s, int m) const { return times_[idx(s, m)].f_end; }
  /// When the input gradient of (s, m) is ready: end of B, or of I with a split backward.
  double grad_end(StageId s, int m) const { return times_[idx(s, m)].g_end; }
  /// When (s, m) releases its activations: end of B, or of W.
  double backward_done(StageId s, int m) const { return times_[idx(s, m)].w_end; }
  /// A send ends when it arrives (a transfer's time is its latency and its bytes on the
  /// link, cost_model.hpp): the two are one record.
  double send_end(std::size_t transfer, int m, bool forward) const {
    return arrival(transfer, m, forward);
  }
  double arrival(std::size_t transfer, int m, bool forward) const {
    return (forward ? fwd_arrival_ : bwd_arrival_)[tidx(transfer, m)];
  }
  /// Sends each device made so far, in order.
  const std::vector<TimedSend>& sends(DeviceId d) const { return sends_[d]; }
  /// The same, moved out (the engine keeps none): a timeline's, once the replay is done.
  std::vector<TimedSend> take_sends(DeviceId d) { return std::move(sends_[d]); }

 private:
  std::size_t idx(StageId s, int m) const {
    return static_cast<std::size_t>(s) * num_microbatches_ + m;
  }
  std::size_t tidx(std::size_t transfer, int m) const { return transfer * num_microbatches_ + m; }
  double send_all(DeviceId d, double t, const std::vector<std::size_t>& transfers, int m,
                  bool forward);

  // What a send needs of its transfer, packed (Transfer also carries its bytes and skips):
  // its ends, its times and its link each way (link_free_).
  struct Hop {
    DeviceId from_device, to_device;
    double forward_s, backward_s;
    std::uint32_t forward_link, backward_link;
  };

  const PipelineModel& model_;
  int num_microbatches_;
  bool record_sends_;
  std::vector<std::vector<TimedSend>> sends_;     // per sending device
  std::vector<std::vector<std::size_t>> out_of_;  // [stage]: transfers with from == stage
  std::vector<std::vector<std::size_t>> into_;    // [stage]: transfers with to == stage
  std::vector<Hop> hops_;                         // [transfer]
  std::vector<std::vector<DeviceId>> receivers_;  // [stage * 3 + F 0, B or I 1, W 2]
  std::vector<double> device_free_;
  // [link]: when each link a transfer uses is free, one per (sending, receiving) device
  // pair that some transfer uses, numbered as first met (Hop). A table of every pair was
  // P x P (8 MB at pp 1024, zeroed at each replay and missed in the cache at each send).
  std::vector<double> link_free_;
  // [stage * M + microbatch]: the four times of one (stage, microbatch) side by side, the
  // ones an op reads and writes in one cache line (as four arrays, an op of pp 1024 over
  // 2048 layers missed the cache in two or three of them).
  struct Times {
    double f_start = kNotYet, f_end = kNotYet, g_end = kNotYet, w_end = kNotYet;
  };
  std::vector<Times> times_;
  // [transfer * M + microbatch]
  std::vector<double> fwd_arrival_, bwd_arrival_;
};

// Defined here, not in engine.cpp, so that the list scheduler (another library) inlines
// them: it runs them for each op it schedules. Inlined, the list schedules of pp 32 over 1024
// layers execute 6% fewer instructions and the replays 5% fewer
// (scripts/instruction_counts.py).
inline double ExecutionEngine::compute_time(const Op& op) const {
  return op_compute_s(model_.stages[op.stage], op.kind);
}

inline double ExecutionEngine::send_all(DeviceId d, double t,
                                        const std::vector<std::size_t>& transfers, int m,
                                        bool forward) {
  double busy = t;
  const bool overlap = model_.overlap_comm;
  std::vector<double>& arrivals = forward ? fwd_arrival_ : bwd_arrival_;
  for (std::size_t tr : transfers) {
    const Hop& x = hops_[tr];
    const DeviceId to = forward ? x.to_device : x.from_device;
    double& link = link_free_[forward ? x.forward_link : x.backward_link];
    const double start = overlap ? std::max(t, link) : std::max(busy, link);
    const double end = start + (forward ? x.forward_s : x.backward_s);
    link = end;
    arrivals[tidx(tr, m)] = end;
    if (record_sends_) sends_[d].push_back(TimedSend{tr, m, forward, to, start, end});
    if (!overlap) busy = end;
  }
  return busy;
}

inline TimedOp ExecutionEngine::execute_at(const Op& op, double start) {
  const DeviceId d = model_.layout.device[op.stage];
  const double end = start + compute_time(op);
  Times& times = times_[idx(op.stage, op.mb)];
  double busy = end;
  switch (op.kind) {
    case OpKind::forward:
      times.f_start = start;
      times.f_end = end;
      busy = send_all(d, end, out_of_[op.stage], op.mb, true);
      break;
    case OpKind::backward:
      times.g_end = end;
      times.w_end = end;
      busy = send_all(d, end, into_[op.stage], op.mb, false);
      break;
    case OpKind::backward_input:
      times.g_end = end;
      busy = send_all(d, end, into_[op.stage], op.mb, false);
      break;
    case OpKind::backward_weight:
      times.w_end = end;
      break;
  }
  device_free_[d] = busy;
  return TimedOp{op, start, end, busy};
}

/// Adds `device`'s activation runs from the engine's recorded times: each of its stages
/// holds each of the `num_microbatches` from its forward's start to its backward_done, and
/// the memory rule charges its activations, and on the device's first stage (where a
/// microbatch enters) `skip_bytes` more and one microbatch in flight
/// (skip_bytes_per_microbatch, residency).
void add_activation_runs(const PipelineModel& model, const ExecutionEngine& engine, DeviceId device,
                         int num_microbatches, std::int64_t skip_bytes, MemoryRuns& out);

/// The memory rule's charge on `device` (cost/memory.hpp, residency) from the engine's
/// recorded times: the same figures residency() gives over the holds of its stages, each of
/// the `num_microbatches` from its forward's start to its backward_done. `scratch` is kept
/// by the caller across devices. The simulator's timelines and the list scheduler's peaks
/// both come from here.
Residency residency_of(const PipelineModel& model, const ExecutionEngine& engine, DeviceId device,
                       int num_microbatches, MemoryRuns& scratch);

}  // namespace pulse::detail
