// The cost model's time rules. Each is defined here once; the partitioner, the placement
// search, the pipeline model, the simulator and the plan writer all call these, so their
// figures cannot drift apart. (The validator restates some of them on purpose, to check
// the planner independently; it says so where it does.) The memory rule is memory.hpp's.
//
//   transfer_time(link, n, bytes) = n * latency(link) + bytes / bandwidth(link)
//       seconds for n messages totalling `bytes` on one direction of a link
//
//   device_load(compute, sends)   = compute + sends            sends block the sender
//                                 = max(compute, sends)        sends overlap compute
//       a device's time per microbatch; the pipeline's steady-state period is at least the
//       largest device's load (overlap does not make a slow link free)
//
//   quantize_time(t)              = round(t * T) / T,  T = kTimeTicksPerSecond = 10^9
//       every time a plan states is a whole number of nanoseconds (dividing last gives the
//       double nearest the decimal value, which prints the same on every machine), and the
//       planner rounds stage and transfer times before scheduling, so a plan read back
//       replays to exactly its own figures
#pragma once

#include <algorithm>
#include <cstdint>

#include "pulse/profile/profile.hpp"

namespace pulse {

/// Ticks per second of the time quantum: plans state times in whole nanoseconds.
inline constexpr double kTimeTicksPerSecond = 1e9;
/// The time quantum in seconds (what plans record as cost_model.time_quantum_s).
inline constexpr double kTimeQuantum_s = 1 / kTimeTicksPerSecond;

// The two below are inline: the partitioner's DP calls them for every transition it
// tries (millions at 4096 layers), where a call into another file cost about a tenth of
// its time.

/// Seconds for `messages` messages totalling `bytes` on `link`.
inline double transfer_time(const LinkClass& link, int messages, std::int64_t bytes) {
  return messages * link.latency_s + static_cast<double>(bytes) / link.bandwidth_bytes_per_s;
}

/// A device's time per microbatch from its compute and its sends (see the top of the file).
inline double device_load(double compute_s, double send_s, bool overlap_comm) {
  return overlap_comm ? std::max(compute_s, send_s) : compute_s + send_s;
}

/// `t` rounded to the time quantum.
double quantize_time(double t);

}  // namespace pulse
