#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "loader_common.hpp"
#include "pulse/base/json_check.hpp"
#include "pulse/base/limits.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

namespace {

constexpr const char* kModelSchema = "pulse.model/v1";

// `timing.device_specs`: {device type: spec} for listed device types (docs/formats.md).
void read_device_specs(JsonChecker& check, const json& timing, const JsonPath& path,
                       ModelProfile& m) {
  const json* specs = check.member(timing, path, "device_specs", false);
  if (!specs) return;
  const JsonPath sp = path.key("device_specs");
  if (!specs->is_object()) {
    check.fail(sp, fmt::format("expected an object of device type -> device spec, got {}",
                               describe(*specs)));
    return;
  }
  for (const auto& [type, value] : specs->items()) {
    if (std::find(m.device_types.begin(), m.device_types.end(), type) == m.device_types.end()) {
      check.fail(sp.key(type),
                 "device type not listed in $.timing.device_types: a spec says "
                 "what the device of a type's times is");
      continue;
    }
    if (auto spec = read_device_spec(check, value, sp.key(type), type)) {
      m.device_specs.push_back(std::move(*spec));
    }
  }
}

void read_timing(JsonChecker& check, const json& root, ModelProfile& m) {
  const JsonPath path = JsonPath{}.key("timing");
  const json* timing = check.member(root, JsonPath{}, "timing", true);
  if (!timing ||
      !check.object(*timing, path, {"microbatch_sizes", "device_types", "device_specs"})) {
    return;
  }
  if (const json* sizes = check.array(*timing, path, "microbatch_sizes", true)) {
    const JsonPath sp = path.key("microbatch_sizes");
    if (sizes->empty()) check.fail(sp, "expected at least one microbatch size");
    bool valid = true;
    for (std::size_t i = 0; i < sizes->size(); ++i) {
      const json& s = (*sizes)[i];
      const bool integral = s.is_number() && std::floor(s.get<double>()) == s.get<double>();
      if (!integral || s.get<double>() < 1 || s.get<double>() > kMaxMicrobatchSize) {
        check.fail(sp.at(i), fmt::format("expected an integer from 1 to {}, got {}",
                                         kMaxMicrobatchSize, describe(s)));
        valid = false;
        continue;
      }
      const int size = static_cast<int>(s.get<double>());
      if (!m.microbatch_sizes.empty() && size <= m.microbatch_sizes.back()) {
        check.fail(sp.at(i), fmt::format("microbatch sizes must be strictly increasing, got {} "
                                         "after {}",
                                         size, m.microbatch_sizes.back()));
        valid = false;
      }
      m.microbatch_sizes.push_back(size);
    }
    // With a broken size list, per-layer time arrays cannot be checked against it; the
    // error above is the one to fix.
    if (!valid) m.microbatch_sizes.clear();
  }
  if (check.member(*timing, path, "device_types", true)) {
    m.device_types = read_string_list(check, *timing, path, "device_types");
  }
  if (timing->contains("device_types") && m.device_types.empty()) {
    check.fail(path.key("device_types"), "expected at least one device type");
  }
  std::unordered_map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < m.device_types.size(); ++i) {
    if (!first.emplace(m.device_types[i], i).second) {
      check.fail(path.key("device_types").at(i),
                 fmt::format("duplicate device type \"{}\"", m.device_types[i]));
    }
  }
  read_device_specs(check, *timing, path, m);
}

// Device type name -> index into ModelProfile::device_types, built once: every layer looks
// up each of its keys (a profile may list hundreds of device types).
using TypeIndex = std::unordered_map<std::string, int>;

TypeIndex index_types(const ModelProfile& m) {
  TypeIndex index;
  for (std::size_t i = 0; i < m.device_types.size(); ++i) {
    index.emplace(m.device_types[i], static_cast<int>(i));
  }
  return index;
}

