// The shared pieces of the HTML pages (html_parts.hpp says what each draws).
#include "html_parts.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "pulse/base/text.hpp"
#include "pulse/base/units.hpp"

namespace pulse::html {

namespace {

// Op fills by stage (cycled beyond twelve): saturated, so microbatch numbers read in white.
constexpr const char* kStageColor[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                       "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                       "#bcbd22", "#17becf", "#393b79", "#637939"};
// Layer cells by device.
constexpr const char* kDeviceColor[] = {"#a6cee3", "#b2df8a", "#fb9a99", "#fdbf6f",
                                        "#cab2d6", "#ffff99", "#8dd3c7", "#d9d9d9"};
// Memory segments: weights, gradients, optimizer, activations, skip cache.
constexpr const char* kMemoryColor[] = {"#4e79a7", "#76b7b2", "#59a14f", "#f28e2b", "#e15759"};
constexpr const char* kMemoryName[] = {"weights", "gradients", "optimizer", "activations",
                                       "skip cache"};
// Link classes, in name order (cycled beyond eight).
constexpr const char* kLinkColor[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a",
                                      "#66a61e", "#e6ab02", "#a6761d", "#666666"};

constexpr double kRow = 26;  // row height of the timeline, memory and traffic figures
constexpr double kGap = 6;
constexpr double kValueColumn = 230;  // memory and traffic: the figures' text on the right

// `hex` mixed with white: share 0 is the colour, 1 is white.
std::string lighter(const char* hex, double share) {
  const unsigned v = static_cast<unsigned>(std::stoul(std::string(hex + 1), nullptr, 16));
  auto mix = [&](unsigned c) { return static_cast<unsigned>(c + (255 - c) * share + 0.5); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(v >> 16 & 255), mix(v >> 8 & 255), mix(v & 255));
}

// At most this many axis ticks, whatever the times.
constexpr int kMaxTicks = 100;

// A round step for about `ticks` axis ticks over `span`; 0 when there is no finite span.
double tick_step(double span, int ticks) {
  const double raw = span / ticks;
  if (!(raw > 0) || !std::isfinite(raw)) return 0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

std::string svg_open(const char* cls, const std::string& id, double width, double height) {
  return fmt::format(
      "<svg{} class=\"{}\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n",
      id.empty() ? "" : fmt::format(" id=\"{}\"", id), cls, width, height, width, height);
}

std::string op_rect(const PlanOp& o, double x0, double x1, double y) {
  const char* base = kStageColor[o.op.stage % 12];
  std::string fill = base, stroke = "none", text = "#ffffff";
  if (o.op.kind != OpKind::forward) {
    fill = lighter(base, o.op.kind == OpKind::backward_weight ? 0.75 : 0.5);
    stroke = base;
    text = "#222222";
  }
  const double w = std::max(0.5, x1 - x0);
  std::string out = fmt::format(
      "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" stroke=\"{}\""
      "{}><title>{} stage {} microbatch {}: {} to {}</title></rect>",
      x0, y, w, kRow, fill, stroke,
      o.op.kind == OpKind::backward_input ? " stroke-dasharray=\"3 2\"" : "", op_letter(o.op.kind),
      o.op.stage, o.op.mb, format_seconds(o.start_s), format_seconds(o.end_s));
  if (w >= 12) {
    out += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" fill=\"{}\" class=\"mb\">{}</text>",
                       x0 + w / 2, y + kRow / 2 + 3.5, text, o.op.mb);
  }
  return out + "\n";
}

// A frozen encoder's forward in an idle gap (plan.frozen.ops[], slot "bubble"): a grey,
// dash-bordered bar of half the row's height, so the schedule's ops stay the eye's first read.
std::string frozen_rect(const FrozenOp& o, double x0, double x1, double y) {
  return fmt::format(
      "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" class=\"frozen\">"
      "<title>frozen {}: samples {} to {} of the next iteration, {} to {}</title></rect>\n",
      x0, y + kRow / 4, std::max(0.5, x1 - x0), kRow / 2, esc(o.component), o.first_sample,
      o.first_sample + o.samples - 1, format_seconds(o.start_s), format_seconds(o.end_s));
}

// A row label and the grey lane behind a bar of `plot` pixels.
std::string row_label(const std::string& label, double y, Frame f, double plot,
                      const char* lane_class) {
  return fmt::format(
      "<text x=\"4\" y=\"{:.1f}\" class=\"label\">{}</text>"
      "<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" class=\"{}\"/>\n",
      y + kRow / 2 + 4, esc(label), f.left, y, plot, kRow, lane_class);
}

}  // namespace

// Names come from profiles and plans: their control bytes are spelled out (a NUL or an ESC
// has no place in a page) before the characters HTML gives a meaning become entities.
std::string esc(const std::string& s) {
  return html_text(s);
}

const char* style() {
  return R"(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px 0; } h2 { font-size: 17px; margin: 22px 0 4px 0; }
h3 { font-size: 14px; margin: 12px 0 4px 0; } .note { font-size: 12px; color: #555; margin: 4px 0; }
.verdict { font-size: 13px; margin: 4px 0; } .warnings { font-size: 12px; color: #a50026; margin: 4px 0; }
svg { max-width: 100%; height: auto; }
svg text { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; }
.label { font-size: 11px; fill: #333; } .axis { font-size: 10px; fill: #555; text-anchor: middle; }
.mb { font-size: 9px; text-anchor: middle; } .lane { fill: #f4f4f4; } .tick { stroke: #999; }
.layer { font-size: 8px; fill: #333; } .stage { font-size: 10px; fill: #000; }
.cut { stroke: #000; stroke-width: 2; } .cell { stroke: #fff; stroke-width: 0.5; }
.skip { fill: none; stroke-width: 1.5; } .local { stroke: #1a9850; }
.remote { stroke: #d73027; stroke-dasharray: 4 3; } .capacity { fill: #eeeeee; stroke: #999; }
.legend { font-size: 11px; display: flex; flex-wrap: wrap; gap: 4px 14px; margin: 4px 0; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 3px; vertical-align: -2px; }
.legend i.cap { background: #eeeeee; border: 1px solid #999; }
.frozen { fill: #bdbdbd; stroke: #444; stroke-width: 0.8; stroke-dasharray: 2 1.5; }
.legend i.frozen { background: #bdbdbd; border: 1px dashed #444; }
table.compare { border-collapse: collapse; font-size: 12px; margin: 6px 0; }
table.compare th, table.compare td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
footer { font-size: 11px; color: #777; margin-top: 24px; }
)";
}

double last_op_end_s(const Plan& p) {
  double end = 0;
  for (const auto& ops : p.schedule) {
    for (const PlanOp& o : ops) end = std::max(end, o.end_s);
  }
  return end;
}

std::string timeline_svg(const Plan& p, double scale_s, const std::string& id, Frame f) {
  const double plot = f.plot();
  const double height = p.pp() * (kRow + kGap) + 30;
  std::string out = svg_open("timeline", id, f.width, height);
  auto x = [&](double t) { return f.left + plot * t / scale_s; };
  for (DeviceId d = 0; d < static_cast<int>(p.schedule.size()); ++d) {
    const double y = d * (kRow + kGap);
    out += row_label(fmt::format("device {}", d), y, f, plot, "lane");
    for (const PlanOp& o : p.schedule[d]) out += op_rect(o, x(o.start_s), x(o.end_s), y);
    if (!p.frozen) continue;
    for (const FrozenOp& o : p.frozen->ops) {
      if (o.device == d && o.in_bubble()) out += frozen_rect(o, x(o.start_s), x(o.end_s), y);
    }
  }
  const double axis = p.pp() * (kRow + kGap) + 4;
  // The ticks are counted, not stepped through: a step that adds nothing to a huge time
  // (or an infinite one) cannot keep the loop going.
  const double step = tick_step(scale_s, static_cast<int>(std::max(2.0, plot / 110)));
  const double fit = step > 0 ? std::floor(scale_s * (1 + 1e-9) / step) : 0;
  const int ticks = std::isfinite(fit) ? static_cast<int>(std::min<double>(fit, kMaxTicks)) : 0;
  for (int i = 0; i <= ticks; ++i) {
    const double t = i * step;
    out += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" class=\"tick\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" class=\"axis\">{4}</text>\n",
        x(t), axis - 4, axis + 2, axis + 14, format_seconds(t));
  }
  return out + "</svg>\n";
}

std::string stage_legend(const Plan& p) {
  std::string out = "<div class=\"legend\">";
  for (StageId s = 0; s < p.num_stages(); ++s) {
    const char* c = kStageColor[s % 12];
    out += fmt::format(
        "<span><i style=\"background:{}\"></i><i style=\"background:{};border:1px solid {}\"></i>"
        "stage {} (device {})</span>",
        c, lighter(c, 0.5), c, s, p.stages[s].device);
  }
  const bool frozen = p.frozen && std::any_of(p.frozen->ops.begin(), p.frozen->ops.end(),
                                              [](const FrozenOp& o) { return o.in_bubble(); });
  if (frozen) {
    out += fmt::format(
        "<span><i class=\"frozen\"></i>frozen encoders in the bubbles (the next iteration's "
        "samples; {} more before the step)</span>",
        format_seconds(p.frozen->before_step_s));
  }
  const char* split = p.split_backward()
                          ? "solid: forward F; light, dashed border: input gradient I; "
                            "lightest: weight gradient W"
                          : "solid: forward F; light: backward B";
  return out + fmt::format("</div><p class=\"note\">{}; numbers are microbatches.</p>\n", split);
}

std::string partition_svg(const Plan& p, Frame f) {
  const auto layers = p.layer_stages();
  const double cell = f.plot() / std::max<std::size_t>(1, layers.size());
  const double top = 120, h = 22;
  std::string out = svg_open("partition", "", f.width, 250);
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& [name, s] = layers[i];
    at[name] = i;
    const double x = f.left + i * cell;
    out += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" class=\"cell\">"
        "<title>{} (stage {}, device {})</title></rect>"
        "<text transform=\"translate({:.2f},{}) rotate(60)\" class=\"layer\">{}</text>\n",
        x, top, cell, h, kDeviceColor[p.stages[s].device % 8], esc(name), s, p.stages[s].device,
        x + cell / 2, top + h + 4, esc(name));
    if (i == 0 || layers[i - 1].second != s) {
      out += fmt::format(
          "<line x1=\"{0:.2f}\" x2=\"{0:.2f}\" y1=\"{1}\" y2=\"{2}\" class=\"cut\"/>"
          "<text x=\"{3:.2f}\" y=\"{4}\" class=\"stage\">s{5}</text>\n",
          x, top - 6, top + h + 6, x + 2, top - 8, s);
    }
  }
  out += fmt::format("<text x=\"4\" y=\"{}\" class=\"label\">layers</text>\n", top + 15);
  for (const PlanSkip& k : p.skips) {
    if (!at.count(k.producer) || !at.count(k.consumer)) continue;
    const double x1 = f.left + (at[k.producer] + 0.5) * cell;
    const double x2 = f.left + (at[k.consumer] + 0.5) * cell;
    const double rise = std::min(110.0, 12 + (x2 - x1) / 4);
    out += fmt::format(
        "<path d=\"M {:.2f} {} C {:.2f} {:.1f} {:.2f} {:.1f} {:.2f} {}\" class=\"{}\">"
        "<title>{}: {} (stage {}) to {} (stage {}), {}</title></path>\n",
        x1, top, x1, top - rise, x2, top - rise, x2, top, k.local ? "skip local" : "skip remote",
        esc(k.label()), esc(k.producer), k.producer_stage, esc(k.consumer), k.consumer_stage,
        k.local ? "local" : "crosses devices");
  }
  return out + "</svg>\n";
}

std::string partition_note() {
  return "<p class=\"note\">Cells are layers in execution order, coloured by device; arcs are "
         "skip connections, green when the skip stays on its device, red dashed when it "
         "crosses devices.</p>\n";
}

std::int64_t memory_scale(const Plan& p) {
  std::int64_t most = 1;
  for (const auto& d : p.predicted.devices.value_or(std::vector<PlanDevicePrediction>{})) {
    most = std::max(most, d.capacity_bytes.value_or(0));
  }
  for (std::int64_t b : p.predicted.peak_memory_bytes) most = std::max(most, b);
  return most;
}

std::string memory_svg(const Plan& p, std::int64_t full_bytes, Frame f) {
  const auto& peaks = p.predicted.peak_memory_bytes;
  const std::vector<PlanDevicePrediction> devices =
      p.predicted.devices.value_or(std::vector<PlanDevicePrediction>{});
  std::int64_t capacity = 0;
  for (const auto& d : devices) capacity = std::max(capacity, d.capacity_bytes.value_or(0));
  const double full = static_cast<double>(std::max<std::int64_t>(1, full_bytes));
  const double plot = f.width - f.left - kValueColumn;
  std::string out = svg_open("memory", "", f.width, peaks.size() * (kRow + kGap) + 4);
  for (std::size_t d = 0; d < peaks.size(); ++d) {
    const double y = d * (kRow + kGap);
    out += row_label(fmt::format("device {}", d), y, f, plot * capacity / full, "capacity");
    std::vector<std::int64_t> parts = {peaks[d]};
    if (d < devices.size() && devices[d].memory && devices[d].memory->total() > 0) {
      const MemoryBreakdown& m = *devices[d].memory;
      parts = {m.weights, m.gradients, m.optimizer, m.activations, m.skip_cache};
    }
    double x = f.left;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const double w = plot * static_cast<double>(parts[k]) / full;
      out += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\">"
          "<title>{}: {}</title></rect>",
          x, y, w, kRow, kMemoryColor[k], parts.size() > 1 ? kMemoryName[k] : "peak",
          format_bytes(parts[k]));
      x += w;
    }
    out +=
        fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"label\">{} of {} ({:.0f}%)</text>\n",
                    f.left + plot + 8, y + kRow / 2 + 4, format_bytes(peaks[d]),
                    capacity > 0 ? format_bytes(capacity) : std::string("?"),
                    capacity > 0 ? 100.0 * static_cast<double>(peaks[d]) / capacity : 0.0);
  }
  return out + "</svg>\n";
}

std::string memory_legend() {
  std::string out = "<div class=\"legend\">";
  for (int k = 0; k < 5; ++k) {
    out += fmt::format("<span><i style=\"background:{}\"></i>{}</span>", kMemoryColor[k],
                       kMemoryName[k]);
  }
  return out + "<span><i class=\"cap\"></i>usable capacity</span></div>\n";
}

LinkColors link_colors(const std::vector<const Plan*>& plans) {
  std::set<std::string> names;
  for (const Plan* p : plans) {
    for (const auto& [name, bytes] :
         p->comm.p2p_bytes_per_link_class.value_or(std::map<std::string, std::int64_t>{})) {
      names.insert(name);
    }
  }
  LinkColors out;
  for (const std::string& name : names) out[name] = kLinkColor[out.size() % 8];
  return out;
}

std::int64_t traffic_scale(const Plan& p) {
  std::int64_t most = 1;
  for (const auto& [name, bytes] :
       p.comm.p2p_bytes_per_link_class.value_or(std::map<std::string, std::int64_t>{})) {
    most = std::max(most, bytes);
  }
  return most;
}

std::string traffic_svg(const Plan& p, std::int64_t full_bytes, const LinkColors& colors, Frame f) {
  const auto classes =
      p.comm.p2p_bytes_per_link_class.value_or(std::map<std::string, std::int64_t>{});
  std::int64_t total = 0;
  for (const auto& [name, bytes] : classes) total += bytes;
  const double full = static_cast<double>(std::max<std::int64_t>(1, full_bytes));
  const double plot = f.width - f.left - kValueColumn;
  const std::size_t rows = std::max<std::size_t>(1, colors.size());
  std::string out = svg_open("traffic", "", f.width, rows * (kRow + kGap) + 4);
  if (colors.empty()) {
    return out + fmt::format(
                     "<text x=\"4\" y=\"{}\" class=\"label\">no point-to-point traffic "
                     "by link class in this plan</text></svg>\n",
                     kRow / 2 + 4);
  }
  double y = 0;
  for (const auto& [name, fill] : colors) {
    const auto it = classes.find(name);
    const std::int64_t bytes = it == classes.end() ? 0 : it->second;
    out += row_label(name, y, f, plot, "lane");
    out += fmt::format(
        "<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" class=\"link\">"
        "<title>{}: {} per iteration</title></rect>",
        f.left, y, plot * static_cast<double>(bytes) / full, kRow, fill, esc(name),
        format_bytes(bytes));
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"label\">{} ({:.0f}%)</text>\n",
                       f.left + plot + 8, y + kRow / 2 + 4, format_bytes(bytes),
                       total > 0 ? 100.0 * static_cast<double>(bytes) / total : 0.0);
    y += kRow + kGap;
  }
  return out + "</svg>\n";
}

std::string traffic_note(const Plan& p) {
  std::string boundaries;
  if (p.rank_map.placement) {
    const auto& links = p.rank_map.placement->boundary_links;
    for (std::size_t i = 0; i < links.size(); ++i) {
      boundaries += fmt::format("{}{} {}-{}", i == 0 ? "" : ", ", esc(links[i]), i, i + 1);
    }
  }
  return fmt::format(
      "<p class=\"note\">Per iteration, all replicas together: point-to-point {} (of it skips {}), "
      "all-reduce {}. Link of each pipeline boundary (device to device): {}.</p>\n",
      format_bytes(p.comm.p2p_bytes_per_iteration), format_bytes(p.comm.skip_bytes_per_iteration),
      format_bytes(p.comm.allreduce_bytes_per_iteration.value_or(0)),
      boundaries.empty() ? std::string("none") : boundaries);
}

}  // namespace pulse::html
