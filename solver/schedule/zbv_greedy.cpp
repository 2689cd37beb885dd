// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, and "Pipeline Parallelism
// with Controllable Memory", arXiv 2405.15362, where it is V-ZB), following the greedy of
// sail-sg/zero-bubble-pipeline-parallelism at commit 39f2c186,
// megatron/core/pipeline_parallel/zerobubble/scheduler/zbv.py (PipelineGraph.try_v_schedule).
// Written anew for per-stage costs and per-link times: every op is timed by the execution
// engine as it is placed, so an op's "input arrival" is its own transfer's on its own link.
//
// Device d runs stage d ("down", the encoder side) and stage 2P-1-d ("up"). The greedy:
//   1. warm-up: one F(down) everywhere; then from the bottom device up, device d takes
//      extra F(down) ops (pushed through devices 0..d) while they fit before F(up)'s input
//      arrives and its memory keeps room for 2 + 2d more; then its first F(up); then the
//      devices are evened out, each running at least the forwards of the one above it;
//   2. 2M rounds, each one backward per device (I(up) when its turn has come, else I(down)
//      once its input is there) then one forward per device (F(up) once its input is there,
//      else F(down));
//   3. before each I or F, W ops fill the wait for its input when they end before the input
//      arrives (the slack that absorbs link delays), and one more when the wait would push
//      the device's idle time past what the others already have (or what an earlier pass
//      approved); W ops run first whenever a forward would overflow the memory room (below
//      ZB-V's own room of 2P activations a forward with no W left to run waits for the next
//      round, which the original does not need: that makes ZB-V a family over budgets);
//   4. the remaining W ops at the end.
// The greedy is repeated with the per-device idle times of the previous pass as the
// approved bubbles while the largest idle time drops, for each of the four choices of
// letting W fill waits before forwards and before backwards; the shortest schedule wins.

#include "zbv_greedy.hpp"

#include <algorithm>
#include <cmath>
#include <deque>

#include "pulse/simulate/engine.hpp"

namespace pulse::detail {

namespace {

enum Side : int { kDown = 0, kUp = 1 };

struct Switches {
  bool fill_before_forward = true;
  bool fill_before_backward = true;
  std::vector<double> approved;  // per device; empty: none yet
};

class ZbvBuilder {
 public:
  ZbvBuilder(const PipelineModel& m, int M, const std::vector<std::int64_t>& room,
             const Switches& sw)
      : model_(m), M_(M), P_(m.num_devices()), room_(room), sw_(sw), engine_(m, M) {
    counts_.assign(P_, Counts{});
    pending_.assign(P_, {});
    held_.assign(P_, 0);
    bubble_.assign(P_, 0.0);
    schedule_.device_ops.assign(P_, {});
    schedule_.split_backward = true;
    schedule_.policy = "zb-v";
    into_.assign(2 * P_, {});
    out_of_.assign(2 * P_, {});
    for (std::size_t t = 0; t < m.transfers.size(); ++t) {
      into_[m.transfers[t].to].push_back(t);
      out_of_[m.transfers[t].from].push_back(t);
    }
  }

  bool run() {
    warm_up();
    // 2M rounds when memory never stops a forward (ZB-V's own room); more when it does.
    for (int round = 0; ok_ && !inputs_done(); ++round) {
      const std::size_t placed = placed_ops();
      backward_round();
      forward_round();
      if (round >= 2 * M_ && placed_ops() == placed) return false;
    }
    for (DeviceId d = 0; d < P_ && ok_; ++d) {
      while (!pending_[d].empty() && ok_) put_w(d);
    }
    return ok_ && complete();
  }

  Schedule take() { return std::move(schedule_); }
  const std::vector<double>& bubble() const { return bubble_; }
  double makespan() const {
    double end = 0;
    for (DeviceId d = 0; d < P_; ++d) end = std::max(end, engine_.device_free(d));
    return end;
  }

 private:
  struct Counts {
    int f[2] = {0, 0}, i[2] = {0, 0}, w[2] = {0, 0};
  };

  StageId stage(DeviceId d, int side) const { return side == kDown ? d : 2 * P_ - 1 - d; }
  std::int64_t hold_bytes(DeviceId d, int side) const {
    return model_.stages[stage(d, side)].activation_bytes + (side == kDown ? skip_[d] : 0);
  }
  bool fits(DeviceId d, int side) const { return held_[d] + hold_bytes(d, side) <= room_[d]; }
  // Whether the next op of `kind` on `side` has its inputs (below ZB-V's own room a
  // device may be behind the order the greedy assumes).
  bool ready(DeviceId d, OpKind kind, int side) const {
    const Counts& c = counts_[d];
    const int n = kind == OpKind::forward ? c.f[side] : c.i[side];
    return n < M_ && engine_.ready_time(Op{kind, stage(d, side), n}).has_value();
  }
  double cost(DeviceId d, int side, OpKind kind) const {
    return op_compute_s(model_.stages[stage(d, side)], kind);
  }

