#include "pulse/simulate/event_runs.hpp"

#include <algorithm>

namespace pulse::detail {

const std::vector<MemEvent>& EventRuns::by_time() {
  end_run();
  const auto earlier = [](const MemEvent& a, const MemEvent& b) { return a.time < b.time; };
  const auto at = [](std::vector<MemEvent>& v, std::size_t k) {
    return v.begin() + static_cast<std::ptrdiff_t>(k);
  };
  for (std::size_t r = 0; r + 1 < starts_.size(); ++r) {
    if (!std::is_sorted(at(events_, starts_[r]), at(events_, starts_[r + 1]), earlier)) {
      std::sort(at(events_, starts_[r]), at(events_, starts_[r + 1]), earlier);
    }
  }
  // Neighbouring runs merged pairwise, into `merged_` and back, until one is left.
  while (starts_.size() > 2) {
    merged_.resize(events_.size());
    std::vector<std::size_t> starts{0};
    for (std::size_t r = 0; r + 1 < starts_.size(); r += 2) {
      const std::size_t lo = starts_[r], mid = starts_[r + 1];
      const std::size_t hi = r + 2 < starts_.size() ? starts_[r + 2] : mid;
      std::merge(at(events_, lo), at(events_, mid), at(events_, mid), at(events_, hi),
                 at(merged_, lo), earlier);
      starts.push_back(hi);
    }
    events_.swap(merged_);
    starts_ = std::move(starts);
  }
  return events_;
}

}  // namespace pulse::detail
