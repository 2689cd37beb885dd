// What one synthesis carries from step to step (internal to the schedule synthesizer,
// synthesize.cpp): the room each device's activations have, the best schedule so far and how
// it compares with a candidate, and the CPU-time clock the request's safety limit runs on.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pulse/schedule/synthesize.hpp"
#include "pulse/simulate/schedule.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse::detail {

/// What each device's activations may hold, and the in-flight counts that follow from it.
struct Memory {
  std::vector<std::int64_t> room;       ///< Capacity less static state, within the budget.
  std::vector<std::int64_t> as_static;  ///< Capacity - room: what the in-flight helpers take.
  std::vector<int> safe_cap;            ///< In flight whatever the order (memory.hpp).
  std::vector<int> reach_cap;           ///< The most any order within the rule can hold.

  bool fits(const Timeline& t) const;
  /// The same from each device's residency peak alone (list_schedule's resident_peaks).
  bool fits(const std::vector<std::int64_t>& resident_peaks) const;
};

Memory memory_of(const ScheduleRequest& r);

/// The largest device's residency, then the sum over devices: the second objective.
std::pair<std::int64_t, std::int64_t> footprint(const Timeline& t);

/// The iteration a timeline gives with the request's all-reduce after each device's last op.
double iteration(const Timeline& t, const std::vector<double>& allreduce_s);

/// -1, 0 or 1 as x is shorter than, as long as (within a relative 1e-9) or longer than y.
int compare(double x, double y);

/// Whether `t` is better than `than`: shorter; or as short and a shorter iteration; or as
/// short, no longer an iteration and holding less.
bool better(const Timeline& t, const Timeline& than, const std::vector<double>& allreduce_s);

/// The best schedule so far, with its replay (the memory rule's figures only).
struct Best {
  Schedule schedule;
  Timeline timeline;
  std::string method;
  bool have = false;

  /// Keeps `candidate` if it replays within memory and beats the best.
  bool offer(Schedule candidate, const ScheduleRequest& r, const Memory& mem, std::string how);
  /// The same for a candidate replayed already (`replay`: its rule-only replay).
  bool offer(Schedule candidate, Timeline replay, const ScheduleRequest& r, const Memory& mem,
             std::string how);
};

/// Moves the best schedule into the answer, with its makespan and its gap to the bound.
void adopt(Best& best, ScheduleAnswer& a);

/// The request's CPU-time safety limit, counted from construction on this thread.
class Deadline {
 public:
  explicit Deadline(double seconds);
  double left() const;
  bool expired() const { return left() <= 0; }

 private:
  double seconds_;
  double start_;
};

}  // namespace pulse::detail
