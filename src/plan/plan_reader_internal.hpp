// The plan reader's parser, split over plan_reader.cpp (the framework, header, degrees,
// stages, devices, skips) and plan_reader_sections.cpp (transfers, schedule, predictions,
// rank map). Private to the library.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "pulse/base/json_check.hpp"
#include "pulse/plan/plan_reader.hpp"

namespace pulse::detail {

// Reads one plan document into a Plan, recording every problem in the checker. Sections
// are read in dependency order: the degrees first, since they bound every index after.
class PlanParser {
 public:
  PlanParser(JsonChecker& check, Plan& plan) : c_(check), p_(plan) {}
  void run(const json& root);

 private:
  int integer(const json& obj, const JsonPath& path, std::string_view key, int minimum,
              bool required = true) {
    const auto v = c_.integer(obj, path, key, minimum, required);
    if (v && *v > std::numeric_limits<int>::max()) {
      c_.fail(path.key(key),
              fmt::format("expected at most {}, got {}", std::numeric_limits<int>::max(), *v));
      return minimum;
    }
    return static_cast<int>(v.value_or(minimum));
  }
  std::int64_t bytes(const json& obj, const JsonPath& path, std::string_view key,
                     bool required = true) {
    return c_.integer(obj, path, key, 0, required).value_or(0);
  }
  double seconds(const json& obj, const JsonPath& path, std::string_view key,
                 bool required = true) {
    return c_.number(obj, path, key, 0.0, false, required).value_or(0.0);
  }
  std::string text(const json& obj, const JsonPath& path, std::string_view key,
                   bool required = true) {
    return c_.string(obj, path, key, required).value_or("");
  }
  bool flag(const json& obj, const JsonPath& path, std::string_view key, bool required = true) {
    return c_.boolean(obj, path, key, required).value_or(false);
  }
  // An index `key` that must lie in [0, limit): `what` names it in the message.
  int index(const json& obj, const JsonPath& path, std::string_view key, int limit,
            const char* what, bool required = true);
  // The object `key` of `obj` (nullptr when absent or not an object, recorded).
  const json* section(const json& obj, const JsonPath& path, std::string_view key,
                      bool required = true);
  // Array `key` of `obj`, each element checked to be an object.
  std::vector<std::pair<const json*, JsonPath>> objects(const json& obj, const JsonPath& path,
                                                        std::string_view key, bool required = true);
  std::vector<std::string> strings(const json& obj, const JsonPath& path, std::string_view key,
                                   bool required = true);
  std::vector<std::int64_t> integers(const json& obj, const JsonPath& path, std::string_view key,
                                     bool required = true);

  void header(const json& root);
  PlanInput input(const json& inputs, const JsonPath& path, std::string_view key);
  void options(const json& root);
  void parallelism(const json& root);
  void partition(const json& root);
  void stages(const json& root);
  void devices(const json& root);
  void skips(const json& root);
  void carried(const json& root);
  void transfers(const json& root);
  void schedule(const json& root);
  void cost_model(const json& root);
  void schedule_ops(const json& ops, const JsonPath& path, std::vector<PlanOp>& out);
  void comm(const json& root);
  void predicted(const json& root);
  void rank_map(const json& root);

  JsonChecker& c_;
  Plan& p_;
};

}  // namespace pulse::detail
