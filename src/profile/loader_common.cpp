#include "loader_common.hpp"

#include <fmt/format.h>

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

bool check_schema_tag(JsonChecker& check, const json& root, const std::string& expected) {
  struct Kind {
    const char* prefix;
    const char* name;
    const char* option;
  };
  static const Kind kinds[] = {{"pulse.model/", "model", "--model"},
                               {"pulse.cluster/", "cluster", "--cluster"}};
  const json* tag = check.member(root, JsonPath{}, "schema", true);
  if (!tag) return true;
  if (tag->is_string() && *tag == expected) return true;
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
             fmt::format("expected \"{}\" (the version this pulse-plan reads), got {}", expected,
                         describe(*tag)));
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

}  // namespace pulse
