// The diff as one self-contained page (inline CSS and SVG, no script, nothing fetched): the
// two plans side by side, OLD on the left and NEW on the right, each figure of the pair on
// one scale (time, memory, traffic), so that lengths compare across the halves; then every
// row of the diff and the layers that moved. The figures are the report's (html_parts.hpp).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "html_parts.hpp"
#include "pulse/base/units.hpp"
#include "pulse/tools/diff.hpp"

namespace pulse {

namespace {

using html::esc;

constexpr html::Frame kHalf{780, 70, 12};

constexpr const char* kDiffStyle = R"(
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 24px; align-items: start; }
.pair > div { min-width: 0; }
.side { font-size: 12px; margin: 0; } .side b { font-size: 14px; }
.headline { font-size: 14px; margin: 6px 0 10px 0; }
.better { background: #e3f4e6; } .worse { background: #fbe3e1; } .changed { background: #fff4d6; }
table.compare tr.section th { background: #f0f0f0; }
table.compare td.num { text-align: right; }
)";

const char* change_class(Change c) {
  switch (c) {
    case Change::better:
      return "better";
    case Change::worse:
      return "worse";
    case Change::changed:
      return "changed";
    case Change::same:
      break;
  }
  return "same";
}

std::string side_header(const std::string& role, const std::string& name, const Plan& p) {
  return fmt::format(
      "<div><p class=\"side\"><b>{}: {}</b><br>{} on {} ({}), strategy {}<br>pp {} x dp {}, {} "
      "stages, {} microbatches of {}{}<br>iteration {}, {:.1f} samples/s, bubble {:.1f}%, "
      "pipeline makespan {}</p></div>\n",
      role, esc(name), esc(p.inputs.model.name), esc(p.inputs.cluster.name),
      esc(p.parallelism.device_type.value_or("device type not stated")), esc(p.strategy()), p.pp(),
      p.parallelism.dp, p.num_stages(), p.parallelism.num_microbatches,
      p.parallelism.microbatch_size, p.split_backward() ? ", split backward" : "",
      format_seconds(p.predicted.iteration_s), p.predicted.samples_per_s,
      100 * p.predicted.bubble_ratio, format_seconds(html::last_op_end_s(p)));
}

std::string pair(const std::string& left, const std::string& right) {
  return "<div class=\"pair\">\n<div>\n" + left + "</div>\n<div>\n" + right + "</div>\n</div>\n";
}

// The direction of a percentage in words: "12.3% slower" / "4.0% faster" / "as fast".
std::string headline(const PlanDiff& d, const Plan& a, const Plan& b) {
  std::string speed;
  if (d.slowdown_pct > 0.05) {
    speed = fmt::format("{:.1f}% lower throughput", d.slowdown_pct);
  } else if (d.slowdown_pct < -0.05) {
    speed = fmt::format("{:.1f}% higher throughput", -d.slowdown_pct);
  } else {
    speed = "the same throughput";
  }
  std::string traffic;
  if (!std::isfinite(d.traffic_increase_pct)) {
    traffic = "point-to-point traffic where the old plan had none";
  } else if (std::abs(d.traffic_increase_pct) < 0.05) {
    traffic = "the same point-to-point bytes per sample";
  } else {
    traffic =
        fmt::format("{:.1f}% {} point-to-point bytes per sample", std::abs(d.traffic_increase_pct),
                    d.traffic_increase_pct > 0 ? "more" : "fewer");
  }
  std::vector<std::string> degrees;  // the changed degrees' labels, in row order
  for (const DiffRow& r : d.rows) {
    if (r.section == "degrees" && r.change != Change::same) degrees.push_back(r.label);
  }
  return fmt::format(
      "<p class=\"headline\">{}{} predicts {} than {} ({:.1f} vs {:.1f} samples/s) and {}; "
      "{}; {} of {} layers moved to another stage or device.</p>\n",
      d.mode_change.empty() ? "" : esc(d.mode_change) + ": ", esc(d.new_name), speed,
      esc(d.old_name), b.predicted.samples_per_s, a.predicted.samples_per_s, traffic,
      degrees.empty() ? std::string("the degrees are the same")
                      : esc(fmt::format("changed: {}", fmt::join(degrees, ", "))),
      d.moved_layers.size(), d.num_layers);
}

std::string stage_table(const Plan& p) {
  std::string out =
      "<table class=\"compare\"><tr><th>stage</th><th>device</th><th>layers</th>"
      "<th>count</th><th>F + B</th></tr>\n";
  for (const PlanStage& s : p.stages) {
    const std::string span = s.layers.empty()       ? std::string("-")
                             : s.layers.size() == 1 ? s.layers.front()
                                                    : s.layers.front() + " .. " + s.layers.back();
    out += fmt::format(
        "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}"
        "</td><td class=\"num\">{}</td></tr>\n",
        s.id, s.device, esc(span), s.layers.size(),
        s.has_times() ? format_seconds(*s.forward_s + *s.backward_s) : std::string("-"));
  }
  return out + "</table>\n";
}

std::string rows_table(const PlanDiff& d) {
  std::string out = fmt::format(
      "<table class=\"compare\" id=\"diff-rows\"><tr><th></th><th>{}</th><th>{}</th>"
      "<th>change</th></tr>\n",
      esc(d.old_name), esc(d.new_name));
  std::string section;
  for (const DiffRow& r : d.rows) {
    if (r.section != section) {
      section = r.section;
      out += fmt::format("<tr class=\"section\"><th colspan=\"4\">{}</th></tr>\n", esc(section));
    }
    out += fmt::format("<tr class=\"{}\"><th>{}</th><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                       change_class(r.change), esc(r.label), esc(r.old_text), esc(r.new_text),
                       esc(r.delta.empty() && r.change != Change::same ? "changed" : r.delta));
  }
  return out + "</table>\n";
}

std::string where(StageId s, DeviceId d) {
  return s < 0 ? std::string("absent") : fmt::format("stage {}, device {}", s, d);
}

std::string moved_table(const PlanDiff& d) {
  if (!d.pipelines) return "";  // one device runs the whole model in both
  if (d.moved_layers.empty()) return "<p class=\"note\">No layer moved.</p>\n";
  std::string out = fmt::format(
      "<details{}><summary>{} of {} layers moved</summary>\n<table class=\"compare\" "
      "id=\"moved-layers\"><tr><th>layer</th><th>{}</th><th>{}</th></tr>\n",
      d.moved_layers.size() <= 24 ? " open" : "", d.moved_layers.size(), d.num_layers,
      esc(d.old_name), esc(d.new_name));
  for (const LayerMove& m : d.moved_layers) {
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(m.layer),
                       where(m.old_stage, m.old_device), where(m.new_stage, m.new_device));
  }
  return out + "</table>\n</details>\n";
}

}  // namespace

