// The schedule's lower bound (internal to the schedule synthesizer): one-machine relaxations
// of every device, with what memory forces. See lower_bound.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "op_graph.hpp"
#include "pulse/cost/pipeline_model.hpp"

namespace pulse::detail {

/// What memory forces: op `to` of microbatch m starts only after op `from` of microbatch
/// m - lag has ended (both on one device).
struct MemoryEdge {
  int from, to, lag;
};

/// One device's memory, for the warm-up cut (lower_bound.cpp).
struct DeviceMemory {
  std::int64_t room = 0;            ///< Bytes its activations may hold.
  std::vector<int> forward;         ///< Per stage on the device, in order: its F op.
  std::vector<int> releasing;       ///< Per stage: the op whose end frees the stage.
  std::vector<std::int64_t> holds;  ///< Per stage: bytes one microbatch holds there.
};

struct MemoryRelaxation {
  std::vector<MemoryEdge> edges;
  std::vector<DeviceMemory> devices;  ///< Empty: no warm-up cut.
};

/// One job of a device's one-machine relaxation: released at `release`, `work` long, and
/// `tail` (time that must follow its end) to the end of the schedule.
struct OneMachineJob {
  double release, work, tail;
};

/// Jackson's preemptive schedule (among released jobs, the largest tail first, preempted by
/// a release): optimal for one machine with release times and tails when preemption is
/// allowed, so its value (the latest end plus tail) bounds the non-preemptive problem from
/// below; any tie gives the same value. `jobs` are chains of `num_microbatches`, each one
/// op type's microbatches in order: one work, releases that never fall and tails that
/// never rise along the chain (what the op graph's propagation gives); a shorter last
/// chain is taken as it is.
double jackson_preemptive(const std::vector<OneMachineJob>& jobs, int num_microbatches);

/// The memory rule (cost/memory.hpp) on devices whose activations may hold room[d] bytes,
/// every stage running its microbatches in order. For device d with stages s1 < ... < sn
/// holding b1 (with the skip bytes), ..., bn per microbatch, the edges:
///   (a) F(s1, m) after the last backward of (s1, m - K), K = room / b1: at most K
///       microbatches between their F(s1) and their last backward of s1;
///   (b) F(sk, m) after the input gradient of (sk, m - K), K = room / (b1 + ... + bk): a
///       microbatch holds all of s1..sk from F(sk) to the end of its I(sk) (or B);
///   (c) F(sk, m) after the last backward of (s1, m - K), K = (room - b2 - ... - bk) / b1:
///       at F(sk, m), microbatch m holds s1..sk and each older one still in s1 holds b1;
/// and, for devices of one or two stages, the warm-up cut (lower_bound.cpp).
MemoryRelaxation memory_relaxation(const OpGraph& graph, const PipelineModel& model,
                                   const std::vector<std::int64_t>& room);

/// Edges (a) only, from in-flight counts per device.
MemoryRelaxation inflight_relaxation(const OpGraph& graph, const std::vector<int>& inflight_limit);

/// No schedule of `num_microbatches` can be shorter. For every device, the one-machine
/// relaxation: each of its ops gets a release time (its dependency chain, its stage's
/// earlier microbatches and the memory edges) and a tail (what must still run after it,
/// through the same); the best preemptive schedule of the device alone (Jackson's rule:
/// among released ops, the largest tail first) bounds every real schedule. The largest
/// over devices is the bound.
double schedule_lower_bound(const OpGraph& graph, int num_microbatches,
                            const MemoryRelaxation& memory);
double schedule_lower_bound(const OpGraph& graph, int num_microbatches,
                            const std::vector<int>& inflight_limit);

}  // namespace pulse::detail
