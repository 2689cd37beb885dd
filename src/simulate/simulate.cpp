#include "pulse/simulate/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "pulse/simulate/engine.hpp"

namespace pulse {

namespace {

std::string op_name(const Op& op) {
  return fmt::format("{}(stage {}, microbatch {})", op_letter(op.kind), op.stage, op.mb);
}

// Every op exactly once, on the device that runs its stage.
Status check_schedule_shape(const PipelineModel& model, const Schedule& schedule, int M) {
  const int S = model.layout.num_stages();
  if (static_cast<int>(schedule.device_ops.size()) != model.num_devices()) {
    return internal_error(fmt::format("schedule has {} devices, the pipeline {}",
                                      schedule.device_ops.size(), model.num_devices()));
  }
  const int kinds = schedule.split_backward ? 3 : 2;
  std::vector<int> seen(static_cast<std::size_t>(S) * M * 4, 0);
  for (int d = 0; d < model.num_devices(); ++d) {
    for (const Op& op : schedule.device_ops[d]) {
      if (op.stage < 0 || op.stage >= S || op.mb < 0 || op.mb >= M) {
        return internal_error(fmt::format("device {}: {} is out of range", d, op_name(op)));
      }
      if (model.layout.device[op.stage] != d) {
        return internal_error(fmt::format("device {}: {} belongs to device {}", d, op_name(op),
                                          model.layout.device[op.stage]));
      }
      const bool split_op = op.kind == OpKind::backward_input || op.kind == OpKind::backward_weight;
      if (split_op != schedule.split_backward && op.kind != OpKind::forward) {
        return internal_error(
            fmt::format("device {}: {} mixes split and full backward", d, op_name(op)));
      }
      int& n =
          seen[(static_cast<std::size_t>(op.stage) * M + op.mb) * 4 + static_cast<int>(op.kind)];
      if (++n > 1)
        return internal_error(fmt::format("device {}: {} appears twice", d, op_name(op)));
    }
  }
  const std::size_t expected = static_cast<std::size_t>(S) * M * kinds;
  std::size_t total = 0;
  for (const auto& ops : schedule.device_ops) total += ops.size();
  if (total != expected) {
    return internal_error(fmt::format("schedule has {} operations, expected {}", total, expected));
  }
  return Ok{};
}

// One end of a skip tensor's stay on a device: an op's start or end, or a transfer's send
// end or arrival (forward, or its gradient back). The times of an end are the same for
// every skip that shares it, microbatch by microbatch.
struct HoldEnd {
  enum class Kind : std::uint8_t { forward_start, forward_end, grad_end, send_end, arrival };
  Kind kind;
  bool forward;    // send_end and arrival: the forward transfer, else its gradient back
  std::size_t id;  // the stage, or the transfer

  double at(const detail::ExecutionEngine& e, int m) const {
    switch (kind) {
      case Kind::forward_start:
        return e.forward_start(static_cast<StageId>(id), m);
      case Kind::forward_end:
        return e.forward_end(static_cast<StageId>(id), m);
      case Kind::grad_end:
        return e.grad_end(static_cast<StageId>(id), m);
      case Kind::send_end:
        return e.send_end(id, m, forward);
      case Kind::arrival:
        break;
    }
    return e.arrival(id, m, forward);
  }
  auto key() const { return std::tuple(kind, forward, id); }
};

// One holder of a skip tensor (or of its gradient), as a device's part of the skip's
// journey: the producing device until the first send completes, each receiving device from
// arrival until it sends on, and the last one until the consumer uses it; the gradient the
// same way back. Which device holds it is the same for every microbatch, the times are
// not (HoldEnd::at).
struct SkipHold {
  HoldEnd from, to;
  std::int64_t bytes;

