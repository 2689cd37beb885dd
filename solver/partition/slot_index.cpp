#include "slot_index.hpp"

#include <new>
#include <utility>

namespace pulse::detail {

SlotIndex::SlotIndex(std::size_t size) {
  SlotIndex& kept = spare();
  if (kept.cells_ && kept.size_ >= size) {
    *this = std::move(kept);
    return;
  }
  cells_.reset(static_cast<int*>(std::calloc(size, sizeof(int))));
  if (!cells_) throw std::bad_alloc();
  size_ = size;
}

SlotIndex::~SlotIndex() {
  if (!cells_) return;  // moved from
  clear();
  SlotIndex& kept = spare();
  if (&kept != this && size_ >= kept.size_) kept = std::move(*this);
}

void SlotIndex::clear() {
  for (std::size_t k : touched_) cells_[k] = 0;
  touched_.clear();
}

SlotIndex& SlotIndex::spare() {
  thread_local SlotIndex kept;
  return kept;
}

}  // namespace pulse::detail
