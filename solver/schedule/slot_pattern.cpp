// V-Half and V-Min, built the way the paper builds them (Qi et al. 2024, arXiv 2405.15362,
// sections 3-4; the construction follows sail-sg/zero-bubble-pipeline-parallelism at commit
// 39f2c186, megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py).
//
// Time is counted in unit slots, one op per slot. A microbatch's building block puts, on
// device d, its four F and I ops at fixed offsets; microbatch m repeats the block 6m slots
// later (6 ops per microbatch and device: 2 F, 2 I, 2 W), so memory is set by the lifespans
// inside the block (the paper's main observation). With P devices and a shift `delta`:
//
//   V-Min   F(down) d         F(up) 2P-1-d     I(up) 2P+delta+d      I(down) 4P+delta-1-d
//   V-Half  F(down) 2d        F(up) 3P-2-d     I(up) 3P+delta+2d-1   I(down) 6P+delta-d-2
//
// (down = stage d, up = stage 2P-1-d). The lifespans of a device's two stages add up to
// about 4P (V-Min) or 6P (V-Half) slots whatever d, so every device holds about 2P/3 or P
// stage activations. `delta` is the smallest shift that keeps the four offsets of every
// device distinct modulo 6 (so repeated blocks never collide): for P from 1 to 32 that is
// the repository's "2 if P % 3 == 0" (V-Min) and "3 if P is even" (V-Half).
//
// Then, as in the repository: W ops fill the free slots in the order their I ops ran; ops
// of the warm-up (before device 0's first I(down)) and of the cool-down (after device 0's
// last F(down)) move to the earliest free slot their inputs allow if the device's peak does
// not rise; the slots are squeezed (every op as early as its inputs and its device allow);
// the cool-down is compacted once more without W ops, which then fill the free slots again,
// W(up) before W(down). The per-device order of the final slots is the schedule; the engine
// replays it with the real stage and link times (the paper's "squeeze").

#include "slot_pattern.hpp"

#include <algorithm>
#include <array>
#include <tuple>

