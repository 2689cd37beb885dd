#include "pulse/simulate/simulate.hpp"

#include <algorithm>
#include <map>
#include <optional>
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

struct MemEvent {
  double time;
  std::int64_t delta;
  bool skip;  // skip cache, else activations
};

// One holder of a skip tensor (or of its gradient), as a device's part of the skip's
// journey: the producing device until the first send completes, each receiving device from
// arrival until it sends on, and the last one until the consumer uses it; the gradient the
// same way back. Which device holds it is the same for every microbatch, the times are
// not (at()).
struct SkipHold {
  std::size_t placement;  // index in model.skips
  int index;              // 0..n forward, then n+1..2n+1 back, over the skip's n hops
};

class SkipHolds {
 public:
  explicit SkipHolds(const PipelineModel& model) : model_(model), hops_(model.skips.size()) {
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
    by_device_.resize(model.num_devices());
    for (std::size_t p = 0; p < model.skips.size(); ++p) {
      std::vector<std::size_t>& hops = hops_[p];
      if (model.skips[p].skip >= 0) hops = carrying[static_cast<std::size_t>(model.skips[p].skip)];
      std::sort(hops.begin(), hops.end(), [&](std::size_t a, std::size_t b) {
        return model.transfers[a].from < model.transfers[b].from;
      });
      const int n = static_cast<int>(hops.size());
      for (int index = 0; index <= 2 * n + 1; ++index) {
        by_device_[holder(p, index)].push_back({p, index});
      }
    }
  }

  /// Device d's holds, by skip in model.skips order, then forward before back.
  const std::vector<SkipHold>& on(DeviceId d) const { return by_device_[d]; }

  /// When hold h of microbatch m starts and ends.
  std::pair<double, double> at(const detail::ExecutionEngine& e, const SkipHold& h, int m) const {
    const SkipPlacement& k = model_.skips[h.placement];
    const std::vector<std::size_t>& hops = hops_[h.placement];
    const int n = static_cast<int>(hops.size());
    if (h.index <= n) {  // forward: hold j from the (j-1)-th arrival to the j-th send
      const int j = h.index;
      const double from =
          j == 0 ? e.forward_end(k.producer_stage, m) : e.arrival(hops[j - 1], m, true);
      const double to = j < n ? e.send_end(hops[j], m, true) : e.forward_start(k.consumer_stage, m);
      return {from, to};
    }
    const int j = h.index - n - 1;  // back, over the hops in reverse
    const double from = j == 0 ? e.grad_end(k.consumer_stage, m) : e.arrival(hops[n - j], m, false);
    const double to =
        j < n ? e.send_end(hops[n - 1 - j], m, false) : e.grad_end(k.producer_stage, m);
    return {from, to};
  }

 private:
  DeviceId holder(std::size_t p, int index) const {
    const SkipPlacement& k = model_.skips[p];
    const std::vector<std::size_t>& hops = hops_[p];
    const int n = static_cast<int>(hops.size());
    const auto& dev = model_.layout.device;
    if (index <= n)
      return index == 0 ? dev[k.producer_stage] : dev[model_.transfers[hops[index - 1]].to];
    const int j = index - n - 1;
    return j == 0 ? dev[k.consumer_stage] : dev[model_.transfers[hops[n - j]].from];
  }

  const PipelineModel& model_;
  std::vector<std::vector<std::size_t>> hops_;  // [placement]: its transfers, in order
  std::vector<std::vector<SkipHold>> by_device_;
};

