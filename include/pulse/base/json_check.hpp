// Validation helpers shared by the profile loaders (and later the plan reader). Every
// problem is recorded as "FILE: $.json.path: what was expected, got what", and checking
// goes on, so one run reports all problems of a file instead of the first.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pulse/base/json_records.hpp"
#include "pulse/base/result.hpp"

namespace pulse {

using json = nlohmann::json;

/// A position in a JSON document, JSONPath-style ($.layers[3].params), with an optional
/// human note (the layer's name) printed after it.
struct JsonPath {
  std::string text = "$";
  std::string note;

  JsonPath key(std::string_view k) const;
  JsonPath at(std::size_t index) const;
  JsonPath noted(std::string n) const;
  std::string str() const;
};

/// Reads a JSON text file into a string; an error names the file. A file (or stream) of
/// more than `max_bytes` is refused as soon as that many are read, the error naming `limit`.
/// The read ends early, after the 1 MiB piece that holds a byte no JSON text holds (a
/// control byte other than tab, newline and return): what it returns then fails to parse
/// at or before that byte, as the whole file would.
Result<std::string> read_text_file(const std::string& path, std::int64_t max_bytes,
                                   std::string_view limit);

/// Counts a JSON document may hold, checked while it is parsed (json_parse.cpp), so that a
/// file far beyond anything pulse-plan reads costs neither the time nor the memory of
/// building it: a megabyte of `[{},{},...]` is millions of values.
struct JsonLimits {
  std::size_t max_depth = 64;                      ///< Arrays and objects inside one another.
  std::size_t max_members = std::size_t{1} << 23;  ///< Elements of one array, keys of one object.
  std::size_t max_values = std::size_t{1} << 26;   ///< Values in the whole document.
  /// Why no document needs more, for the message.
  std::string_view why = "a plan within pulse-plan's limits has far fewer";
};

/// What a profile within pulse-plan's limits (limits.hpp) can hold: 4096 layers, skips or
/// devices per node, so arrays of 4096 (16x that allowed), a 4096 x 4096 intra_node matrix.
inline constexpr JsonLimits kProfileJsonLimits{
    32, std::size_t{1} << 16, std::size_t{1} << 25,
    "a profile within pulse-plan's limits (docs/limits.md) has far fewer"};

/// Parses JSON text in time linear in its length, building the document as it goes; malformed
/// text gives an input error with line and column, a key twice in one object or a count
/// beyond `limits` one with the JSON path. The arrays at `records` (json_records.hpp) are
/// kept as records where every element is a flat object with the first one's keys; where
/// one is not, the whole text is parsed again as it is.
Result<json> parse_json(std::string_view text, const std::string& file,
                        const JsonLimits& limits = {}, const JsonRecordPath* records = nullptr);

/// Collects validation errors for one file.
class JsonChecker {
 public:
  explicit JsonChecker(std::string file) : file_(std::move(file)) {}

  void fail(const JsonPath& path, std::string_view message);
  bool ok() const { return count_ == 0; }
  std::size_t error_count() const { return count_; }
  /// Whether a further error would not be shown: the time a did-you-mean costs is saved.
  bool full() const { return count_ >= kMaxShown; }
  /// All errors as one input Error (at most kMaxShown listed).
  Error error() const;
  const std::string& file() const { return file_; }

  /// Checks that `value` is an object and has no keys outside `allowed`.
  bool object(const json& value, const JsonPath& path,
              const std::vector<std::string_view>& allowed);
  /// The member `key` of `obj`, or nullptr (recording "missing required key" if required).
  const json* member(const json& obj, const JsonPath& path, std::string_view key, bool required);
  const json* array(const json& obj, const JsonPath& path, std::string_view key, bool required);

  std::optional<std::string> string(const json& obj, const JsonPath& path, std::string_view key,
                                    bool required = true);
  /// An integer from `minimum` to `maximum` (pulse/base/limits.hpp names the maxima).
  std::optional<std::int64_t> integer(const json& obj, const JsonPath& path, std::string_view key,
                                      std::int64_t minimum, bool required = true,
                                      std::int64_t maximum = kNoIntegerLimit);
  /// A finite number; strictly above `minimum` when `exclusive`, else at least it; at most
  /// `maximum`.
  std::optional<double> number(const json& value, const JsonPath& path, double minimum,
                               bool exclusive, double maximum = kNoNumberLimit);
  std::optional<double> number(const json& obj, const JsonPath& path, std::string_view key,
                               double minimum, bool exclusive, bool required = true,
                               double maximum = kNoNumberLimit);
  std::optional<bool> boolean(const json& obj, const JsonPath& path, std::string_view key,
                              bool required = true);

  static constexpr std::size_t kMaxShown = 25;
  static constexpr std::int64_t kNoIntegerLimit = std::numeric_limits<std::int64_t>::max();
  static constexpr double kNoNumberLimit = std::numeric_limits<double>::max();

 private:
  std::string file_;
  std::vector<std::string> errors_;  ///< The first kMaxShown.
  std::size_t count_ = 0;
};

/// A short rendering of a JSON value for messages: `a string "abc"`, `-5`, `an object`.
std::string describe(const json& value);

/// Edit distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word` if it is close enough to be a likely typo, else "".
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace pulse