// forward_s / backward_s: {device type: [seconds per microbatch, one per size]}.
std::vector<std::vector<double>> read_times(JsonChecker& check, const json& layer,
                                            const JsonPath& path, std::string_view key,
                                            const ModelProfile& m, const TypeIndex& types) {
  std::vector<std::vector<double>> times(m.device_types.size());
  const json* obj = check.member(layer, path, key, true);
  // Without a valid $.timing every entry would be reported again; that error suffices.
  if (!obj || m.device_types.empty() || m.microbatch_sizes.empty()) return times;
  const JsonPath tp = path.key(key);
  if (!obj->is_object()) {
    check.fail(tp,
               fmt::format("expected an object of device type -> times, got {}", describe(*obj)));
    return times;
  }
  std::unordered_set<std::string> suggested;  // device types a misspelt key was taken for
  for (const auto& [type, values] : obj->items()) {
    const auto known = types.find(type);
    if (known == types.end()) {
      const std::string guess = check.full() ? "" : closest_match(type, m.device_types);
      if (!guess.empty()) suggested.insert(guess);
      check.fail(tp.key(type), guess.empty()
                                   ? std::string("device type not listed in $.timing.device_types")
                                   : fmt::format("device type not listed in $.timing.device_types; "
                                                 "did you mean \"{}\"?",
                                                 guess));
      continue;
    }
    const int d = known->second;
    if (!values.is_array() || values.size() != m.microbatch_sizes.size()) {
      check.fail(tp.key(type),
                 fmt::format("expected an array of {} times, one per $.timing.microbatch_sizes "
                             "entry, got {}",
                             m.microbatch_sizes.size(), describe(values)));
      continue;
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
      // The path only for a message: a profile of many device types has a million times.
      const double t = values[i].is_number() ? values[i].get<double>() : -1;
      if (t > 0 && t <= kMaxLayerSeconds) {
        times[d].push_back(t);
      } else if (auto checked =
                     check.number(values[i], tp.key(type).at(i), 0.0, true, kMaxLayerSeconds)) {
        times[d].push_back(*checked);
      }
    }
  }
  for (const std::string& type : m.device_types) {
    // A misspelt key was reported above with a suggestion; do not report it twice.
    if (!suggested.count(type) && !obj->contains(type)) {
      check.fail(tp, fmt::format("missing times for device type \"{}\"", type));
    }
  }
  return times;
}

// `layers[].sequence`: tokens at least 1, heads and head_dim both 0 or both positive, heads
// times head_dim at most 2^20, the attention FLOPs at most the layer's forward FLOPs.
std::optional<SequenceShape> read_sequence(JsonChecker& check, const json& layer,
                                           const JsonPath& layer_path, double forward_flops) {
  const json* value = check.member(layer, layer_path, "sequence", false);
  if (!value) return std::nullopt;
  const JsonPath path = layer_path.key("sequence");
  if (!check.object(*value, path, {"tokens", "heads", "head_dim", "attention_flops_per_sample"})) {
    return std::nullopt;
  }
  constexpr std::int64_t kMaxWidth = std::int64_t{1} << 20;
  const auto tokens = check.integer(*value, path, "tokens", 1, true, kMaxBytesPerSample);
  const auto heads = check.integer(*value, path, "heads", 0, true, kMaxWidth);
  const auto head_dim = check.integer(*value, path, "head_dim", 0, true, kMaxWidth);
  const auto flops = check.number(*value, path, "attention_flops_per_sample", 0.0, false);
  if (!tokens || !heads || !head_dim || !flops) return std::nullopt;
  if ((*heads == 0) != (*head_dim == 0) || *heads * *head_dim > kMaxWidth) {
    check.fail(path, fmt::format("expected heads and head_dim both 0 (no attention) or both "
                                 "positive with heads x head_dim at most {}, got {} and {}",
                                 kMaxWidth, *heads, *head_dim));
    return std::nullopt;
  }
  if (*flops > forward_flops || (*heads == 0 && *flops > 0)) {
    check.fail(path.key("attention_flops_per_sample"),
               fmt::format("expected at most the layer's forward_flops_per_sample ({}) and 0 "
                           "without heads, got {}",
                           forward_flops, *flops));
    return std::nullopt;
  }
  return SequenceShape{*tokens, static_cast<int>(*heads), static_cast<int>(*head_dim), *flops};
}

