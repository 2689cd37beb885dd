// What pulse-plan supports, each limit named once. The loaders refuse a profile beyond them
// (exit 2, with the JSON path), and compile_plan refuses a request whose sums could not be
// represented, before any pass runs: every byte count the passes add up is then a sum of
// at most kMaxRequestBytes, so 64-bit integers cannot overflow, and every time is finite.
//
// The sizes are far above the shipped profiles (the largest: 61 layers, 8 x 8 devices;
// 1 TiB of layer bytes would be 1000x any of them) and below where the algorithms stop
// scaling: docs/limits.md has the measurements.
#pragma once

#include <cstdint>

namespace pulse {

/// Layers in a model profile. The tuner's time grows about linearly with layers (the
/// partition's dynamic programs); at this size a whole tuned plan on one node takes tens of
/// seconds.
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
/// cost/cost_model.hpp), or every stage would round to 0 s (validate_request).
inline constexpr double kMinSlowestLayerSeconds = 1e-9;

/// Link bandwidth, bytes per second, and latency, seconds.
inline constexpr double kMinLinkBandwidth = 1;
inline constexpr double kMaxLinkBandwidth = 1e15;
inline constexpr double kMaxLinkLatency = 60;

/// The wall-clock safety limit of one schedule synthesis (--solver-time-limit), seconds: a
/// day. It is written into the plan, so it must be finite.
inline constexpr double kMaxSolverSeconds = 86400;

/// The request's worst case (validate_request in compile.cpp): every byte the model could
/// hold or send in one iteration, and every second it could take, at the largest
/// microbatch size and global batch asked for. Beyond these the request is refused.
inline constexpr std::int64_t kMaxRequestBytes = std::int64_t{1} << 60;
inline constexpr double kMaxRequestSeconds = 1e9;

}  // namespace pulse
