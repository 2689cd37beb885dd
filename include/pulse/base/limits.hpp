// What pulse-plan supports, and what a plan file may state, each limit named once (no pass
// keeps a private one). The loaders refuse a profile beyond them (exit 2, with the JSON
// path), and compile_plan refuses a request whose sums could not be represented, before any
// pass runs: every byte count the passes add up is then a sum of at most kMaxRequestBytes,
// so 64-bit integers cannot overflow, and every time is finite.
//
// The sizes are far above the shipped profiles (the largest: 61 layers, 8 x 8 devices;
// 1 TiB of layer bytes would be 1000x any of them) and below where the algorithms stop
// scaling: docs/limits.md has the measurements.
#pragma once

#include <cstdint>

namespace pulse {

/// Layers in a model profile. The tuner's time grows about linearly with layers (the
/// partition's dynamic programs); at this size a whole tuned plan on one node takes tens of
/// seconds. Every pass plans up to it: the V partitioner's dense state index, (L+1)^2 ints,
/// is 64 MiB here (scripts/limits_bench.py measures the whole plan).
inline constexpr int kMaxLayers = 4096;

/// Skip connections in a model profile.
inline constexpr int kMaxSkips = 4096;

/// Devices in a cluster profile (nodes x devices per node).
inline constexpr std::int64_t kMaxDevices = 65536;

/// Pipeline degree (--pp, and what the tuner tries).
inline constexpr int kMaxPipelineDegree = 1024;

/// Microbatches per pipeline per iteration. Larger configurations are not tried (the tuner
/// says why); a fixed one is refused. Each schedule replay costs in proportion to them.
inline constexpr int kMaxMicrobatches = 4096;

/// Samples per microbatch a model profile may list (timing.microbatch_sizes).
inline constexpr int kMaxMicrobatchSize = 1 << 20;

/// Samples per iteration (--global-batch).
inline constexpr int kMaxGlobalBatch = 1 << 24;

/// Bytes per sample of one layer's activations or output, or of one skip (1 TiB).
inline constexpr std::int64_t kMaxBytesPerSample = std::int64_t{1} << 40;

/// Parameters of one layer (about 1.1e12).
inline constexpr std::int64_t kMaxLayerParams = std::int64_t{1} << 40;

/// Device memory in a cluster profile (1 PiB).
inline constexpr std::int64_t kMaxDeviceMemory = std::int64_t{1} << 50;

/// A model or cluster profile file, bytes: 256 MiB. A profile of 4096 layers in the shipped
/// profiles' style (0.6-1.3 KB a layer) is under 6 MB; this leaves room for forty times that.
inline constexpr std::int64_t kMaxProfileFileBytes = std::int64_t{256} << 20;

/// Seconds one layer may take for one microbatch, forward or backward.
inline constexpr double kMaxLayerSeconds = 3600;
/// The slowest layer's forward time must be at least this: the plans' time quantum (1 ns,
/// cost/cost_model.hpp), or every stage would round to 0 s (check_request).
inline constexpr double kMinSlowestLayerSeconds = 1e-9;

/// Work of one layer's forward for one sample, FLOPs ($.layers[].forward_flops_per_sample):
/// 10^18, 200,000 times the largest shipped layer (SVD-XT's, 5.1e12). With the device specs'
/// figures below, what a derivation computes from it (compute time = microbatch x FLOPs /
/// peak; profile/derive.hpp) is finite: at most 2^20 x 10^18 / 10^6 = 1.05e18 s.
inline constexpr double kMaxLayerFlopsPerSample = 1e18;
/// A device spec's peak FLOP/s and memory bandwidth (bytes per second): from 10^6 (below any
/// processor a model trains on) to 10^18 FLOP/s (400 times a B200's dense fp16) and 10^15
/// bytes per second (125 times its HBM), so that the ratios a derivation scales times by stay
/// within 10^12 of 1.
inline constexpr double kMinDeviceRate = 1e6;
inline constexpr double kMaxPeakFlops = 1e18;
inline constexpr double kMaxDeviceBytesPerSecond = 1e15;

/// Link bandwidth, bytes per second, and latency, seconds.
inline constexpr double kMinLinkBandwidth = 1;
inline constexpr double kMaxLinkBandwidth = 1e15;
inline constexpr double kMaxLinkLatency = 60;

/// The CPU-time safety limit of one schedule synthesis (--solver-time-limit), seconds: a
/// day. It is written into the plan, so it must be finite.
inline constexpr double kMaxSolverSeconds = 86400;

/// The request's worst case (check_request, src/compile/request_limits.cpp): every byte the
/// model could hold or send in one iteration, and every second it could take, at the largest
/// microbatch size and global batch asked for. Beyond these the request is refused.
inline constexpr std::int64_t kMaxRequestBytes = std::int64_t{1} << 60;
inline constexpr double kMaxRequestSeconds = 1e9;

// What a plan file may state (plan/plan_check.hpp: the codec checks each while it reads, before
// anything a plan's numbers size is allocated). The pipeline degree ($.parallelism.pp) and the
// microbatches per iteration ($.parallelism.num_microbatches) are held to the planner's own
// limits above, kMaxPipelineDegree and kMaxMicrobatches: no plan beyond them is one pulse-plan
// wrote.

/// Stages ($.parallelism.num_stages): 16 per device at the largest pipeline degree (the
/// families use 1, 2, 4 or 6).
inline constexpr int kMaxStages = 16 * kMaxPipelineDegree;
/// Ranks: pp x dp, world_size, devices_used and devices_total are at most this, and every
/// rank id is below it (2^20: a million devices).
inline constexpr int kMaxRanks = 1 << 20;
/// Schedule operations: num_stages x num_microbatches x 2 (F, B) or 3 (F, I, W) at most
/// this. Each op costs the reader, the replay and the exports about a hundred bytes, so the
/// largest plan stays under a GiB in memory (a 64-device W3 plan with 512 microbatches
/// and a split backward has 0.6M ops).
inline constexpr std::int64_t kMaxOps = std::int64_t{1} << 22;
/// Any time a plan states, in seconds ($.schedule[].ops[].end_s, stage and transfer times,
/// makespans, the iteration): 10^6 s, 11.6 days. Below 2^53 ns every time is still exact to
/// the nanosecond quantum in a double, and sums over kMaxOps ops stay finite.
inline constexpr double kMaxSeconds = 1e6;
/// Any byte or parameter count a plan states: 2^53 (8 PiB), the largest integer a double
/// holds exactly (the codec compares figures as doubles). What the tools derive from them is
/// held to it as well, so that no int64 sum or product of them overflows: a microbatch's
/// skip and carried tensors (bytes_per_sample x microbatch_size), an iteration's
/// point-to-point and all-reduce bytes, the static state of all stages, and their
/// activations and skips with every microbatch in flight.
inline constexpr std::int64_t kMaxBytes = std::int64_t{1} << 53;
/// What-if factors ($.options and $.cost_model compute_scale, link_scale; plan and diff
/// --compute-scale, --link-scale): from 1/1000 to 1000.
inline constexpr double kMaxScale = 1000;
inline constexpr double kMinScale = 1 / kMaxScale;
/// Bytes per parameter ($.options.memory): 10^6 (mixed-precision Adam needs 16); weights,
/// gradients and optimizer state of 9 * 10^12 parameters on one device still fit an int64.
inline constexpr double kMaxBytesPerParam = 1e6;
/// A plan file's size, checked before it is read: 1 GiB.
inline constexpr std::int64_t kMaxPlanFileBytes = std::int64_t{1} << 30;

}  // namespace pulse