namespace pulse::detail {

namespace {

// Slot kinds on one device, in the order ties are broken. While compacting, kW is any W;
// in the final slots kW is W(up) and kWDown W(down).
enum SlotKind : int { kFDown = 0, kFUp = 1, kIUp = 2, kIDown = 3, kW = 4, kWDown = 5 };

using DeviceSlots = std::vector<std::vector<int>>;  // [kind][index] -> slot
using Slots = std::vector<DeviceSlots>;             // per device

struct SlotOp {
  int slot, device, kind, index;
  auto key() const { return std::tie(slot, device, kind, index); }
};

std::array<int, 4> block_offsets(VFamily f, int P, int d, int delta) {
  if (f == VFamily::v_min) return {d, 2 * P - 1 - d, 2 * P + delta + d, 4 * P + delta - 1 - d};
  return {2 * d, 3 * P - 2 - d, 3 * P + delta + 2 * d - 1, 6 * P + delta - d - 2};
}

int collision_free_shift(VFamily f, int P) {
  for (int delta = 0;; ++delta) {
    bool ok = true;
    for (int d = 0; d < P && ok; ++d) {
      std::array<int, 4> r = block_offsets(f, P, d, delta);
      for (int& x : r) x %= 6;
      std::sort(r.begin(), r.end());
      ok = std::adjacent_find(r.begin(), r.end()) == r.end();
    }
    if (ok) return delta;
  }
}

Slots repeat_block(VFamily f, int P, int M) {
  const int delta = collision_free_shift(f, P);
  Slots slots(P, DeviceSlots(4));
  for (int d = 0; d < P; ++d) {
    const std::array<int, 4> offsets = block_offsets(f, P, d, delta);
    for (int k = 0; k < 4; ++k) {
      for (int m = 0; m < M; ++m) slots[d][k].push_back(offsets[k] + 6 * m);
    }
  }
  return slots;
}

// The ops of one device in slot order (kinds below `kinds`).
std::vector<SlotOp> device_ops(const DeviceSlots& s, int device, int kinds) {
  std::vector<SlotOp> ops;
  for (int k = 0; k < kinds && k < static_cast<int>(s.size()); ++k) {
    for (int i = 0; i < static_cast<int>(s[k].size()); ++i) ops.push_back({s[k][i], device, k, i});
  }
  std::sort(ops.begin(), ops.end(),
            [](const SlotOp& a, const SlotOp& b) { return a.key() < b.key(); });
  return ops;
}

// W ops into the free slots of one device, in the order their I ops ran: one queue (kind
// kW), or two (W(up) first, then W(down)). Leftovers follow the last slot.
void fill_w(DeviceSlots& s, int device, bool split) {
  s.resize(split ? 6 : 5);
  const std::vector<SlotOp> ops = device_ops(s, device, 4);
  std::array<int, 2> pending{0, 0};
  std::size_t next = 0;
  const int bound = ops.empty() ? -1 : ops.back().slot;
  auto place = [&](int slot) {
    for (int q = 0; q < 2; ++q) {
      if (pending[q] == 0) continue;
      --pending[q];
      s[kW + q].push_back(slot);
      return true;
    }
    return false;
  };
  for (int t = 0; t <= bound; ++t) {
    if (next < ops.size() && ops[next].slot == t) {
      const int k = ops[next++].kind;
      if (k == kIUp || k == kIDown) ++pending[split && k == kIDown ? 1 : 0];
    } else {
      place(t);
    }
  }
  for (int t = bound + 1; place(t); ++t) {
  }
}

// The most activations the device holds in the slot model: F +1 at its slot, W -1 at its
// slot; without W slots, each free slot releases one held activation whose I has run.
int memory_peak(const DeviceSlots& s, bool count_w) {
  const int kinds = std::min<int>(count_w ? 5 : 4, static_cast<int>(s.size()));
  int bound = -1;
  for (int k = 0; k < kinds; ++k) {
    for (int slot : s[k]) bound = std::max(bound, slot);
  }
  std::vector<signed char> kind_at(bound + 1, -1);  // one op per slot on a device
  for (int k = 0; k < kinds; ++k) {
    for (int slot : s[k]) kind_at[slot] = static_cast<signed char>(k);
  }
  int held = 0, peak = 0, releasable = 0;
  for (int t = 0; t <= bound; ++t) {
    if (kind_at[t] >= 0) {
      const int k = kind_at[t];
      held += k <= kFUp ? 1 : k >= kW ? -1 : 0;
      if (k == kIUp || k == kIDown) ++releasable;
    } else if (!count_w && releasable > 0) {
      --held;
      --releasable;
    }
    peak = std::max(peak, held);
  }
  return peak;
}

// Every op of the slot model, in slot order (ties: device, kind).
std::vector<SlotOp> all_ops(const Slots& slots, int kinds) {
  std::vector<SlotOp> ops;
  for (int d = 0; d < static_cast<int>(slots.size()); ++d) {
    std::vector<SlotOp> mine = device_ops(slots[d], d, kinds);
    ops.insert(ops.end(), mine.begin(), mine.end());
  }
  std::sort(ops.begin(), ops.end(),
            [](const SlotOp& a, const SlotOp& b) { return a.key() < b.key(); });
  return ops;
}

// The ops that must end before `op` starts (inputs, and the device's own earlier op types of
// the same microbatch); W ops wait for the device's index-th I.
std::vector<std::pair<int, int>> inputs_of(const Slots& slots, const SlotOp& op, int P) {
  const int d = op.device, i = op.index;
  std::vector<std::pair<int, int>> in;  // (device, kind) at index i
  if (op.kind == kFDown && d > 0) in = {{d - 1, kFDown}};
  if (op.kind == kFUp) in = {{d, kFDown}};
  if (op.kind == kFUp && d + 1 < P) in.push_back({d + 1, kFUp});
  if (op.kind == kIUp) in = {{d, kFUp}};
  if (op.kind == kIUp && d > 0) in.push_back({d - 1, kIUp});
  if (op.kind == kIDown) in = {{d, kIUp}};
  if (op.kind == kIDown && d + 1 < P) in.push_back({d + 1, kIDown});
  (void)slots;
  (void)i;
  return in;
}

// The latest slot among `op`'s inputs and its kind's previous op (-1: none).
int latest_input(const Slots& slots, const SlotOp& op, int P) {
  const DeviceSlots& mine = slots[op.device];
  int latest = -1;
  for (const auto& [d, k] : inputs_of(slots, op, P))
    latest = std::max(latest, slots[d][k][op.index]);
  if (op.kind == kW) {
    std::vector<int> backward = mine[kIUp];
    backward.insert(backward.end(), mine[kIDown].begin(), mine[kIDown].end());
    std::sort(backward.begin(), backward.end());
    latest = std::max(latest, backward[op.index]);
  }
  if (op.index > 0) latest = std::max(latest, mine[op.kind][op.index - 1]);
  return latest;
}

// Every op as early as its inputs and its device allow, one slot each.
Slots squeeze(const Slots& slots, int kinds) {
  const int P = static_cast<int>(slots.size());
  Slots out = slots;
  std::vector<int> device_end(P, 0);
  for (const SlotOp& op : all_ops(slots, kinds)) {
    int start = device_end[op.device];
    for (const auto& [d, k] : inputs_of(out, op, P))
      start = std::max(start, out[d][k][op.index] + 1);
    if (op.index > 0) start = std::max(start, out[op.device][op.kind][op.index - 1] + 1);
    out[op.device][op.kind][op.index] = start;
    device_end[op.device] = start + 1;
  }
  return out;
}

// Moves `op` to the earliest free slot after its inputs if the device's peak stays within
// `peak`; otherwise leaves it.
void move_earlier(Slots& slots, const SlotOp& op, const std::vector<char>& occupied, int peak,
                  bool count_w) {
  int& slot = slots[op.device][op.kind][op.index];
  const int original = slot;
  for (int t = latest_input(slots, op, static_cast<int>(slots.size())) + 1; t < original; ++t) {
    if (occupied[t]) continue;
    slot = t;
    if (memory_peak(slots[op.device], count_w) <= peak) return;
  }
  slot = original;
}

// The warm-up (with W slots only) and the cool-down ops move earlier, then the whole is
// squeezed. Without W slots, W ops fill the free slots again before the squeeze.
Slots compact(Slots slots, bool with_w, int M) {
  const int kinds = with_w ? 5 : 4;
  int peak = 0;
  for (const DeviceSlots& s : slots) peak = std::max(peak, memory_peak(s, with_w));
  std::vector<std::vector<char>> occupied(slots.size());
  for (std::size_t d = 0; d < slots.size(); ++d) {
    const std::vector<SlotOp> mine = device_ops(slots[d], static_cast<int>(d), kinds);
    occupied[d].assign(mine.empty() ? 1 : mine.back().slot + 2, 0);
  }
  enum { warm_up, steady, cool_down } phase = warm_up;
  for (const SlotOp& op : all_ops(slots, kinds)) {
    if (phase == warm_up && op.device == 0 && op.kind == kIDown) phase = steady;
    const bool moves = phase == cool_down || (phase == warm_up && with_w);
    if (phase == steady && op.kind == kFDown && op.index == M - 1) phase = cool_down;
    if (moves) move_earlier(slots, op, occupied[op.device], peak, with_w);
    occupied[op.device][slots[op.device][op.kind][op.index]] = 1;
  }
  if (!with_w) {
    for (std::size_t d = 0; d < slots.size(); ++d) fill_w(slots[d], static_cast<int>(d), false);
  }
  return squeeze(slots, 5);
}

Slots without_w(Slots slots) {
  for (DeviceSlots& s : slots) s.resize(4);
  return slots;
}

Op op_of(const SlotOp& s, int P) {
  const StageId down = s.device, up = 2 * P - 1 - s.device;
  switch (s.kind) {
    case kFDown:
      return {OpKind::forward, down, s.index};
    case kFUp:
      return {OpKind::forward, up, s.index};
    case kIUp:
      return {OpKind::backward_input, up, s.index};
    case kIDown:
      return {OpKind::backward_input, down, s.index};
    case kW:
      return {OpKind::backward_weight, up, s.index};
    default:
      return {OpKind::backward_weight, down, s.index};
  }
}

}  // namespace

Schedule slot_pattern_schedule(const PipelineModel& model, int M, VFamily family) {
  const int P = model.num_devices();
  Slots slots = repeat_block(family, P, M);
  for (int d = 0; d < P; ++d) fill_w(slots[d], d, false);
  slots = compact(std::move(slots), true, M);
  slots = compact(without_w(std::move(slots)), false, M);
  slots = without_w(std::move(slots));
  Schedule schedule;
  schedule.split_backward = true;
  schedule.policy = v_family_name(family);
  for (int d = 0; d < P; ++d) {
    fill_w(slots[d], d, true);
    std::vector<Op> ops;
    for (const SlotOp& s : device_ops(slots[d], d, 6)) ops.push_back(op_of(s, P));
    schedule.device_ops.push_back(std::move(ops));
  }
  return schedule;
}

}  // namespace pulse::detail
