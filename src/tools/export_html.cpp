// html: one self-contained page (inline CSS and SVG, no script, no external resource).
// The main plan comes first: its schedule as a timeline per device, its partition over the
// layer sequence with skip arcs, memory per device against capacity; then a table of the
// main plan beside the baselines, and each baseline drawn the same way on the same time
// scale, so the pictures compare at a glance. The figures are html_parts.hpp's, which the
// diff page draws too.
#include <algorithm>

#include <fmt/format.h>

#include "html_parts.hpp"
#include "pulse/base/units.hpp"
#include "pulse/plan/buckets_view.hpp"
#include "pulse/plan/certificate.hpp"
#include "pulse/tools/export.hpp"

namespace pulse {

namespace {

using html::esc;

constexpr html::Frame kFrame{1000, 80, 16};

std::string plan_title(const Plan& p) {
  return fmt::format("{} ({}) on {}", p.options.strategy.value_or("plan"), p.file,
                     p.inputs.cluster.name);
}

// Text whose lines stay lines on the page (a note listing why each configuration failed):
// each line escaped, a line break between them.
std::string esc_lines(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find('\n', start);
    out += esc(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    out += "<br>\n";
    start = end + 1;
  }
}

// What the plan is and what it asks its user to look at: the verdict (pipeline_or_not's note
// where the plan has one) and its warnings.
std::string verdict_and_warnings(const Plan& p) {
  std::string out = fmt::format("<p class=\"verdict\">Verdict: {}{}</p>\n", esc(p.verdict()),
                                p.pipeline_or_not && !p.pipeline_or_not->note.empty()
                                    ? ". " + esc_lines(p.pipeline_or_not->note)
                                    : "");
  if (p.warnings.empty()) return out;
  out += "<ul class=\"warnings\">\n";
  for (const std::string& w : p.warnings) out += "<li>Warning: " + esc_lines(w) + "</li>\n";
  return out + "</ul>\n";
}

std::string plan_section(const Plan& p, double scale_s, int index) {
  std::string out =
      fmt::format("<section id=\"plan-{}\">\n<h2>{}</h2>\n", index, esc(plan_title(p)));
  out += fmt::format(
      "<p class=\"note\">{}, {} microbatches of {}; iteration {}, {:.1f} samples/s, bubble "
      "{:.1f}%; all-reduce {} per iteration, {} of it exposed</p>\n",
      esc(p.layout()), p.parallelism.num_microbatches, p.parallelism.microbatch_size,
      format_seconds(p.predicted.iteration_s), p.predicted.samples_per_s,
      100 * p.predicted.bubble_ratio,
      format_bytes(p.comm.allreduce_bytes_per_iteration.value_or(0)),
      format_seconds(p.predicted.allreduce_exposed_s.value_or(0)));
  out += verdict_and_warnings(p);
  if (p.certificate) {
    out += fmt::format("<p class=\"note\">{}</p>\n", esc(certificate_line(*p.certificate)));
  }
  if (p.frozen) {
    out += "<p class=\"note\">frozen encoders: " + esc(p.frozen->note) + "</p>\n";
  }
  if (p.buckets) {  // the schedule below is the largest bucket's (the body)
    out +=
        "<h3>Buckets</h3>\n<p class=\"note\">" + esc(buckets_headline(*p.buckets)) + "</p>\n<pre>";
    for (const std::string& line : bucket_lines(*p.buckets)) out += esc(line) + "\n";
    out += "</pre>\n";
  }
  out += "<h3>Schedule</h3>\n" +
         html::timeline_svg(p, scale_s, fmt::format("timeline-{}", index), kFrame) +
         html::stage_legend(p);
  // Without a pipeline one device runs the whole model: no cut to draw.
  if (p.pp() > 1) {
    out +=
        "<h3>Partition and skips</h3>\n" + html::partition_svg(p, kFrame) + html::partition_note();
  }
  out += "<h3>Memory per device at its peak</h3>\n" +
         html::memory_svg(p, html::memory_scale(p), kFrame) + html::memory_legend();
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
  out += row("layout", [](const Plan& p) { return p.layout(); });
  out += row("verdict", [](const Plan& p) { return p.verdict(); });
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
  out += row("all-reduce per iteration", [](const Plan& p) {
    return format_bytes(p.comm.allreduce_bytes_per_iteration.value_or(0));
  });
  out += row("skips local",
             [&](const Plan& p) { return fmt::format("{}/{}", local(p), p.skips.size()); });
  out += row("largest peak memory", [](const Plan& p) {
    const auto& v = p.predicted.peak_memory_bytes;
    return format_bytes(v.empty() ? 0 : *std::max_element(v.begin(), v.end()));
  });
  return out + "</table>\n";
}

}  // namespace

std::string export_html(const HtmlRequest& r) {
  const Plan& main = *r.plan;
  std::vector<const Plan*> all = {r.plan};
  all.insert(all.end(), r.baselines.begin(), r.baselines.end());
  double scale_s = 1e-9;
  for (const Plan* p : all) scale_s = std::max(scale_s, html::last_op_end_s(*p));
  const std::string title =
      fmt::format("pulse-plan: {} on {}", main.inputs.model.name, main.inputs.cluster.name);
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n"
      "<style>{}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
      esc(title), html::style(), esc(title));
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
      esc(main.inputs.model.sha256), esc(main.inputs.cluster.file),
      esc(main.inputs.cluster.sha256));
  return out;
}

}  // namespace pulse