  auto ends() const { return std::pair(from.key(), to.key()); }
};

class SkipHolds {
 public:
  explicit SkipHolds(const PipelineModel& model) : by_device_(model.num_devices()) {
    // Each skip's hops, in the order they run (by sending stage): an index of the
    // transfers by the skips they carry, not a search of every transfer per skip.
    int most = -1;
    for (const SkipPlacement& k : model.skips) most = std::max(most, k.skip);
    std::vector<std::vector<std::size_t>> carrying(static_cast<std::size_t>(most + 1));
    for (std::size_t t = 0; t < model.transfers.size(); ++t) {
      for (int id : model.transfers[t].skips) {
        if (id < 0 || id > most) continue;
        auto& list = carrying[static_cast<std::size_t>(id)];
        if (list.empty() || list.back() != t) list.push_back(t);
      }
    }
    using Kind = HoldEnd::Kind;
    const auto& dev = model.layout.device;
    std::vector<std::size_t> hops;
    for (const SkipPlacement& k : model.skips) {
      hops.clear();
      if (k.skip >= 0) hops = carrying[static_cast<std::size_t>(k.skip)];
      std::sort(hops.begin(), hops.end(), [&](std::size_t a, std::size_t b) {
        return model.transfers[a].from < model.transfers[b].from;
      });
      const std::size_t n = hops.size();
      // Forward: hold j from the (j-1)-th arrival (the producer's forward end) to the j-th
      // send (the consumer's forward start), on the device the (j-1)-th hop reached.
      for (std::size_t j = 0; j <= n; ++j) {
        const HoldEnd from = j == 0
                                 ? HoldEnd{Kind::forward_end, true, std::size_t(k.producer_stage)}
                                 : HoldEnd{Kind::arrival, true, hops[j - 1]};
        const HoldEnd to = j < n
                               ? HoldEnd{Kind::send_end, true, hops[j]}
                               : HoldEnd{Kind::forward_start, true, std::size_t(k.consumer_stage)};
        const DeviceId d = j == 0 ? dev[k.producer_stage] : dev[model.transfers[hops[j - 1]].to];
        by_device_[d].push_back({from, to, k.bytes});
      }
      // Back, over the hops in reverse, from the consumer's gradient to the producer's.
      for (std::size_t j = 0; j <= n; ++j) {
        const HoldEnd from = j == 0 ? HoldEnd{Kind::grad_end, false, std::size_t(k.consumer_stage)}
                                    : HoldEnd{Kind::arrival, false, hops[n - j]};
        const HoldEnd to = j < n ? HoldEnd{Kind::send_end, false, hops[n - 1 - j]}
                                 : HoldEnd{Kind::grad_end, false, std::size_t(k.producer_stage)};
        const DeviceId d = j == 0 ? dev[k.consumer_stage] : dev[model.transfers[hops[n - j]].from];
        by_device_[d].push_back({from, to, k.bytes});
      }
    }
    // Holds with the same ends are held at the same times: one hold of their bytes. A chain
    // relaying its skips through every boundary holds them all from one arrival to one send
    // (pp 64 over 4096 layers: ~1000 skips a device, one hold each way).
    for (std::vector<SkipHold>& mine : by_device_) {
      std::sort(mine.begin(), mine.end(),
                [](const SkipHold& a, const SkipHold& b) { return a.ends() < b.ends(); });
      std::size_t kept = 0;
      for (std::size_t h = 0; h < mine.size(); ++h) {
        if (kept > 0 && mine[kept - 1].ends() == mine[h].ends()) {
          mine[kept - 1].bytes += mine[h].bytes;
        } else {
          mine[kept++] = mine[h];
        }
      }
      mine.resize(kept);
    }
  }

  /// Device d's holds, one per pair of ends.
  const std::vector<SkipHold>& on(DeviceId d) const { return by_device_[d]; }

