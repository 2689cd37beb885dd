// The planner's defaults, each named once: the plan command's options, PlanOptions, the
// schedule request and the MILP limits all take their defaults from here.
#pragma once

namespace pulse {

/// Branch-and-bound nodes per integer program: the deterministic work limit of the exact
/// schedule ILP (--solver-nodes).
inline constexpr int kDefaultSolverNodes = 5000;

/// Wall-clock safety limit of one schedule synthesis, seconds (--solver-time-limit). Only a
/// safety: the work limits (list schedules, order replays, branch-and-bound nodes) end every
/// search first. scripts/determinism.py measures the longest synthesis of every shipped
/// model x cluster under load against it; if it ever fires, the command says so on stderr and
/// the plan's solver status is "time_limit".
inline constexpr double kDefaultSolverSeconds = 60.0;

/// The global batch when none is given: this many samples per device of the cluster.
inline constexpr int kDefaultSamplesPerDevice = 8;

}  // namespace pulse
