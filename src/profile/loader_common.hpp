// Pieces both profile loaders share.
#pragma once

#include <string>

#include "pulse/base/io.hpp"
#include "pulse/base/json_check.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// Reads `provenance` (method, source, optional generator/references/assumptions).
Provenance read_provenance(JsonChecker& check, const json& root, const JsonPath& root_path);

/// Checks `$.schema` equals `expected` ("pulse.model/v1"). Returns false when the file is
/// the other kind of profile (a cluster given as --model): checking it further is noise.
bool check_schema_tag(JsonChecker& check, const json& root, const std::string& expected);

/// Reads an optional array of strings; records errors for non-strings.
std::vector<std::string> read_string_list(JsonChecker& check, const json& obj, const JsonPath& path,
                                          std::string_view key);

}  // namespace pulse