Layer read_layer(JsonChecker& check, const json& value, const JsonPath& raw_path,
                 const ModelProfile& m, const TypeIndex& types) {
  Layer layer;
  JsonPath path = raw_path;
  // Name the layer in every message about it, unknown keys included.
  if (value.is_object() && value.contains("name") && value["name"].is_string()) {
    path = path.noted(fmt::format("layer \"{}\"", value["name"].get<std::string>()));
  }
  if (!check.object(value, path,
                    {"name", "kind", "params", "forward_s", "backward_s",
                     "backward_weight_fraction", "activation_bytes_per_sample",
                     "output_bytes_per_sample", "forward_flops_per_sample", "sequence"})) {
    return layer;
  }
  if (auto name = check.string(value, path, "name")) layer.name = *name;
  if (value.contains("kind")) layer.kind = check.string(value, path, "kind").value_or("");
  layer.params = check.integer(value, path, "params", 0, true, kMaxLayerParams).value_or(0);
  layer.forward_s = read_times(check, value, path, "forward_s", m, types);
  layer.backward_s = read_times(check, value, path, "backward_s", m, types);
  if (const json* f = check.member(value, path, "backward_weight_fraction", false)) {
    const bool in_range = f->is_number() && f->get<double>() > 0 && f->get<double>() < 1;
    if (!in_range) {
      check.fail(path.key("backward_weight_fraction"),
                 fmt::format("expected a number strictly between 0 and 1, got {}", describe(*f)));
    } else {
      layer.backward_weight_fraction = f->get<double>();
    }
  }
  layer.activation_bytes_per_sample =
      check.integer(value, path, "activation_bytes_per_sample", 0, true, kMaxBytesPerSample)
          .value_or(0);
  layer.output_bytes_per_sample =
      check.integer(value, path, "output_bytes_per_sample", 0, true, kMaxBytesPerSample)
          .value_or(0);
  layer.forward_flops_per_sample = check
                                       .number(value, path, "forward_flops_per_sample", 0.0, false,
                                               false, kMaxLayerFlopsPerSample)
                                       .value_or(0.0);
  layer.sequence = read_sequence(check, value, path, layer.forward_flops_per_sample);
  return layer;
}

// Resolves a layer name to its index; unknown names get a did-you-mean.
std::optional<LayerId> resolve_layer(JsonChecker& check, const json& obj, const JsonPath& path,
                                     std::string_view key,
                                     const std::map<std::string, LayerId>& index,
                                     const std::vector<std::string>& names) {
  const auto name = check.string(obj, path, key);
  if (!name) return std::nullopt;
  const auto it = index.find(*name);
  if (it != index.end()) return it->second;
  const std::string guess = closest_match(*name, names);
  check.fail(path.key(key),
             guess.empty()
                 ? fmt::format("unknown layer \"{}\"", *name)
                 : fmt::format("unknown layer \"{}\"; did you mean \"{}\"?", *name, guess));
  return std::nullopt;
}

// Where a skip name was first used: the skip's path, and whether the name was given there
// (else it is the default "producer->consumer").
struct NameUse {
  JsonPath at;
  bool given = false;
};

// A plan names each skip (transfers list the skips they carry by name, trainers cache them by
// name), so two skips may not share one: neither two given names nor a given name and the
// default "producer->consumer" of another (a layer's name may hold "->" itself).
bool unique_skip_name(JsonChecker& check, const JsonPath& path, bool given, const Skip& skip,
                      std::map<std::string, NameUse>& used) {
  const auto [it, fresh] = used.emplace(skip.name, NameUse{path, given});
  if (fresh) return true;
  const NameUse& first = it->second;
  const auto how = [](bool g) { return g ? "given" : "its default name, producer->consumer"; };
  check.fail(given ? path.key("name") : path,
             fmt::format("skip name \"{}\" ({}) is already the name of {} ({}); every skip needs "
                         "its own name: give one of them another \"name\"",
                         skip.name, how(given), first.at.str(), how(first.given)));
  return false;
}

void read_skips(JsonChecker& check, const json& root, const std::map<std::string, LayerId>& index,
                const std::vector<std::string>& names, ModelProfile& m) {
  const json* skips = check.array(root, JsonPath{}, "skips", true);
  if (!skips) return;
  if (skips->size() > static_cast<std::size_t>(kMaxSkips)) {
    check.fail(JsonPath{}.key("skips"), fmt::format("expected at most {} skips (pulse-plan's "
                                                    "limit), got {}",
                                                    kMaxSkips, skips->size()));
    return;
  }
  std::map<std::pair<LayerId, LayerId>, std::size_t> seen;
  std::map<std::string, NameUse> used;
  for (std::size_t i = 0; i < skips->size(); ++i) {
    const json& s = (*skips)[i];
    const JsonPath path = JsonPath{}.key("skips").at(i);
    if (!check.object(s, path, {"name", "producer", "consumer", "bytes_per_sample"})) continue;
    Skip skip;
    if (s.contains("name")) skip.name = check.string(s, path, "name").value_or("");
    const auto producer = resolve_layer(check, s, path, "producer", index, names);
    const auto consumer = resolve_layer(check, s, path, "consumer", index, names);
    skip.bytes_per_sample =
        check.integer(s, path, "bytes_per_sample", 1, true, kMaxBytesPerSample).value_or(0);
    if (!producer || !consumer) continue;
    skip.producer = *producer;
    skip.consumer = *consumer;
    if (skip.producer >= skip.consumer) {
      check.fail(path, fmt::format("producer \"{}\" (layer {}) must come before consumer \"{}\" "
                                   "(layer {}) in execution order",
                                   names[skip.producer], skip.producer, names[skip.consumer],
                                   skip.consumer));
      continue;
    }
    const auto [it, inserted] = seen.emplace(std::pair{skip.producer, skip.consumer}, i);
    if (!inserted) {
      check.fail(path, fmt::format("duplicate skip \"{}\" -> \"{}\" (first at $.skips[{}])",
                                   names[skip.producer], names[skip.consumer], it->second));
      continue;
    }
    if (skip.name.empty()) skip.name = names[skip.producer] + "->" + names[skip.consumer];
    if (!unique_skip_name(check, path, s.contains("name"), skip, used)) continue;
    m.skips.push_back(std::move(skip));
  }
}

