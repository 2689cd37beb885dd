// A device's memory events in time order, for the held peaks of a replay (simulate.cpp,
// memory_pass): added in runs, put in order by merging them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pulse::detail {

/// One instant's change to a device's memory: activations and skip cache apart.
struct MemEvent {
  double time;
  std::int64_t activations, skips;
};

/// Events added in runs: one stage's forwards, its backwards, one skip hold's arrivals, its
/// departures, each over the microbatches. A run whose microbatches run in order is in time
/// order already, so by_time() merges the runs, a few passes over the events, where sorting
/// them all was 5% of a plan at pp 1024 over 2048 layers. A run out of order is sorted
/// first. Events of one instant come in no particular order.
class EventRuns {
 public:
  void clear() {
    events_.clear();
    starts_.assign(1, 0);
  }
  void add(const MemEvent& event) { events_.push_back(event); }
  /// Ends the run being added (an empty run is none).
  void end_run() {
    if (events_.size() > starts_.back()) starts_.push_back(events_.size());
  }
  /// Every event added (the last run ended), by time; clear() before adding more.
  const std::vector<MemEvent>& by_time();

 private:
  std::vector<MemEvent> events_, merged_;
  std::vector<std::size_t> starts_{0};  // where each run starts, and the end
};

}  // namespace pulse::detail
