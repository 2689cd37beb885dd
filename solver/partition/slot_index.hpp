// The V partitioner's dense state index, kept apart from the DP that fills it.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

namespace pulse::detail {

// The V DP's dense state index: (L + 1)^2 ints, cell (i + 1, j) the state's position in the
// level being built plus one, zero when it is not there. calloc leaves the pages a DP's
// band never reaches untouched (at 4096 layers the index is 64 MiB); and as the tuner
// builds a DP per configuration and partition (84 at 4096 layers tuned), the largest index
// a thread freed is kept for the next DP, each zeroing back the cells it set (touched_),
// instead of the kernel faulting in and zeroing the same pages again each time (0.8 of 9
// CPU seconds there).
class SlotIndex {
 public:
  explicit SlotIndex(std::size_t size);
  SlotIndex(SlotIndex&&) = default;
  SlotIndex& operator=(SlotIndex&&) = default;
  ~SlotIndex();

  int at(std::size_t key) const { return cells_[key]; }
  /// Sets a cell that is zero (touched_ is noted first, so a cell is never set unnoted).
  void add(std::size_t key, int value) {
    touched_.push_back(key);
    cells_[key] = value;
  }
  /// Every cell back to zero.
  void clear();

 private:
  SlotIndex() = default;
  static SlotIndex& spare();

  std::unique_ptr<int[], decltype(&std::free)> cells_{nullptr, &std::free};
  std::size_t size_ = 0;
  std::vector<std::size_t> touched_;
};

}  // namespace pulse::detail
