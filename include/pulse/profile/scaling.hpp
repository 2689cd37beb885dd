// What-if costs: a model profile's compute times and a cluster's links scaled by a factor,
// before planning (`plan --compute-scale / --link-scale`), and the time range a profile
// states for a device type, which gives the factors `range-low` and `range-high`.
//
//   compute scale c:  every forward and backward time of one device type x c
//                     (c > 1: the device is slower than the profile says)
//   link scale l:     every link l times as fast: bandwidth x l, latency / l, so every
//                     transfer and all-reduce time is divided by l (cost_model.hpp's
//                     transfer time is linear in both)
//
// Scaling a copy of the loaded profiles leaves their SourceFile (path, sha256) as it is: a
// plan made from them names the files it read and records the scales beside them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pulse/base/result.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// The scales a plan's figures assume (identity: the profiles as they are).
struct CostScales {
  double compute = 1;
  double links = 1;
  /// "range-low" or "range-high" when `compute` was read from the model's time range.
  std::string compute_from;

  bool identity() const { return compute == 1 && links == 1 && compute_from.empty(); }
};

/// A profile's statement of how far its times on one device type may be off: the
/// provenance.assumptions line "time-range DEVICE: xLOW to xHIGH (why)", which
/// scripts/profilegen/anchors.py writes (LOW and HIGH multiply the stated times).
struct TimeRange {
  std::string device_type;
  double low = 1;
  double high = 1;
};

/// Every assumption line that starts with this is a time range.
inline constexpr std::string_view kTimeRangePrefix = "time-range ";

/// The range an assumption line states; nullopt for any line that does not start with
/// kTimeRangePrefix. A line that does but is malformed (no ": x", " to x", numbers that
/// are not positive and finite, LOW above HIGH) is an error saying what was expected.
Result<std::optional<TimeRange>> parse_time_range(std::string_view line);

/// The range `model` states for `device_type`. Input errors name the file and the
/// assumption's JSON path: a malformed time-range line, two for the device type, or none.
Result<TimeRange> stated_time_range(const ModelProfile& model, std::string_view device_type);

/// A scale factor from the command line: a positive, finite number; nullopt otherwise.
std::optional<double> parse_scale(std::string_view text);

/// `--compute-scale TEXT`: a positive finite number, or "range-low" / "range-high" (then
/// `compute_from` names the end and `compute` waits for resolve_compute_scale). A usage
/// error names `option`.
Result<CostScales> parse_compute_scale(std::string_view text,
                                       std::string_view option = "--compute-scale");

/// Reads the end of the time range `scales.compute_from` names from `model`, for
/// `device_type`, into `scales.compute`; nothing to do without compute_from. An input error
/// (the model states no such range, or a malformed one) names `option`, the file and the line.
Status resolve_compute_scale(CostScales& scales, const ModelProfile& model,
                             std::string_view device_type,
                             std::string_view option = "--compute-scale");

/// A what-if factor (--compute-scale, --link-scale) within base/limits.hpp's kMinScale to
/// kMaxScale, or a usage error naming the command and the option: beyond it a plan would state
/// times its reader refuses.
Status check_scale_limit(std::string_view command, std::string_view option, double factor);

/// Multiplies every forward and backward time of `device_type` by `factor` (positive and
/// finite, as parse_scale gives; a model without that device type is left as it is).
void scale_times(ModelProfile& model, std::string_view device_type, double factor);

/// Makes every link class `factor` (positive, finite) times as fast: bandwidth x factor,
/// latency / factor.
void scale_links(ClusterProfile& cluster, double factor);

/// Both, for planning on `cluster` (its device type).
void apply_scales(const CostScales& scales, ModelProfile& model, ClusterProfile& cluster);

/// Caps each device's usable memory at `fraction` (0, 1] of it (plan --headroom, the plan's
/// chosen.headroom): usable' = floor(fraction x usable), the rest reserved.
void apply_headroom(double fraction, ClusterProfile& cluster);

}  // namespace pulse