 private:
  std::vector<std::vector<SkipHold>> by_device_;
};

// Per device: the bytes it really holds at its peak (activations in flight and every skip
// tensor while it sits there, hop by hop), and what the memory rule charges it (residency).
// One device at a time, so that what is held at once is one device's events, in one sweep
// over them (engine.hpp, sweep_memory).
//
// At one instant, releases happen before allocations (memory freed by an op that ends is
// available to the op that starts then), so within an instant the total only falls, then
// rises: the largest total is at an instant's end, and what it is made of does not depend
// on the order of that instant's events. So the peak is taken where an instant ends, its
// first largest total (activations, skip cache).
void memory_pass(const PipelineModel& model, const detail::ExecutionEngine& e, int M,
                 Timeline& timeline, Peaks peaks) {
  const bool held = peaks == Peaks::held;
  const int P = model.num_devices();
  std::optional<SkipHolds> skip_holds;
  if (held) skip_holds.emplace(model);
  const std::vector<std::int64_t> skip_bytes = skip_bytes_per_microbatch(model);
  detail::MemoryRuns runs;
  for (DeviceId d = 0; d < P; ++d) {
    runs.clear();
    detail::add_activation_runs(model, e, d, M, skip_bytes[d], runs);
    if (held) {
      for (const SkipHold& h : skip_holds->on(d)) {
        for (int m = 0; m < M; ++m) runs.runs.add(h.from.at(e, m));
        runs.end_run({0, h.bytes, 0, 0});
        for (int m = 0; m < M; ++m) runs.runs.add(h.to.at(e, m));
        runs.end_run({0, -h.bytes, 0, 0});
      }
    }
    const detail::MemorySweep swept = detail::sweep_memory(runs);
    DeviceTimeline& t = timeline.devices[d];
    if (held && swept.any) {
      t.peak.activations = swept.activations;
      t.peak.skip_cache = swept.skips;
    }
    t.resident_peak = swept.charged.peak_bytes;
    t.max_inflight = swept.charged.max_inflight;
  }
}

}  // namespace

namespace {

// The ops keep_last_ops keeps of one device: its last, after the first op of its latest
// microbatch where the last is of an earlier one.
std::vector<TimedOp> last_ops(const std::vector<TimedOp>& ops) {
  std::vector<TimedOp> kept;
  if (ops.empty()) return kept;
  const auto latest = std::max_element(
      ops.begin(), ops.end(), [](const TimedOp& a, const TimedOp& b) { return a.op.mb < b.op.mb; });
  if (latest->op.mb > ops.back().op.mb) kept.push_back(*latest);
  kept.push_back(ops.back());
  return kept;
}

}  // namespace

void keep_last_ops(Timeline& timeline) {
  for (DeviceTimeline& d : timeline.devices) {
    std::vector<TimedOp> kept = last_ops(d.ops);
    d.ops.swap(kept);
  }
  timeline.last_ops_only = true;
}

Timeline with_last_ops(const Timeline& timeline) {
  Timeline out;
  out.makespan_s = timeline.makespan_s;
  out.peaks_held = timeline.peaks_held;
  out.last_ops_only = true;
  out.devices.reserve(timeline.devices.size());
  for (const DeviceTimeline& d : timeline.devices) {
    DeviceTimeline& kept = out.devices.emplace_back();
    kept.ops = last_ops(d.ops);
    kept.sends = d.sends;
    kept.compute_s = d.compute_s;
    kept.send_s = d.send_s;
    kept.idle_s = d.idle_s;
    kept.peak = d.peak;
    kept.max_inflight = d.max_inflight;
    kept.resident_peak = d.resident_peak;
  }
  return out;
}

bool within_memory(const Timeline& timeline, const std::vector<MemoryBreakdown>& static_bytes,
                   std::int64_t capacity) {
  for (std::size_t d = 0; d < timeline.devices.size(); ++d) {
    if (!within_memory(static_bytes[d].total(), timeline.devices[d].resident_peak, capacity)) {
      return false;
    }
  }
  return true;
}

Result<Timeline> simulate(const PipelineModel& model, const Schedule& schedule,
                          int num_microbatches, const std::vector<MemoryBreakdown>& static_bytes,
                          Peaks peaks, Sends sends, KeptOps kept) {
  if (auto shape = check_schedule_shape(model, schedule, num_microbatches); !shape) {
    return shape.error();
  }
  const int P = model.num_devices();
  detail::ExecutionEngine engine(model, num_microbatches, sends == Sends::recorded);
  Timeline timeline;
  timeline.devices.resize(P);
  const bool all_ops = kept == KeptOps::all;
  for (int d = 0; d < P && all_ops; ++d) {
    timeline.devices[d].ops.reserve(schedule.device_ops[d].size());
  }
  detail::LastOpsRecorder lasts(all_ops ? 0 : P);
  std::vector<std::size_t> next(P, 0);
  std::size_t remaining = 0;
  for (const auto& ops : schedule.device_ops) remaining += ops.size();
  // Devices whose next op may have become ready: at first all; then, after an op executes,
  // its own device and those it sent to (the only ones whose inputs changed). Times do not
  // depend on this order: each link carries one device's sends, in that device's order.
  std::vector<DeviceId> work;
  std::vector<char> queued(P, 1);
  for (int d = P - 1; d >= 0; --d) work.push_back(d);
  while (!work.empty()) {
    const DeviceId d = work.back();
    work.pop_back();
    queued[d] = 0;
    const auto& ops = schedule.device_ops[d];
    while (next[d] < ops.size()) {
      const Op op = ops[next[d]];
      // Its start, read once (execute() would read every input again to find it).
      const double start = engine.ready_at(op);
      if (std::isnan(start)) break;  // an input has not arrived
      ++next[d];
      const TimedOp ran = engine.execute_at(op, start);
      if (all_ops) {
        detail::record_op(timeline, d, ran);
      } else {
        lasts.record(d, ran);
      }
      --remaining;
      for (DeviceId e : engine.receivers(op)) {
        if (e != d && !queued[e]) {
          queued[e] = 1;
          work.push_back(e);
        }
      }
    }
  }
  if (remaining > 0) {
    std::string stuck;
    for (int d = 0; d < P; ++d) {
      if (next[d] < schedule.device_ops[d].size()) {
        stuck += fmt::format("{}device {} waits at {}", stuck.empty() ? "" : "; ", d,
                             op_name(schedule.device_ops[d][next[d]]));
      }
    }
    return internal_error("schedule deadlocks: " + stuck);
  }
  if (!all_ops) lasts.put(timeline);
  detail::finish_timeline(model, engine, num_microbatches, static_bytes, peaks, timeline);
  if (!all_ops) keep_last_ops(timeline);
  return timeline;
}

namespace detail {

void finish_timeline(const PipelineModel& model, ExecutionEngine& engine, int num_microbatches,
                     const std::vector<MemoryBreakdown>& static_bytes, Peaks peaks,
                     Timeline& timeline) {
  const int P = model.num_devices();
  for (int d = 0; d < P; ++d) {
    DeviceTimeline& dev = timeline.devices[d];
    dev.idle_s = std::max(0.0, timeline.makespan_s - dev.compute_s - dev.send_s);
    dev.sends = engine.take_sends(d);  // moved: at pp 512 a copy was 9% of a tuned plan
  }
  memory_pass(model, engine, num_microbatches, timeline, peaks);
  timeline.peaks_held = peaks == Peaks::held;
  for (int d = 0; d < P; ++d) {
    MemoryBreakdown& peak = timeline.devices[d].peak;
    peak.weights = static_bytes[d].weights;
    peak.gradients = static_bytes[d].gradients;
    peak.optimizer = static_bytes[d].optimizer;
    peak.workspace = static_bytes[d].workspace;
  }
}

}  // namespace detail

}  // namespace pulse