  // When every input of `op` from another device has arrived; NaN while unknown.
  double input_arrival(const Op& op) const {
    const bool forward = op.kind == OpKind::forward;
    const auto& transfers = forward ? into_[op.stage] : out_of_[op.stage];
    double t = transfers.empty() ? kNotYet : 0.0;
    for (std::size_t tr : transfers) t = std::max(t, engine_.arrival(tr, op.mb, forward));
    for (std::size_t tr : transfers) {
      if (std::isnan(engine_.arrival(tr, op.mb, forward))) return kNotYet;
    }
    return t;
  }

  void put(DeviceId d, OpKind kind, int side) {
    if (!ok_) return;
    Counts& c = counts_[d];
    int& n = kind == OpKind::forward           ? c.f[side]
             : kind == OpKind::backward_weight ? c.w[side]
                                               : c.i[side];
    const Op op{kind, stage(d, side), n};
    const auto ready = engine_.ready_time(op);
    const bool overflow = kind == OpKind::forward && held_[d] + hold_bytes(d, side) > room_[d];
    if (n >= M_ || !ready || overflow) {
      ok_ = false;
      return;
    }
    if (c.f[kDown] > 0) bubble_[d] += *ready - engine_.device_free(d);
    engine_.execute(op);
    schedule_.device_ops[d].push_back(op);
    ++n;
    if (kind == OpKind::forward) held_[d] += hold_bytes(d, side);
    if (kind == OpKind::backward_weight) held_[d] -= hold_bytes(d, side);
    if (kind == OpKind::backward_input) pending_[d].push_back(side);
  }

  void put_w(DeviceId d) {
    if (pending_[d].empty()) {
      ok_ = false;
      return;
    }
    const int side = pending_[d].front();
    pending_[d].pop_front();
    put(d, OpKind::backward_weight, side);
  }

  double largest_bubble(DeviceId d) const {
    double most = *std::max_element(bubble_.begin(), bubble_.end());
    if (!sw_.approved.empty()) {
      const double approved = *std::max_element(sw_.approved.begin(), sw_.approved.end());
      most = std::max(most, approved - sw_.approved[d]);
    }
    return most;
  }

  // W ops into the wait for `next`'s input: those that end before it arrives, and one more
  // when the wait would exceed the device's share of idle time (if `allowed`).
  void fill_wait(DeviceId d, const Op& next, bool allowed) {
    const double arrival = input_arrival(next);
    if (std::isnan(arrival)) return;
    while (!pending_[d].empty() && ok_ &&
           arrival >=
               engine_.device_free(d) + cost(d, pending_[d].front(), OpKind::backward_weight)) {
      put_w(d);
    }
    const double wait = arrival - engine_.device_free(d);
    if (allowed && !pending_[d].empty() && wait > largest_bubble(d) - bubble_[d]) put_w(d);
  }

  bool executed(DeviceId d, OpKind kind, int side, int mb) const {
    return mb < M_ && engine_.executed(Op{kind, stage(d, side), mb});
  }

  void warm_up();
  void even_out_forwards();
  void backward_round();
  void forward_round();
  bool complete() const;
  bool inputs_done() const;
  std::size_t placed_ops() const;

