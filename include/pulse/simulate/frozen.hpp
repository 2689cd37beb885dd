// Frozen encoders in the step (docs/frozen.md): where the forwards of the model profile's
// `frozen` components run, and what they cost. A pure function of one pipeline's timeline:
//
//   cached       an offline pass encoded every sample; the step runs nothing frozen, and
//                storage holds sum_c output_bytes_per_sample(c) per sample.
//   before_step  every pipeline device encodes its share of the pipeline's S samples
//                (S / P, the first S mod P devices one more) before the pipeline starts:
//                the step grows by max_d sum_c t_c(n_d) (what trainers do by default).
//   bubbles      the forwards fill the idle gaps of each device's replayed timeline, in
//                pieces of whole samples, and what no gap takes runs before the step as
//                above. The gaps of iteration i encode the samples of iteration i + 1, as
//                DiffusionPipe does (Tian et al., MLSys'24, arXiv 2405.01248, section 4):
//                no frozen op waits for, or delays, an op of the iteration it runs in.
//
// A piece of k samples of component c on device d takes
//   t(c, k, d) = forward_c(k) + (d != 0 ? k x output_bytes_c / bandwidth(d -> 0) + latency : 0)
// (forward_c interpolated between the profiled microbatch sizes, profile.hpp; the outputs go
// to device 0, which runs the first stage) and fits a gap of length g when t <= g.
//
// Memory. A device that runs any frozen op keeps every component's weights resident
// (W = sum_c weight_bytes_c, no gradient, no optimizer state) through the step, and a piece
// holds k x activation_bytes_per_sample_c while it runs:
//   (a) W <= free_step(d)                         (capacity - the plan's peak)
//   (b) before the step: W + k x act_c <= free_before(d) (capacity - static bytes)
//   (c) in a gap:        W + k x act_c (+ on device 0, the encoded outputs of the next
//                        iteration's samples it holds) <= free_step(d)
// Pieces are cut to the largest k that fits; a placement that cannot place one sample of a
// component on a device that must run it is refused, with the reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulse/profile/profile.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

enum class FrozenPlacement { cached, before_step, bubbles };

/// "cached", "before_step", "bubbles".
std::string_view frozen_placement_name(FrozenPlacement placement);
std::optional<FrozenPlacement> parse_frozen_placement(std::string_view text);

/// An idle interval of one device: [start_s, end_s) of the iteration's timeline.
struct IdleGap {
  double start_s = 0;
  double end_s = 0;
};

/// Every device's idle gaps in [0, makespan): between its ops (a blocking send counts as
/// busy), before its first and after its last. Gaps under a nanosecond are dropped.
std::vector<std::vector<IdleGap>> idle_gaps(const Timeline& timeline);

/// One frozen forward, the plan's `frozen.ops[]` record as the placement fills it (the plan
/// holds these, plan.hpp's PlanFrozen): `samples` samples from `first_sample` (of the
/// pipeline's S, in microbatch order) of `component`, on pipeline device `device`, in `slot`
/// "before_step" (times from the start of the frozen phase before the pipeline) or "bubble"
/// (the iteration's times, inside the idle gap [gap_start_s, gap_end_s) of the replayed
/// timeline, encoding the next iteration's samples).
struct FrozenOp {
  std::string component;
  DeviceId device = 0;
  std::string slot;  ///< "before_step" or "bubble".
  double start_s = 0;
  double end_s = 0;
  int first_sample = 0;
  int samples = 0;
  std::optional<double> gap_start_s;  ///< Bubble ops only.
  std::optional<double> gap_end_s;

  bool in_bubble() const { return slot == "bubble"; }
};

struct FrozenRequest {
  const ModelProfile* model = nullptr;  ///< Its `frozen` components and microbatch sizes.
  int device_type = 0;                  ///< Index into the components' times.
  int pp = 1;
  int samples = 1;  ///< Per pipeline and iteration: microbatch size x microbatches.
  /// Per device: the link to device 0 (ignored for device 0).
  std::vector<LinkClass> link_to_first;
  std::vector<std::int64_t> free_step_bytes;    ///< Capacity - the plan's peak, per device.
  std::vector<std::int64_t> free_before_bytes;  ///< Capacity - static bytes, per device.
  std::vector<std::vector<IdleGap>> gaps;       ///< Per device (bubbles only).
};

struct FrozenAnswer {
  FrozenPlacement placement = FrozenPlacement::before_step;
  bool feasible = false;
  std::string reason;         ///< Why refused.
  double before_step_s = 0;   ///< Added to the step: the longest device's frozen phase.
  double bubble_s = 0;        ///< Frozen seconds hidden in gaps, all devices together.
  std::vector<FrozenOp> ops;  ///< Device by device, in time order.
  std::vector<std::int64_t> weight_bytes;      ///< Per device: frozen weights resident.
  std::vector<std::int64_t> activation_bytes;  ///< Per device: the largest piece's.
  std::int64_t cached_bytes_per_sample = 0;    ///< What a cache stores per sample.
};

/// Seconds of a piece of `samples` samples of component `c` on `device` (above).
double frozen_piece_seconds(const FrozenRequest& request, const FrozenComponent& c, DeviceId device,
                            int samples);

/// No fewer seconds than the frozen forwards of `samples` samples take, all components, in
/// any pieces on any devices of type `device_type` (what the pieces of place_frozen's answer
/// add up to, before_step and bubbles alike). A piece of k samples takes forward_c(k) at
/// least (plus a send off device 0), and forward_c(k) / k, linear between profiled sizes and
/// through the origin outside them, is least at a profiled size: so each sample of c costs
/// at least min over profiled sizes b of forward_c(b) / b, less the quantum each piece may
/// round away.
double frozen_work_lower_bound(const ModelProfile& model, int device_type, int samples);

/// The placement `placement` of the request's components, or why it is refused.
FrozenAnswer place_frozen(const FrozenRequest& request, FrozenPlacement placement);

}  // namespace pulse
