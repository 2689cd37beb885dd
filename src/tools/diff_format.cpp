// The text diff formats of one PlanDiff (tools/diff.hpp): the aligned table, JSON and
// Markdown for a pull-request comment. The HTML page is diff_html.cpp.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pulse/tools/diff.hpp"

namespace pulse {

namespace {

using ojson = nlohmann::ordered_json;

const char* kBold = "\033[1m";
const char* kReset = "\033[0m";

const char* color_of(Change c) {
  switch (c) {
    case Change::better:
      return "\033[32m";
    case Change::worse:
      return "\033[31m";
    case Change::changed:
      return "\033[33m";
    case Change::same:
      break;
  }
  return "";
}

std::string where(StageId s, DeviceId d) {
  return s < 0 ? std::string("(absent)") : fmt::format("stage {} (device {})", s, d);
}

const char* change_name(Change c) {
  switch (c) {
    case Change::same:
      return "same";
    case Change::changed:
      return "changed";
    case Change::better:
      return "better";
    case Change::worse:
      return "worse";
  }
  return "";
}

// A row's number as JSON: counts and bytes as integers (64 rather than 64.0), other
// numbers as they are, text rows as their text.
ojson value(const std::optional<double>& number, const std::string& text, bool integral) {
  if (!number) return ojson(text);
  if (!std::isfinite(*number)) return ojson(nullptr);
  if (integral && std::fabs(*number) < 9e15) return ojson(static_cast<std::int64_t>(*number));
  return ojson(*number);
}

// A table cell: pipes and what Markdown would read as markup (emphasis, code, a tag)
// escaped, the indentation of sub-rows kept as em spaces.
std::string cell(const std::string& text) {
  std::string out;
  std::size_t i = 0;
  for (; i < text.size() && text[i] == ' '; i += 2) out += "&emsp;";
  for (; i < text.size(); ++i) {
    if (text[i] == '|' || text[i] == '\\' || text[i] == '`' || text[i] == '*' || text[i] == '_' ||
        text[i] == '<') {
      out += '\\';
    }
    out += text[i];
  }
  return out;
}

std::string markdown_rows(const PlanDiff& d, bool changed_only) {
  std::string out = fmt::format("| | {} | {} | change |\n|---|---|---|---|\n", cell(d.old_name),
                                cell(d.new_name));
  std::string section;
  for (const DiffRow& r : d.rows) {
    if (changed_only && r.change == Change::same) continue;
    if (r.section != section) {
      section = r.section;
      out += fmt::format("| **{}** | | | |\n", cell(section));
    }
    out += fmt::format("| {} | {} | {} | {} |\n", cell(r.label), cell(r.old_text), cell(r.new_text),
                       cell(r.delta));
  }
  return out;
}

}  // namespace

// One line per gate asked for: "gate tripped: REASON" or "gate passed: REASON".
std::string gate_lines(const PlanDiff& d, const char* tripped, const char* passed) {
  std::string out;
  for (const DiffGate& g : d.gates) {
    out += fmt::format("{}{}\n", g.tripped ? tripped : passed, g.reason);
  }
  return out;
}

std::string format_diff_table(const PlanDiff& d, const DiffTableOptions& o) {
  std::size_t wl = 0, wa = d.old_name.size(), wb = d.new_name.size();
  for (const DiffRow& r : d.rows) {
    wl = std::max(wl, r.label.size() + 2);
    wa = std::max(wa, r.old_text.size());
    wb = std::max(wb, r.new_text.size());
  }
  std::string out = d.headline + "\n";
  out += gate_lines(d, "gate tripped: ", "gate passed: ") + "\n";
  out += fmt::format("{:<{}}  {:<{}}  {:<{}}  change\n", "", wl, d.old_name, wa, d.new_name, wb);
  std::string section;
  for (const DiffRow& r : d.rows) {
    if (r.section != section) {
      section = r.section;
      out += o.color ? fmt::format("{}{}{}\n", kBold, section, kReset) : section + "\n";
    }
    const std::string label = "  " + r.label;
    std::string line = fmt::format("{:<{}}  {:<{}}  ", label, wl, r.old_text, wa);
    const std::string rest = r.delta.empty() ? fmt::format("{}", r.new_text)
                                             : fmt::format("{:<{}}  {}", r.new_text, wb, r.delta);
    if (o.color && r.change != Change::same) {
      line += fmt::format("{}{}{}", color_of(r.change), rest, kReset);
    } else {
      line += rest;
    }
    out += line + "\n";
  }
  if (!d.pipelines) return out;  // one device runs the whole model in both: nothing moves
  if (d.moved_layers.empty()) return out + "moved layers: none\n";
  out += fmt::format("moved layers: {} of {}\n", d.moved_layers.size(), d.num_layers);
  std::size_t wn = 0, wo = 0;
  for (const LayerMove& m : d.moved_layers) {
    wn = std::max(wn, m.layer.size());
    wo = std::max(wo, where(m.old_stage, m.old_device).size());
  }
  for (const LayerMove& m : d.moved_layers) {
    out += fmt::format("  {:<{}}  {:<{}}  -> {}\n", m.layer, wn, where(m.old_stage, m.old_device),
                       wo, where(m.new_stage, m.new_device));
  }
  return out;
}

std::string format_diff_json(const PlanDiff& d) {
  ojson rows = ojson::array();
  for (const DiffRow& r : d.rows) {
    rows.push_back(
        {{"section", r.section},
         {"key", r.key},
         {"label", r.label},
         {"old", value(r.old_value, r.old_text, r.integral)},
         {"new", value(r.new_value, r.new_text, r.integral)},
         {"delta", r.delta},
         {"delta_value", r.delta_value ? value(r.delta_value, "", r.integral) : ojson(nullptr)},
         {"change", change_name(r.change)}});
  }
  ojson moved = ojson::array();
  for (const LayerMove& m : d.moved_layers) {
    auto opt = [](int v) { return v < 0 ? ojson(nullptr) : ojson(v); };
    moved.push_back({{"layer", m.layer},
                     {"old_stage", opt(m.old_stage)},
                     {"new_stage", opt(m.new_stage)},
                     {"old_device", opt(m.old_device)},
                     {"new_device", opt(m.new_device)}});
  }
  auto finite = [](double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); };
  ojson gates = ojson::array();
  for (const DiffGate& g : d.gates) {
    gates.push_back({{"option", g.option},
                     {"threshold_pct", g.threshold_pct},
                     {"value_pct", finite(g.value_pct)},
                     {"tripped", g.tripped},
                     {"reason", g.reason}});
  }
  ojson out = {{"schema", "pulse.plan-diff/v1"},
               {"old", d.old_name},
               {"new", d.new_name},
               {"headline", d.headline},
               {"changed_degrees", d.changed_degrees},
               {"moved_layers", moved},
               {"slowdown_pct", finite(d.slowdown_pct)},
               {"traffic_increase_pct", finite(d.traffic_increase_pct)},
               {"gates", gates},
               {"rows", rows}};
  return out.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string format_diff_markdown(const PlanDiff& d) {
  const auto changed = std::count_if(d.rows.begin(), d.rows.end(),
                                     [](const DiffRow& r) { return r.change != Change::same; });
  std::string out = fmt::format("**{}**\n\n", cell(d.headline));
  for (const DiffGate& g : d.gates) {
    out +=
        fmt::format("{}: {}\n\n", g.tripped ? "**Gate tripped**" : "Gate passed", cell(g.reason));
  }
  out += changed == 0 ? "No figure changed.\n" : markdown_rows(d, true);
  out += fmt::format("\n<details><summary>All {} rows</summary>\n\n{}\n</details>\n", d.rows.size(),
                     markdown_rows(d, false));
  if (!d.pipelines) return out;
  if (d.moved_layers.empty()) return out + "\nMoved layers: none.\n";
  out += fmt::format("\n<details><summary>Moved layers: {} of {}</summary>\n\n",
                     d.moved_layers.size(), d.num_layers);
  out += "| layer | from | to |\n|---|---|---|\n";
  for (const LayerMove& m : d.moved_layers) {
    out += fmt::format("| {} | {} | {} |\n", cell(m.layer), where(m.old_stage, m.old_device),
                       where(m.new_stage, m.new_device));
  }
  return out + "\n</details>\n";
}

}  // namespace pulse
