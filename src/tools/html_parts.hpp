// The pieces of pulse-plan's HTML pages, shared by the export's report (export_html.cpp) and
// the diff page (diff_html.cpp): escaping, the style sheet, and one SVG figure each for a
// plan's schedule timeline, its partition with skip arcs, its memory per device and its
// traffic by link class. Every figure is drawn in a Frame, so a page can put two plans side
// by side; a figure's scale (seconds, bytes) is an argument, so two plans can share one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pulse/plan/plan.hpp"

namespace pulse::html {

/// Text for HTML content and attribute values: html_text (pulse/base/text.hpp).
std::string esc(const std::string& s);

/// The style sheet every page starts with (the figures' classes, tables, legends).
const char* style();

/// A figure's width and its margins, in CSS pixels.
struct Frame {
  double width = 1000;
  double left = 80;  ///< The label column ("device 3").
  double right = 16;
  double plot() const { return width - left - right; }
};

/// The end of the plan's last op: its schedule's makespan.
double last_op_end_s(const Plan& p);

/// The schedule, one row per pipeline device, `scale_s` seconds across the plot; ops
/// filled by stage, F solid, B lighter, I dashed, W lightest; the id is the SVG's.
std::string timeline_svg(const Plan& p, double scale_s, const std::string& id, Frame frame);
/// Which fill is which stage and op kind.
std::string stage_legend(const Plan& p);

/// The layers in execution order as cells coloured by device, stage cuts marked, skips as
/// arcs (green on one device, red dashed across devices).
std::string partition_svg(const Plan& p, Frame frame);
std::string partition_note();

/// The largest of the plan's device capacity and its peaks: a memory figure's full scale.
std::int64_t memory_scale(const Plan& p);
/// Each device's peak memory split into weights, gradients, optimizer, activations and skip
/// cache, against the usable capacity (grey), `full_bytes` across the plot.
std::string memory_svg(const Plan& p, std::int64_t full_bytes, Frame frame);
std::string memory_legend();

/// Link class name -> fill, for every class of the plans given, the same in each figure.
using LinkColors = std::map<std::string, std::string>;
LinkColors link_colors(const std::vector<const Plan*>& plans);
/// Point-to-point bytes of one iteration by link class (`comm.p2p_bytes_per_link_class`),
/// one bar per class of `colors` (a class the plan does not use shows 0), `full_bytes`
/// across the plot.
std::string traffic_svg(const Plan& p, std::int64_t full_bytes, const LinkColors& colors,
                        Frame frame);
/// The largest class total of the plan: a traffic figure's full scale.
std::int64_t traffic_scale(const Plan& p);
/// In words: point-to-point and all-reduce bytes per iteration, and the link class of each
/// pipeline boundary.
std::string traffic_note(const Plan& p);

}  // namespace pulse::html