void read_carried(JsonChecker& check, const json& root, const std::map<std::string, LayerId>& index,
                  const std::vector<std::string>& names, ModelProfile& m) {
  const json* carried = check.array(root, JsonPath{}, "carried", false);
  if (!carried) return;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < carried->size(); ++i) {
    const json& c = (*carried)[i];
    const JsonPath path = JsonPath{}.key("carried").at(i);
    if (!check.object(c, path, {"name", "producer", "bytes_per_sample", "needs_gradient"})) {
      continue;
    }
    Carried t;
    t.name = check.string(c, path, "name").value_or("");
    if (!t.name.empty() && !seen.insert(t.name).second) {
      check.fail(path.key("name"), fmt::format("duplicate carried tensor \"{}\"", t.name));
    }
    const json* producer = check.member(c, path, "producer", true);
    if (producer && !producer->is_null()) {
      t.producer = resolve_layer(check, c, path, "producer", index, names).value_or(-1);
    }
    t.bytes_per_sample =
        check.integer(c, path, "bytes_per_sample", 1, true, kMaxBytesPerSample).value_or(0);
    t.needs_gradient = check.boolean(c, path, "needs_gradient").value_or(false);
    m.carried.push_back(std::move(t));
  }
}

// `frozen[]` (docs/frozen.md): each frozen component's name (unique), kind, weights, forward
// times on every device type, working set and output per sample, and where they come from.
FrozenComponent read_frozen_component(JsonChecker& check, const json& value,
                                      const JsonPath& raw_path, const ModelProfile& m,
                                      const TypeIndex& types) {
  FrozenComponent c;
  JsonPath path = raw_path;
  if (value.is_object() && value.contains("name") && value["name"].is_string()) {
    path = path.noted(fmt::format("frozen component \"{}\"", value["name"].get<std::string>()));
  }
  if (!check.object(
          value, path,
          {"name", "kind", "params", "weight_bytes", "forward_s", "activation_bytes_per_sample",
           "output_bytes_per_sample", "forward_flops_per_sample", "source"})) {
    return c;
  }
  c.name = check.string(value, path, "name").value_or("");
  c.kind = check.string(value, path, "kind").value_or("");
  static const std::vector<std::string> kinds = {"vae_encoder", "text_encoder", "image_encoder"};
  if (!c.kind.empty() && std::find(kinds.begin(), kinds.end(), c.kind) == kinds.end()) {
    check.fail(path.key("kind"),
               fmt::format("expected \"vae_encoder\", \"text_encoder\" or \"image_encoder\", "
                           "got \"{}\"",
                           c.kind));
  }
  if (value.contains("params")) {
    c.params = check.integer(value, path, "params", 0, true, kMaxLayerParams).value_or(0);
  }
  c.weight_bytes =
      check.integer(value, path, "weight_bytes", 0, true, kMaxBytesPerSample).value_or(0);
  c.forward_s = read_times(check, value, path, "forward_s", m, types);
  c.activation_bytes_per_sample =
      check.integer(value, path, "activation_bytes_per_sample", 0, true, kMaxBytesPerSample)
          .value_or(0);
  c.output_bytes_per_sample =
      check.integer(value, path, "output_bytes_per_sample", 1, true, kMaxBytesPerSample)
          .value_or(0);
  if (value.contains("forward_flops_per_sample")) {
    c.forward_flops_per_sample = check
                                     .number(value, path, "forward_flops_per_sample", 0.0, false,
                                             false, kMaxLayerFlopsPerSample)
                                     .value_or(0.0);
  }
  c.source = check.string(value, path, "source").value_or("");
  return c;
}

