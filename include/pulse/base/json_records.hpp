// An array of flat objects kept compactly in a parsed document (parse_json's `records`).
// A plan's schedule is millions of objects of five scalars ({"op": "F", "stage": 0, "mb": 3,
// "start_s": ..., "end_s": ...}); as a document each is a map of five nodes, about 450
// bytes, and a 622 MB plan (pp 512) about 2.5 GB. As records each is 9 bytes a value, the
// keys and strings once for the whole array.
//
// Such an array sits in the document as a binary value of subtype kJsonRecordsSubtype, which
// JSON text cannot produce, so it is never mistaken for one; JsonRecords gives its elements
// back as objects, one at a time, with the JSON types the text had.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pulse {

using json = nlohmann::json;

inline constexpr std::uint8_t kJsonRecordsSubtype = 0x72;  // 'r'

/// Where parse_json may keep an array as records: the keys down to it, "[]" standing for any
/// element of an array on the way: {"schedule", "[]", "ops"} is every $.schedule[i].ops.
using JsonRecordPath = std::vector<std::string_view>;

/// Builds one array's records from the parser's events. A call returns false when the array
/// is not records after all (an element that is not an object, a value that is not a scalar,
/// keys other than the first element's, in another order, or too many distinct strings):
/// the caller then parses the document as it is.
class JsonRecordWriter {
 public:
  bool begin();
  bool key(std::string_view k);
  bool null();
  bool boolean(bool v);
  bool integer(std::int64_t v);
  bool unsigned_integer(std::uint64_t v);
  bool number(double v);
  bool string(std::string_view v);
  bool end();
  std::size_t size() const { return count_; }
  /// The keys of the element being read so far.
  std::size_t keys_read() const { return at_key_; }
  /// The binary value that stands for the array.
  json finish();

 private:
  bool value(std::uint8_t tag, std::uint64_t bits);

  std::vector<std::uint8_t> bytes_;   // the records, then the tables (see finish)
  std::vector<std::string> keys_;     // the first element's keys, in order
  std::vector<std::string> strings_;  // each distinct string value once
  std::size_t count_ = 0;
  std::size_t at_key_ = 0;  // in an element: keys read so far
  bool in_element_ = false;
  bool expect_value_ = false;  // a key is read, its value not yet
};

/// The elements of an array kept as records.
class JsonRecords {
 public:
  /// Whether `v` is such an array.
  static bool holds(const json& v);
  explicit JsonRecords(const json& v);  // `v` must hold records, and outlive this

  std::size_t size() const { return count_; }
  /// Element `i` as the object the text had.
  json at(std::size_t i) const;

 private:
  const std::uint8_t* records_ = nullptr;
  std::vector<std::string_view> keys_;
  std::vector<std::string_view> strings_;
  std::size_t count_ = 0;
};

}  // namespace pulse
