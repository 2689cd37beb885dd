// html: one self-contained page (inline CSS and SVG, no script, no external resource).
// The main plan comes first: its schedule as a timeline per device, its partition over the
// layer sequence with skip arcs, memory per device against capacity; then a table of the
// main plan beside the baselines, and each baseline drawn the same way on the same time
// scale, so the pictures compare at a glance.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "pulse/tools/export.hpp"
#include "pulse/base/units.hpp"

namespace pulse {

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

constexpr double kWidth = 1000;  // SVG width
constexpr double kLeft = 80;     // label column
constexpr double kRight = 16;
constexpr double kRow = 26;  // device row height in the timeline
constexpr double kGap = 6;

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// `hex` mixed with white: share 0 is the colour, 1 is white.
std::string lighter(const char* hex, double share) {
  const unsigned v = static_cast<unsigned>(std::stoul(std::string(hex + 1), nullptr, 16));
  auto mix = [&](unsigned c) { return static_cast<unsigned>(c + (255 - c) * share + 0.5); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(v >> 16 & 255), mix(v >> 8 & 255), mix(v & 255));
}

// A round step for about `ticks` axis ticks over `span`.
double tick_step(double span, int ticks) {
  const double raw = span / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
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

std::string timeline_svg(const Plan& p, double scale_s, int index) {
  const double plot = kWidth - kLeft - kRight;
  const double height = p.pp() * (kRow + kGap) + 30;
  std::string out = fmt::format(
      "<svg id=\"timeline-{}\" class=\"timeline\" width=\"{}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {} {:.0f}\" xmlns=\"http://www.w3.org/2000/svg\">\n",
      index, kWidth, height, kWidth, height);
  auto x = [&](double t) { return kLeft + plot * t / scale_s; };
  for (DeviceId d = 0; d < p.pp(); ++d) {
    const double y = d * (kRow + kGap);
    out += fmt::format(
        "<text x=\"4\" y=\"{:.1f}\" class=\"label\">device {}</text>"
        "<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" class=\"lane\"/>\n",
        y + kRow / 2 + 4, d, kLeft, y, plot, kRow);
    for (const PlanOp& o : p.schedule[d]) out += op_rect(o, x(o.start_s), x(o.end_s), y);
  }
  const double axis = p.pp() * (kRow + kGap) + 4;
  const double step = tick_step(scale_s, 8);
  for (double t = 0; t <= scale_s * (1 + 1e-9); t += step) {
    out += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" class=\"tick\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" class=\"axis\">{4}</text>\n",
        x(t), axis - 4, axis + 2, axis + 14, format_seconds(t));
  }
  return out + "</svg>\n";
}

std::string legend(const Plan& p) {
  std::string out = "<div class=\"legend\">";
  for (StageId s = 0; s < p.num_stages(); ++s) {
    const char* c = kStageColor[s % 12];
    out += fmt::format(
        "<span><i style=\"background:{}\"></i><i style=\"background:{};border:1px solid {}\"></i>"
        "stage {} (device {})</span>",
        c, lighter(c, 0.5), c, s, p.stages[s].device);
  }
  const char* split = p.schedule_info.split_backward
                          ? "solid: forward F; light, dashed border: input gradient I; "
                            "lightest: weight gradient W"
                          : "solid: forward F; light: backward B";
  return out + fmt::format("</div><p class=\"note\">{}; numbers are microbatches.</p>\n", split);
}

std::string partition_svg(const Plan& p) {
  const auto layers = p.layer_stages();
  const double plot = kWidth - kLeft - kRight;
  const double cell = plot / std::max<std::size_t>(1, layers.size());
  const double top = 120, h = 22;
  std::string out = fmt::format(
      "<svg class=\"partition\" width=\"{0}\" height=\"250\" viewBox=\"0 0 {0} 250\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n",
      kWidth);
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& [name, s] = layers[i];
    at[name] = i;
    const double x = kLeft + i * cell;
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
    const double x1 = kLeft + (at[k.producer] + 0.5) * cell;
    const double x2 = kLeft + (at[k.consumer] + 0.5) * cell;
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

std::string memory_svg(const Plan& p) {
  const auto& peaks = p.predicted.peak_memory_bytes;
  std::int64_t capacity = 0, most = 1;
  const std::vector<PlanDevicePrediction> devices =
      p.predicted.devices.value_or(std::vector<PlanDevicePrediction>{});
  for (const auto& d : devices) capacity = std::max(capacity, d.capacity_bytes.value_or(0));
  for (std::int64_t b : peaks) most = std::max(most, b);
  const double full = static_cast<double>(std::max(capacity, most));
  const double plot = kWidth - kLeft - 230;
  const double height = peaks.size() * (kRow + kGap) + 4;
  std::string out = fmt::format(
      "<svg class=\"memory\" width=\"{0}\" height=\"{1:.0f}\" viewBox=\"0 0 {0} {1:.0f}\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n",
      kWidth, height);
  for (std::size_t d = 0; d < peaks.size(); ++d) {
    const double y = d * (kRow + kGap);
    out += fmt::format(
        "<text x=\"4\" y=\"{:.1f}\" class=\"label\">device {}</text><rect x=\"{}\" y=\"{:.1f}\" "
        "width=\"{:.1f}\" height=\"{}\" class=\"capacity\"/>\n",
        y + kRow / 2 + 4, d, kLeft, y, plot, kRow);
    std::vector<std::int64_t> parts = {peaks[d]};
    if (d < devices.size() && devices[d].memory && devices[d].memory->total() > 0) {
      const MemoryBreakdown& m = *devices[d].memory;
      parts = {m.weights, m.gradients, m.optimizer, m.activations, m.skip_cache};
    }
    double x = kLeft;
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
                    kLeft + plot + 8, y + kRow / 2 + 4, format_bytes(peaks[d]),
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

std::string plan_title(const Plan& p) {
  return fmt::format("{} ({}) on {}", p.options.strategy.value_or("plan"), p.file,
                     p.inputs.cluster.name);
}

std::string plan_section(const Plan& p, double scale_s, int index) {
  std::string out =
      fmt::format("<section id=\"plan-{}\">\n<h2>{}</h2>\n", index, esc(plan_title(p)));
  out += fmt::format(
      "<p class=\"note\">pp {} x dp {}, {} stages, {} microbatches of {}; iteration {}, {:.1f} "
      "samples/s, bubble {:.1f}%</p>\n",
      p.pp(), p.parallelism.dp, p.num_stages(), p.parallelism.num_microbatches,
      p.parallelism.microbatch_size, format_seconds(p.predicted.iteration_s),
      p.predicted.samples_per_s, 100 * p.predicted.bubble_ratio);
  out += "<h3>Schedule</h3>\n" + timeline_svg(p, scale_s, index) + legend(p);
  out += "<h3>Partition and skips</h3>\n" + partition_svg(p);
  out +=
      "<p class=\"note\">Cells are layers in execution order, coloured by device; arcs are "
      "skip connections, green when the skip stays on its device, red dashed when it "
      "crosses devices.</p>\n";
  out += "<h3>Memory per device at its peak</h3>\n" + memory_svg(p) + memory_legend();
  return out + "</section>\n";
}

std::string comparison_table(const std::vector<const Plan*>& plans) {
  auto row = [&](const char* label, auto&& value) {
    std::string r = fmt::format("<tr><th>{}</th>", label);
    for (const Plan* p : plans) r += "<td>" + esc(value(*p)) + "</td>";
    return r + "</tr>\n";
  };
  auto local = [](const Plan& p) {
    return static_cast<int>(
        std::count_if(p.skips.begin(), p.skips.end(), [](const PlanSkip& s) { return s.local; }));
  };
  std::string out = "<table class=\"compare\">\n";
  out += row("plan", [](const Plan& p) { return p.file; });
  out += row("strategy", [](const Plan& p) { return p.strategy(); });
  out += row("cluster", [](const Plan& p) { return p.inputs.cluster.name; });
  out += row("pp x dp",
             [](const Plan& p) { return fmt::format("{} x {}", p.pp(), p.parallelism.dp); });
  out += row("stages", [](const Plan& p) { return std::to_string(p.num_stages()); });
  out += row("iteration", [](const Plan& p) { return format_seconds(p.predicted.iteration_s); });
  out += row("samples/s",
             [](const Plan& p) { return fmt::format("{:.1f}", p.predicted.samples_per_s); });
  out += row("bubble",
             [](const Plan& p) { return fmt::format("{:.1f}%", 100 * p.predicted.bubble_ratio); });
  out += row("P2P per iteration",
             [](const Plan& p) { return format_bytes(p.comm.p2p_bytes_per_iteration); });
  out += row("of it skips",
             [](const Plan& p) { return format_bytes(p.comm.skip_bytes_per_iteration); });
  out += row("skips local",
             [&](const Plan& p) { return fmt::format("{}/{}", local(p), p.skips.size()); });
  out += row("largest peak memory", [](const Plan& p) {
    const auto& v = p.predicted.peak_memory_bytes;
    return format_bytes(v.empty() ? 0 : *std::max_element(v.begin(), v.end()));
  });
  return out + "</table>\n";
}

constexpr const char* kStyle = R"(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px 0; } h2 { font-size: 17px; margin: 22px 0 4px 0; }
h3 { font-size: 14px; margin: 12px 0 4px 0; } .note { font-size: 12px; color: #555; margin: 4px 0; }
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
table.compare { border-collapse: collapse; font-size: 12px; margin: 6px 0; }
table.compare th, table.compare td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
footer { font-size: 11px; color: #777; margin-top: 24px; }
)";

}  // namespace

std::string export_html(const HtmlRequest& r) {
  const Plan& main = *r.plan;
  std::vector<const Plan*> all = {r.plan};
  all.insert(all.end(), r.baselines.begin(), r.baselines.end());
  double scale_s = 1e-9;
  for (const Plan* p : all) {
    for (const auto& ops : p->schedule) {
      for (const PlanOp& o : ops) scale_s = std::max(scale_s, o.end_s);
    }
  }
  const std::string title =
      fmt::format("pulse-plan: {} on {}", main.inputs.model.name, main.inputs.cluster.name);
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n"
      "<style>{}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
      esc(title), kStyle, esc(title));
  out += plan_section(main, scale_s, 0);
  if (!r.baselines.empty()) {
    out += "<h2>Beside the baselines</h2>\n" + comparison_table(all);
    for (std::size_t i = 0; i < r.baselines.size(); ++i) {
      out += plan_section(*r.baselines[i], scale_s, static_cast<int>(i) + 1);
    }
  }
  out += fmt::format(
      "<footer>{}; model {} (sha256 {}), cluster {} (sha256 {}). Times are predicted by "
      "pulse-plan's cost model.</footer>\n</body>\n</html>\n",
      esc(main.generator.name + " " + main.generator.version), esc(main.inputs.model.file),
      esc(main.inputs.model.sha256), esc(main.inputs.cluster.file), esc(main.inputs.cluster.sha256));
  return out;
}

}  // namespace pulse
