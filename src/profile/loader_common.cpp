#include "loader_common.hpp"

#include <algorithm>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "pulse/base/limits.hpp"

namespace pulse {

Provenance read_provenance(JsonChecker& check, const json& root, const JsonPath& root_path) {
  Provenance p;
  const json* obj = check.member(root, root_path, "provenance", true);
  const JsonPath path = root_path.key("provenance");
  if (!obj ||
      !check.object(*obj, path, {"method", "source", "generator", "references", "assumptions"})) {
    return p;
  }
  if (auto method = check.string(*obj, path, "method")) {
    if (*method != "analytic" && *method != "measured" && *method != "hand-written") {
      check.fail(path.key("method"),
                 fmt::format("expected \"analytic\", \"measured\" or \"hand-written\", got \"{}\"",
                             *method));
    }
    p.method = *method;
  }
  p.source = check.string(*obj, path, "source").value_or("");
  if (obj->contains("generator")) p.generator = check.string(*obj, path, "generator").value_or("");
  p.references = read_string_list(check, *obj, path, "references");
  p.assumptions = read_string_list(check, *obj, path, "assumptions");
  return p;
}

namespace {

std::string versions_read(const std::vector<std::string>& accepted) {
  std::string out;
  for (std::size_t i = 0; i < accepted.size(); ++i) {
    out += fmt::format("{}\"{}\"", i == 0 ? "" : " or ", accepted[i]);
  }
  return out + (accepted.size() == 1 ? " (the version this pulse-plan reads)"
                                     : " (the versions this pulse-plan reads)");
}

}  // namespace

bool check_schema_tag(JsonChecker& check, const json& root,
                      const std::vector<std::string>& accepted) {
  struct Kind {
    const char* prefix;
    const char* name;
    const char* option;
  };
  static const Kind kinds[] = {{"pulse.model/", "model", "--model"},
                               {"pulse.cluster/", "cluster", "--cluster"}};
  const std::string& expected = accepted.front();
  const json* tag = check.member(root, JsonPath{}, "schema", true);
  if (!tag) return true;
  if (tag->is_string() && std::find(accepted.begin(), accepted.end(),
                                    tag->get_ref<const std::string&>()) != accepted.end()) {
    return true;
  }
  if (tag->is_string()) {
    // The other kind of profile: most likely --model and --cluster were swapped.
    const std::string value = tag->get<std::string>();
    for (const Kind& k : kinds) {
      if (value.rfind(k.prefix, 0) == 0 && expected.rfind(k.prefix, 0) != 0) {
        check.fail(JsonPath{}.key("schema"),
                   fmt::format("this is a {} profile (\"{}\"), expected \"{}\"; pass it with {}",
                               k.name, value, expected, k.option));
        return false;
      }
    }
  }
  check.fail(JsonPath{}.key("schema"),
             fmt::format("expected {}, got {}", versions_read(accepted), describe(*tag)));
  return true;
}

std::vector<std::string> read_string_list(JsonChecker& check, const json& obj, const JsonPath& path,
                                          std::string_view key) {
  std::vector<std::string> out;
  const json* list = check.array(obj, path, key, false);
  if (!list) return out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& v = (*list)[i];
    if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
      check.fail(path.key(key).at(i),
                 fmt::format("expected a non-empty string, got {}", describe(v)));
      continue;
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

namespace {

// A device rate within pulse-plan's limits (pulse/base/limits.hpp), which keep every time a
// derivation scales by it finite.
bool in_rate_limits(JsonChecker& check, const JsonPath& path, double rate, double most,
                    const char* unit) {
  if (rate >= kMinDeviceRate && rate <= most) return true;
  check.fail(path, fmt::format("expected {:g} to {:g} {} (pulse-plan's limits), got {:g}",
                               kMinDeviceRate, most, unit, rate));
  return false;
}

// `peak_flops`: {precision: FLOP/s}, at least one, each a finite number > 0.
std::map<std::string, double> read_peaks(JsonChecker& check, const json& spec,
                                         const JsonPath& path) {
  std::map<std::string, double> out;
  const json* peaks = check.member(spec, path, "peak_flops", true);
  if (!peaks) return out;
  const JsonPath pp = path.key("peak_flops");
  if (!peaks->is_object() || peaks->empty()) {
    check.fail(pp, fmt::format("expected an object of precision -> dense FLOP/s, e.g. "
                               "{{\"fp16\": 9.894e14}}, got {}",
                               describe(*peaks)));
    return out;
  }
  for (const auto& [precision, value] : peaks->items()) {
    auto peak = check.number(value, pp.key(precision), 0.0, true);
    if (peak && in_rate_limits(check, pp.key(precision), *peak, kMaxPeakFlops, "FLOP/s")) {
      out[precision] = *peak;
    }
  }
  return out;
}

}  // namespace

std::optional<DeviceSpec> read_device_spec(JsonChecker& check, const json& value,
                                           const JsonPath& path, const std::string& name) {
  const std::size_t errors = check.error_count();
  if (!check.object(value, path,
                    {"aliases", "stack", "peak_flops", "memory_bytes_per_s", "memory_efficiency",
                     "layer_floor_s", "source"})) {
    return std::nullopt;
  }
  DeviceSpec spec;
  spec.name = name;
  spec.where = fmt::format("{} {}", base_name(check.file()), path.str());
  spec.aliases = read_string_list(check, value, path, "aliases");
  spec.stack = check.string(value, path, "stack").value_or("");
  spec.peak_flops = read_peaks(check, value, path);
  spec.memory_bytes_per_s =
      check.number(value, path, "memory_bytes_per_s", 0.0, true).value_or(0.0);
  if (spec.memory_bytes_per_s > 0) {
    in_rate_limits(check, path.key("memory_bytes_per_s"), spec.memory_bytes_per_s,
                   kMaxDeviceBytesPerSecond, "bytes per second");
  }
  spec.memory_efficiency = check.number(value, path, "memory_efficiency", 0.0, true).value_or(0.0);
  if (spec.memory_efficiency > 1) {
    check.fail(path.key("memory_efficiency"),
               fmt::format("expected the fraction of memory_bytes_per_s achieved, at most 1, "
                           "got {}",
                           describe(value["memory_efficiency"])));
  }
  spec.layer_floor_s =
      check.number(value, path, "layer_floor_s", 0.0, false, true, kMaxLayerSeconds).value_or(0.0);
  spec.source = check.string(value, path, "source").value_or("");
  if (check.error_count() != errors) return std::nullopt;
  return spec;
}

}  // namespace pulse
