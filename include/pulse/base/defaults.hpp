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

/// The share of each device's usable memory a plan may fill at its peak (--headroom): what
/// trainers leave for what a plan cannot see. PyTorch's caching allocator reserves more than
/// it hands out: SD2's whole step on an H200 held 1.4 to 7.7% more reserved than allocated at
/// its peak (docs/fidelity.md, the step table: 72.32 GiB reserved for 67.16 allocated at 768
/// px, microbatch 32), of which the cluster profiles' reserved_bytes take 5% of the capacity
/// (docs/profiles.md); 5% of the usable memory more covers the rest, and is the line above
/// which plans were warned about before (figures.hpp, kMemoryWarning).
inline constexpr double kDefaultHeadroom = 0.95;

}  // namespace pulse
