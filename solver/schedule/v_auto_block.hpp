// One building block's schedule, as V-auto's search makes it (internal to the schedule
// synthesizer; the search is v_auto.hpp's, the steps v_auto_block.cpp's).
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "v_auto.hpp"

namespace pulse::detail {

constexpr int kSlots = 6;

/// Cell letters in the order of a SlotPattern: F, f, B, b, W, w.
enum SlotLetter : int { kCellF = 0, kCellFf = 1, kCellB = 2, kCellBb = 3, kCellW = 4, kCellWw = 5 };

/// A device's block: the slot (0..5) of each of its six ops for one microbatch; -1: none.
using SlotPattern = std::array<int, kSlots>;

/// The letter index of a cell ("FfBbWw"), -1 for a free one.
int slot_letter(char c);

struct BlockSchedule {
  std::optional<SlotRows> rows;  ///< None where the authors' code returns none.
  int peak = 0;                  ///< The peak the authors' code returns beside it.
  bool raised = false;           ///< Where their code raises (their whole search ends).
};

/// The authors' schedule_by_building_block (keep_stable_phase off) for one block per
/// device, P devices, M microbatches, a budget of `max_mem` stage activations.
BlockSchedule schedule_block(const std::vector<SlotPattern>& block, int P, int M, int max_mem);

}  // namespace pulse::detail