  const PipelineModel& model_;
  const int M_, P_;
  const std::vector<std::int64_t>& room_;
  const Switches& sw_;
  ExecutionEngine engine_;
  const std::vector<std::int64_t> skip_ = skip_bytes_per_microbatch(model_);
  std::vector<Counts> counts_;
  std::vector<std::deque<int>> pending_;  // per device: sides of I ops whose W has not run
  std::vector<std::int64_t> held_;
  std::vector<double> bubble_;  // per device: idle time since its first op
  std::vector<std::vector<std::size_t>> into_, out_of_;
  Schedule schedule_;
  bool ok_ = true;
};

void ZbvBuilder::warm_up() {
  for (DeviceId d = 0; d < P_; ++d) put(d, OpKind::forward, kDown);
  for (DeviceId d = P_ - 1; d >= 0 && ok_; --d) {
    if (d == P_ - 1) {
      put(d, OpKind::forward, kUp);
      continue;
    }
    const double arrival = input_arrival(Op{OpKind::forward, stage(d, kUp), 0});
    auto room_for_more = [&] {
      if (held_[d] + hold_bytes(d, kDown) * (2 + 2 * d) > room_[d]) return false;
      if (engine_.device_free(d) + cost(d, kDown, OpKind::forward) > arrival) return false;
      for (DeviceId j = 0; j <= d; ++j) {
        if (!fits(j, kDown) || counts_[j].f[kDown] >= M_) return false;
      }
      return true;
    };
    while (ok_ && room_for_more()) {
      for (DeviceId j = 0; j <= d; ++j) put(j, OpKind::forward, kDown);
    }
    put(d, OpKind::forward, kUp);
  }
  even_out_forwards();
}

// Each device runs at least as many forwards as the one above it, and more F(up) ops unless
// the one above has run them all.
void ZbvBuilder::even_out_forwards() {
  int side = kDown;
  for (DeviceId d = 1; d < P_ && ok_; ++d) {
    auto behind = [&] {
      const Counts &mine = counts_[d], &above = counts_[d - 1];
      return mine.f[0] + mine.f[1] < above.f[0] + above.f[1] ||
             (mine.f[kUp] <= above.f[kUp] && above.f[kUp] < M_);
    };
    for (int guard = 0; behind() && ok_ && guard < 4 * M_ + 4; ++guard) {
      for (DeviceId j = P_ - 1; j >= d; --j) {
        if (ready(j, OpKind::forward, side) && fits(j, side)) put(j, OpKind::forward, side);
      }
      side = 1 - side;
    }
  }
}

void ZbvBuilder::backward_round() {
  std::vector<DeviceId> down, up;
  for (DeviceId d = 0; d < P_; ++d) {
    const Counts& c = counts_[d];
    if (c.i[kDown] >= c.i[kUp]) {
      up.push_back(d);
    } else if (d == P_ - 1 || executed(d + 1, OpKind::backward_input, kDown, c.i[kDown]) ||
               c.i[kUp] >= M_) {
      down.push_back(d);
    } else {
      up.push_back(d);
    }
  }
  // I(down) flows from the bottom device up, I(up) from device 0 down: producers first.
  std::vector<std::pair<DeviceId, int>> turns;
  for (auto it = down.rbegin(); it != down.rend(); ++it) turns.push_back({*it, kDown});
  for (DeviceId d : up) turns.push_back({d, kUp});
  for (const auto& [d, side] : turns) {
    if (!ok_ || !ready(d, OpKind::backward_input, side)) continue;
    const Op next{OpKind::backward_input, stage(d, side), counts_[d].i[side]};
    fill_wait(d, next, side == kDown || sw_.fill_before_backward);
    put(d, OpKind::backward_input, side);
  }
}

void ZbvBuilder::forward_round() {
  for (DeviceId d = 0; d < P_ && ok_; ++d) {
    const Counts& c = counts_[d];
    if (c.f[kUp] >= M_) continue;
    int side = -1;
    if (c.f[kUp] >= c.f[kDown]) {
      side = kDown;
    } else if (d == P_ - 1 || executed(d + 1, OpKind::forward, kUp, c.f[kUp])) {
      side = kUp;
    } else if (c.f[kDown] < M_ && (d == 0 || executed(d - 1, OpKind::forward, kDown, c.f[kDown]))) {
      side = kDown;
    }
    if (side < 0 || !ready(d, OpKind::forward, side)) continue;
    while (ok_ && !fits(d, side) && !pending_[d].empty()) put_w(d);
    // Below ZB-V's own room: no W left to free memory, so this forward waits a round.
    if (!fits(d, side)) continue;
    fill_wait(d, Op{OpKind::forward, stage(d, side), counts_[d].f[side]}, sw_.fill_before_forward);
    put(d, OpKind::forward, side);
  }
}

bool ZbvBuilder::inputs_done() const {
  for (const Counts& c : counts_) {
    if (c.f[kDown] < M_ || c.f[kUp] < M_ || c.i[kDown] < M_ || c.i[kUp] < M_) return false;
  }
  return true;
}

std::size_t ZbvBuilder::placed_ops() const {
  std::size_t n = 0;
  for (const auto& ops : schedule_.device_ops) n += ops.size();
  return n;
}

bool ZbvBuilder::complete() const {
  for (const Counts& c : counts_) {
    for (int side : {kDown, kUp}) {
      if (c.f[side] != M_ || c.i[side] != M_ || c.w[side] != M_) return false;
    }
  }
  return true;
}

struct Built {
  Schedule schedule;
  double makespan = 0;
  double largest_bubble = 0;
  std::vector<double> bubble;
};

// One pass, then passes with the previous idle times approved while the largest drops.
std::optional<Built> build(const PipelineModel& m, int M, const std::vector<std::int64_t>& room,
                           const Switches& sw, int depth) {
  ZbvBuilder builder(m, M, room, sw);
  if (!builder.run()) return std::nullopt;
  Built b{builder.take(), builder.makespan(), 0, builder.bubble()};
  b.largest_bubble = *std::max_element(b.bubble.begin(), b.bubble.end());
  const double approved =
      sw.approved.empty() ? -1 : *std::max_element(sw.approved.begin(), sw.approved.end());
  if (depth < 16 && (approved < 0 || b.largest_bubble < approved)) {
    Switches again = sw;
    again.approved = b.bubble;
    auto deeper = build(m, M, room, again, depth + 1);
    if (deeper && deeper->largest_bubble < b.largest_bubble) return deeper;
  }
  return b;
}

}  // namespace

std::optional<Schedule> zbv_schedule(const PipelineModel& model, int M,
                                     const std::vector<std::int64_t>& room) {
  std::optional<Built> best;
  for (bool before_backward : {true, false}) {
    for (bool before_forward : {true, false}) {
      const Switches sw{before_forward, before_backward, {}};
      auto b = build(model, M, room, sw, 0);
      if (b && (!best || b->makespan < best->makespan * (1 - 1e-12))) best = std::move(b);
    }
  }
  if (!best) return std::nullopt;
  return std::move(best->schedule);
}

}  // namespace pulse::detail