void read_frozen(JsonChecker& check, const json& root, ModelProfile& m) {
  const json* frozen = check.array(root, JsonPath{}, "frozen", false);
  if (!frozen) return;
  const TypeIndex types = index_types(m);
  std::map<std::string, std::size_t> first_seen;
  for (std::size_t i = 0; i < frozen->size(); ++i) {
    const JsonPath path = JsonPath{}.key("frozen").at(i);
    FrozenComponent c = read_frozen_component(check, (*frozen)[i], path, m, types);
    if (!c.name.empty()) {
      const auto [it, inserted] = first_seen.emplace(c.name, i);
      if (!inserted) {
        check.fail(path.key("name"), fmt::format("duplicate frozen component \"{}\" (first at "
                                                 "$.frozen[{}])",
                                                 c.name, it->second));
      }
    }
    m.frozen.push_back(std::move(c));
  }
}

// False when the layer list is beyond the limit: the rest of the profile, naming its
// layers, is not read (every skip would be an unknown layer).
bool read_layers(JsonChecker& check, const json& root, ModelProfile& m) {
  const json* layers = check.array(root, JsonPath{}, "layers", true);
  if (!layers) return true;
  if (layers->size() < 2) {
    check.fail(
        JsonPath{}.key("layers"),
        fmt::format("expected at least 2 layers (a V needs two stages), got {}", layers->size()));
  }
  if (layers->size() > static_cast<std::size_t>(kMaxLayers)) {
    check.fail(
        JsonPath{}.key("layers"),
        fmt::format("expected at most {} layers (pulse-plan's limit: docs/limits.md), got {}",
                    kMaxLayers, layers->size()));
    return false;
  }
  std::map<std::string, std::size_t> first_seen;
  const TypeIndex types = index_types(m);
  for (std::size_t i = 0; i < layers->size(); ++i) {
    const JsonPath path = JsonPath{}.key("layers").at(i);
    Layer layer = read_layer(check, (*layers)[i], path, m, types);
    if (!layer.name.empty()) {
      const auto [it, inserted] = first_seen.emplace(layer.name, i);
      if (!inserted) {
        check.fail(path.key("name"), fmt::format("duplicate layer name \"{}\" (first at "
                                                 "$.layers[{}])",
                                                 layer.name, it->second));
      }
    }
    m.layers.push_back(std::move(layer));
  }
  return true;
}

}  // namespace

Result<ModelProfile> parse_model_profile(std::string_view text, const std::string& file) {
  auto root = parse_json(text, file, kProfileJsonLimits);
  if (!root) return root.error();
  JsonChecker check(file);
  ModelProfile m;
  // The tag first: a profile of the other kind (swapped --model and --cluster) gets one
  // line saying so rather than a list of unknown keys.
  if (root->is_object() && !check_schema_tag(check, *root, {kModelSchema})) return check.error();
  if (!check.object(*root, JsonPath{},
                    {"schema", "name", "description", "provenance", "dtype", "timing", "layers",
                     "skips", "carried", "frozen"})) {
    return check.error();
  }
  m.name = check.string(*root, JsonPath{}, "name").value_or("");
  if (root->contains("description")) {
    m.description = check.string(*root, JsonPath{}, "description").value_or("");
  }
  if (root->contains("dtype")) m.dtype = check.string(*root, JsonPath{}, "dtype").value_or("");
  m.provenance = read_provenance(check, *root, JsonPath{});
  read_timing(check, *root, m);
  if (!read_layers(check, *root, m)) return check.error();

  std::map<std::string, LayerId> index;
  std::vector<std::string> names;
  for (const auto& layer : m.layers) {
    index.emplace(layer.name, static_cast<LayerId>(names.size()));
    names.push_back(layer.name);
  }
  read_skips(check, *root, index, names, m);
  read_carried(check, *root, index, names, m);
  read_frozen(check, *root, m);
  if (!check.ok()) return check.error();
  m.file.name = base_name(file);
  m.file.path = file;
  m.file.sha256 = sha256_hex(text);
  return m;
}

Result<ModelProfile> load_model_profile(const std::string& path) {
  auto text = read_text_file(path, kMaxProfileFileBytes, "the profile file limit, 256 MiB");
  if (!text) return text.error();
  return parse_model_profile(*text, path);
}

}  // namespace pulse
