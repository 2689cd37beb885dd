// The plan's certificate: lower bounds on the iteration time that hold for every schedule
// of a pipeline model (its stages on their devices, its transfers), by the simulator's own
// rules (simulate/engine.cpp: a device runs one op at a time and, unless sends overlap
// compute, blocks on each send after the op; a link carries one send at a time; the
// all-reduce of evaluate.hpp starts when its device's last op and sends are done).
//
// With M microbatches, stage s on device dev(s), F_s and B_s its forward and backward (I_s
// and W_s the two parts of a split backward), and per device d and microbatch
//   work_d   = sum over d's stages of F_s + B_s, plus (sends block) every send d makes: the
//              forward of each transfer out of d's stages, the backward of each into them
//   link_de  = the sends of one microbatch on the link d -> e (forward and backward)
//   arrive_s = the forward chain to stage s: arrive_0 = 0, arrive_s = arrive_{s-1} +
//              F_{s-1} + the forward time of the transfers s-1 -> s (0 on one device), or
//              0 where neither a device nor a transfer links s - 1 to s
//   head_d   = min over d's stages of arrive_s: no op of d starts sooner (each needs a
//              forward of its own stage)
//   drain_s  = the backward chain below s: drain_0 = 0, drain_s = backward time of the
//              transfers s-1 -> s + B_{s-1} + drain_{s-1}, or 0 where the chain breaks
// the terms are
//   device_work   max_d max(M work_d, M max_e link_de)
//   critical_path one microbatch forward through every stage and back (with I, then W_s,
//                 under a split backward), the longest path of its op graph
//   fill_drain    max_d head_d + M work_d + tail_d, tail_d = drain_{s1} - (sends block) the
//                 sends after B_{s1} (at least 0), s1 d's first stage; 0 with a split
//                 backward or where a chain from a stage of d down to s1 breaks. Without a
//                 split, every op of microbatch m on d precedes B(s1, m), so d's last op is
//                 such a backward and the backward chain below it follows
//   allreduce     max_d head_d + M work_d + allreduce_d
// and `memory` (compile's: the synthesizer's bound under each device's memory) where given.
// Each is a whole number of nanoseconds, as every time of the model is.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/plan/plan.hpp"

namespace pulse {

/// The terms above for `model` with `num_microbatches` microbatches, `allreduce_s` per
/// pipeline device (evaluate.hpp's allreduce_times), `memory_s` the bound under memory if
/// known: `certificate` without `gap`, `partition` or `published`.
PlanCertificate iteration_bounds(const PipelineModel& model, int num_microbatches,
                                 bool split_backward, const std::vector<double>& allreduce_s,
                                 std::optional<double> memory_s = std::nullopt);

/// `iteration_s / bounds.bound_s`, the iteration on the time quantum as the bound is.
double gap_to(const PlanCertificate& bounds, double iteration_s);

/// `bounds` with its gap to `iteration_s`.
PlanCertificate with_gap(PlanCertificate bounds, double iteration_s);

/// One line for the reports: "certificate: no schedule of these stages beats 1.234 s (fill
/// and drain); the plan is 1.03x of it; zbv-torch 1.21x, ...". Where memory binds, it says
/// what the memory costs: "...; with no memory limit 1.100 s".
std::string certificate_line(const PlanCertificate& c);

}  // namespace pulse