std::string format_diff_html(const PlanDiff& d, const Plan& a, const Plan& b) {
  const double scale_s = std::max({1e-9, html::last_op_end_s(a), html::last_op_end_s(b)});
  const std::int64_t memory = std::max(html::memory_scale(a), html::memory_scale(b));
  const std::int64_t traffic = std::max(html::traffic_scale(a), html::traffic_scale(b));
  const html::LinkColors links = html::link_colors({&a, &b});
  const std::string model = a.inputs.model.name == b.inputs.model.name
                                ? a.inputs.model.name
                                : a.inputs.model.name + " / " + b.inputs.model.name;
  const std::string title =
      fmt::format("pulse-plan diff: {}, {} vs {}", model, d.old_name, d.new_name);
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n"
      "<style>{}{}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
      esc(title), html::style(), kDiffStyle, esc(title));
  out += headline(d, a, b);
  for (const DiffGate& g : d.gates) {
    out += fmt::format("<p class=\"{}\">{}: {}</p>\n", g.tripped ? "warnings" : "note",
                       g.tripped ? "Gate tripped" : "Gate passed", esc(g.reason));
  }
  out += pair(side_header("old", d.old_name, a), side_header("new", d.new_name, b));

  out += fmt::format(
      "<h2>Schedules on one time scale</h2>\n<p class=\"note\">Pipeline 0's ops as planned, "
      "{} across both plots; an iteration adds the exposed all-reduce to the makespan ({} "
      "and {}).</p>\n",
      format_seconds(scale_s), format_seconds(a.predicted.allreduce_exposed_s.value_or(0)),
      format_seconds(b.predicted.allreduce_exposed_s.value_or(0)));
  out += pair(html::timeline_svg(a, scale_s, "timeline-old", kHalf) + html::stage_legend(a),
              html::timeline_svg(b, scale_s, "timeline-new", kHalf) + html::stage_legend(b));

  out += "<h2>Stage maps</h2>\n";
  out += pair(html::partition_svg(a, kHalf) + stage_table(a),
              html::partition_svg(b, kHalf) + stage_table(b));
  out += html::partition_note();

  out += fmt::format("<h2>Memory per device at its peak, on one scale ({} across)</h2>\n",
                     format_bytes(memory));
  out += pair(html::memory_svg(a, memory, kHalf), html::memory_svg(b, memory, kHalf));
  out += html::memory_legend();

  out += fmt::format("<h2>Point-to-point traffic by link class, on one scale ({} across)</h2>\n",
                     format_bytes(traffic));
  out += pair(html::traffic_svg(a, traffic, links, kHalf) + html::traffic_note(a),
              html::traffic_svg(b, traffic, links, kHalf) + html::traffic_note(b));

  out +=
      "<h2>Every difference</h2>\n<p class=\"note\">Green better (less time, traffic, memory "
      "or bubble; more samples/s), red worse, yellow changed without a direction.</p>\n";
  out += rows_table(d) + moved_table(d);
  out += fmt::format(
      "<footer>{} vs {}: model {} / {}, cluster {} / {}. Times and bytes are predicted by "
      "pulse-plan's cost model.</footer>\n</body>\n</html>\n",
      esc(a.file), esc(b.file), esc(a.inputs.model.sha256), esc(b.inputs.model.sha256),
      esc(a.inputs.cluster.sha256), esc(b.inputs.cluster.sha256));
  return out;
}

}  // namespace pulse
