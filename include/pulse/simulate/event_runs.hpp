// A device's memory events in time order, for the peaks of a replay (simulate.cpp,
// memory_pass, and the memory rule's residency_of): added in runs, visited in order by a
// tournament over the runs' heads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "pulse/cost/memory.hpp"

namespace pulse::detail {

/// Event times added in runs: one stage's forward starts, its releases, one skip hold's
/// arrivals, its departures, each over the microbatches. Every event of a run changes the
/// memory by the same amount, which the caller keeps by the run's number (its end_run
/// call, from 0 after clear()), so a run is its times alone. A run whose microbatches run
/// in order is in time order already; one that is not is sorted when it ends.
///
/// sweep() visits every event in time order and says where each instant (events at the same
/// time) ends. The order of one instant's events is not defined: the peaks are read where an
/// instant ends, which no order within it changes (releases and allocations of an instant
/// sum to the same). It replaces merging the runs pairwise into one array, which copied
/// each event once per pass (four passes for a V device's twelve runs, 6.6 G of the 127 G
/// instructions a plan of pp 512 over 2048 layers executed, and the rule's residency sorted
/// the same times again).
class TimeRuns {
 public:
  void clear() {
    times_.clear();
    starts_.assign(1, 0);
  }
  void add(double time) { times_.push_back(time); }
  /// Ends the run being added, empty or not: the runs are numbered by these calls.
  void end_run() {
    const auto first = times_.begin() + static_cast<std::ptrdiff_t>(starts_.back());
    if (!std::is_sorted(first, times_.end())) std::sort(first, times_.end());
    starts_.push_back(times_.size());
  }
  std::size_t num_runs() const { return starts_.size() - 1; }

  /// Calls event(run) for every event, in time order across the runs (the run the event
  /// belongs to), and instant_end() after the last event of each instant. Every run must
  /// have ended.
  template <class Event, class InstantEnd>
  void sweep(Event&& event, InstantEnd&& instant_end);

 private:
  std::vector<double> times_;
  std::vector<std::size_t> starts_{0};  // run r is [starts_[r], starts_[r + 1])
  // The tournament, of losers: loser_[node] is the run that lost the match at `node` and its
  // head's time (infinity once the run is done, and for the leaves past the last run); the
  // winner of the root is the run whose head is earliest. next_[r] is run r's next event.
  struct Entry {
    double time;
    std::uint32_t run;
  };
  static constexpr double kDone = std::numeric_limits<double>::infinity();
  std::vector<std::size_t> next_;
  std::vector<Entry> loser_, up_;  // up_: the build's winners
};

template <class Event, class InstantEnd>
void TimeRuns::sweep(Event&& event, InstantEnd&& instant_end) {
  const std::size_t runs = num_runs(), total = starts_.back();  // the ended runs' events
  if (total == 0) return;
  std::size_t leaves = 1;
  while (leaves < runs) leaves *= 2;
  next_.assign(starts_.begin(), starts_.end() - 1);
  const auto head = [this](std::uint32_t r) {
    return next_[r] < starts_[r + 1] ? times_[next_[r]] : kDone;
  };
  // Built bottom up: each node keeps its match's loser and passes the winner up.
  std::vector<Entry>& loser = loser_;
  loser.assign(leaves, Entry{kDone, 0});
  std::vector<Entry>& up = up_;
  up.resize(2 * leaves);
  for (std::uint32_t r = 0; r < leaves; ++r) up[leaves + r] = {r < runs ? head(r) : kDone, r};
  for (std::size_t node = leaves - 1; node >= 1; --node) {
    const Entry& a = up[2 * node];
    const Entry& b = up[2 * node + 1];
    const bool b_wins = b.time < a.time;
    loser[node] = b_wins ? a : b;
    up[node] = b_wins ? b : a;
  }
  Entry winner = up[1];
  for (std::size_t k = 0; k < total; ++k) {
    const double now = winner.time;
    const std::uint32_t r = winner.run;
    event(r);
    ++next_[r];
    winner = {head(r), r};
    // Replayed from r's leaf up: at each node the winner so far meets that match's loser.
    // Of two heads at one time either may go first (no instant's order matters).
    for (std::size_t node = (leaves + r) / 2; node >= 1; node /= 2) {
      Entry& other = loser[node];
      if (other.time < winner.time) std::swap(other, winner);
    }
    if (!(winner.time == now)) instant_end();
  }
}

/// What every event of one run of a device's memory events changes (TimeRuns numbers the
/// runs): the activations and the skip cache really held, and the memory rule's charge and
/// its count of microbatches in flight (cost/memory.hpp, residency).
struct MemoryChange {
  std::int64_t activations = 0, skips = 0, charged = 0;
  int inflight = 0;
};

/// A device's memory events by run, and what each run changes: scratch a caller keeps
/// across devices.
struct MemoryRuns {
  TimeRuns runs;
  std::vector<MemoryChange> changes;  // [run]
  void clear() {
    runs.clear();
    changes.clear();
  }
  /// Ends the run being added (TimeRuns::end_run); each of its events changes `change`.
  void end_run(const MemoryChange& change) {
    runs.end_run();
    changes.push_back(change);
  }
};

/// A device's memory over its runs, read where each instant ends: the rule's charge
/// (residency: at one instant releases come before allocations, so its peaks are at an
/// instant's end) and the bytes really held at the first instant where activations and skip
/// cache together are the most (`any` false where there are no events).
struct MemorySweep {
  Residency charged;
  std::int64_t activations = 0, skips = 0;
  bool any = false;
};
MemorySweep sweep_memory(MemoryRuns& runs);

}  // namespace pulse::detail
