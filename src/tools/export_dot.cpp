// dot: the layer graph as the plan cuts it. Stages are clusters, layers are filled with
// their device's colour, the main path is solid and skip edges are dashed (green when the
// skip stays on its device, red when it crosses devices).
#include <map>

#include <fmt/format.h>

#include "pulse/base/text.hpp"
#include "pulse/base/units.hpp"
#include "pulse/tools/export.hpp"

namespace pulse {

namespace {

// Light fills, one per pipeline device (cycled beyond eight).
constexpr const char* kDeviceFill[] = {"#a6cee3", "#b2df8a", "#fb9a99", "#fdbf6f",
                                       "#cab2d6", "#ffff99", "#8dd3c7", "#d9d9d9"};

// A dot string: the name's control bytes spelled out (a NUL would end it for Graphviz, bytes
// that are not UTF-8 make it give up), then quotes and backslashes escaped; a line break, in
// a label pulse-plan composes, is dot's own \n.
std::string quoted(const std::string& text) {
  const std::string s = printable(text, LineBreaks::keep);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string layer_label(const std::string& name, const DotOptions& o) {
  if (!o.model) return name;
  for (const Layer& l : o.model->layers) {
    if (l.name != name) continue;
    const std::string kind = l.kind.empty() ? "" : l.kind + ", ";
    return fmt::format("{}\n{}{:.1f} M params", name, kind, static_cast<double>(l.params) / 1e6);
  }
  return name;
}

std::string stage_clusters(const Plan& p, const DotOptions& o) {
  std::string out;
  for (const PlanStage& s : p.stages) {
    const char* fill = kDeviceFill[s.device % 8];
    out += fmt::format("  subgraph cluster_stage{} {{\n", s.id);
    out += fmt::format("    label={};\n    style=rounded;\n",
                       quoted(fmt::format("stage {} on device {}{}", s.id, s.device,
                                          s.side ? " (" + *s.side + ")" : "")));
    for (const std::string& l : s.layers) {
      out += fmt::format("    {} [label={}, fillcolor=\"{}\"];\n", quoted(l),
                         quoted(layer_label(l, o)), fill);
    }
    out += "  }\n";
  }
  return out;
}

}  // namespace

Status check_dot_model(const Plan& plan, const ModelProfile& model) {
  std::map<std::string, std::size_t> order;
  for (std::size_t i = 0; i < model.layers.size(); ++i) order.emplace(model.layers[i].name, i);
  std::size_t listed = 0;
  for (const PlanStage& s : plan.stages) {
    for (std::size_t k = 0; k < s.layers.size(); ++k, ++listed) {
      const auto it = order.find(s.layers[k]);
      if (it == order.end()) {
        return input_error(fmt::format(
            "{}: $.stages[{}].layers[{}]: layer \"{}\" is not a layer of model {} (--model {})",
            plan.file, s.id, k, s.layers[k], model.name, model.file.path));
      }
      if (it->second != listed) {
        const std::string& expected =
            listed < model.layers.size() ? model.layers[listed].name : s.layers[k];
        return input_error(fmt::format(
            "{}: $.stages[{}].layers[{}]: layer \"{}\" where model {} (--model {}) has \"{}\" "
            "(layer {}): the stages must list the model's layers in its execution order",
            plan.file, s.id, k, s.layers[k], model.name, model.file.path, expected, listed));
      }
    }
  }
  if (listed != model.layers.size()) {
    return input_error(
        fmt::format("{}: the plan's stages list {} layers; model {} (--model {}) "
                    "has {}",
                    plan.file, listed, model.name, model.file.path, model.layers.size()));
  }
  return Ok{};
}

std::string export_dot(const Plan& p, const DotOptions& o) {
  std::string out = fmt::format("digraph {} {{\n", quoted(p.inputs.model.name));
  out += fmt::format("  graph [label={}, labelloc=t, fontname=\"Helvetica\", rankdir=TB];\n",
                     quoted(fmt::format("{} on {}: pp {} x dp {}, {} stages; dashed: skip edges",
                                        p.inputs.model.name, p.inputs.cluster.name, p.pp(),
                                        p.parallelism.dp, p.num_stages())));
  out += "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  out += stage_clusters(p, o);
  const auto layers = p.layer_stages();
  for (std::size_t i = 1; i < layers.size(); ++i) {
    const bool crosses = p.stages[layers[i - 1].second].device != p.stages[layers[i].second].device;
    out += fmt::format("  {} -> {}{};\n", quoted(layers[i - 1].first), quoted(layers[i].first),
                       crosses ? " [penwidth=2]" : "");
  }
  for (const PlanSkip& s : p.skips) {
    const std::int64_t bytes = s.bytes_per_sample * p.parallelism.microbatch_size;
    out += fmt::format("  {} -> {} [style=dashed, constraint=false, color=\"{}\", label={}];\n",
                       quoted(s.producer), quoted(s.consumer), s.local ? "#1a9850" : "#d73027",
                       quoted(fmt::format("{}{}", format_bytes(bytes),
                                          s.local ? "" : " (" + s.route.value_or("remote") + ")")));
  }
  return out + "}\n";
}

}  // namespace pulse
