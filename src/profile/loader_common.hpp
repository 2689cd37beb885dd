// Pieces both profile loaders share.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pulse/base/io.hpp"
#include "pulse/base/json_check.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// Reads `provenance` (method, source, optional generator/references/assumptions).
Provenance read_provenance(JsonChecker& check, const json& root, const JsonPath& root_path);

/// Checks `$.schema` is one of `accepted` ("pulse.model/v1"; the first is the current version,
/// the others older ones still read). Returns false when the file is the other kind of
/// profile (a cluster given as --model): checking it further is noise.
bool check_schema_tag(JsonChecker& check, const json& root,
                      const std::vector<std::string>& accepted);

/// Reads a device spec object (docs/formats.md, "Device spec") at `path` for device type
/// `name`; nullopt, with the errors recorded, when it is not valid.
std::optional<DeviceSpec> read_device_spec(JsonChecker& check, const json& value,
                                           const JsonPath& path, const std::string& name);

/// Reads an optional array of strings; records errors for non-strings.
std::vector<std::string> read_string_list(JsonChecker& check, const json& obj, const JsonPath& path,
                                          std::string_view key);

}  // namespace pulse