// Per device: the bytes it really holds at its peak (activations in flight and every skip
// tensor while it sits there, hop by hop), and what the memory rule charges it (residency).
// One device at a time, so that what is held at once is one device's events: a chain that
// relays its skips through every stage has skips x hops x microbatches of them in all (pp
// 512 over 2048 layers: gigabytes).
void memory_pass(const PipelineModel& model, const detail::ExecutionEngine& e, int M,
                 Timeline& timeline, Peaks peaks) {
  const bool held = peaks == Peaks::held;
  const int P = model.num_devices();
  std::optional<SkipHolds> skip_holds;
  if (held) skip_holds.emplace(model);
  std::vector<MemEvent> ev;
  std::vector<ActivationHold> holds;
  for (DeviceId d = 0; d < P; ++d) {
    ev.clear();
    holds.clear();
    for (StageId s : model.layout.stages_on(d)) {
      const std::int64_t a = model.stages[s].activation_bytes;
      for (int m = 0; m < M; ++m) {
        if (held) {
          ev.push_back({e.forward_start(s, m), a, false});
          ev.push_back({e.backward_done(s, m), -a, false});
        }
        holds.push_back({s, e.forward_start(s, m), e.backward_done(s, m)});
      }
    }
    if (held) {
      // Skip by skip, each microbatch's holds on d in turn (the order the events were made
      // in when every device's were made at once: the stable sort below keeps it).
      const std::vector<SkipHold>& mine = skip_holds->on(d);
      for (std::size_t first = 0; first < mine.size();) {
        std::size_t last = first;
        while (last < mine.size() && mine[last].placement == mine[first].placement) ++last;
        const std::int64_t bytes = model.skips[mine[first].placement].bytes;
        for (int m = 0; m < M; ++m) {
          for (std::size_t h = first; h < last; ++h) {
            const auto [from, to] = skip_holds->at(e, mine[h], m);
            ev.push_back({from, bytes, true});
            ev.push_back({to, -bytes, true});
          }
        }
        first = last;
      }
    }
    // At one instant, releases happen before allocations: memory freed by an op that ends
    // is available to the op that starts then.
    std::stable_sort(ev.begin(), ev.end(), [](const MemEvent& a, const MemEvent& b) {
      if (a.time != b.time) return a.time < b.time;
      return a.delta < b.delta;
    });
    std::int64_t act = 0, skip = 0, best = -1;
    DeviceTimeline& t = timeline.devices[d];
    for (const MemEvent& x : ev) {
      (x.skip ? skip : act) += x.delta;
      if (act + skip > best) {
        best = act + skip;
        t.peak.activations = act;
        t.peak.skip_cache = skip;
      }
    }
    const Residency charged = residency(model, d, holds);
    t.resident_peak = charged.peak_bytes;
    t.max_inflight = charged.max_inflight;
  }
}

}  // namespace

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
                          Peaks peaks) {
  if (auto shape = check_schedule_shape(model, schedule, num_microbatches); !shape) {
    return shape.error();
  }
  const int P = model.num_devices();
  detail::ExecutionEngine engine(model, num_microbatches);
  Timeline timeline;
  timeline.devices.resize(P);
  std::vector<std::size_t> next(P, 0);
  std::size_t remaining = 0;
  for (const auto& ops : schedule.device_ops) remaining += ops.size();
  // Devices whose next op may have become ready: at first all; then, after an op executes,
  // its own device and those it sent to (the only ones whose inputs changed). Times do not
  // depend on this order: each link carries one device's sends, in that device's order.
  std::vector<DeviceId> work, consumers;
  std::vector<char> queued(P, 1);
  for (int d = P - 1; d >= 0; --d) work.push_back(d);
  while (!work.empty()) {
    const DeviceId d = work.back();
    work.pop_back();
    queued[d] = 0;
    const auto& ops = schedule.device_ops[d];
    while (next[d] < ops.size() && engine.ready_time(ops[next[d]])) {
      const Op op = ops[next[d]++];
      const TimedOp t = engine.execute(op);
      timeline.devices[d].ops.push_back(t);
      timeline.devices[d].compute_s += t.end_s - t.start_s;
      timeline.devices[d].send_s += t.busy_until_s - t.end_s;
      timeline.makespan_s = std::max(timeline.makespan_s, t.busy_until_s);
      --remaining;
      consumers.clear();
      engine.consumer_devices(op, consumers);
      for (DeviceId e : consumers) {
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
  for (int d = 0; d < P; ++d) {
    DeviceTimeline& dev = timeline.devices[d];
    dev.idle_s = std::max(0.0, timeline.makespan_s - dev.compute_s - dev.send_s);
    dev.sends = engine.sends(d);
  }
  memory_pass(model, engine, num_microbatches, timeline, peaks);
  for (int d = 0; d < P; ++d) {
    MemoryBreakdown& peak = timeline.devices[d].peak;
    peak.weights = static_bytes[d].weights;
    peak.gradients = static_bytes[d].gradients;
    peak.optimizer = static_bytes[d].optimizer;
    peak.workspace = static_bytes[d].workspace;
  }
  return timeline;
}

}  // namespace pulse
