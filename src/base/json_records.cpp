// Arrays kept as records (json_records.hpp). The binary value holds, in order:
//   the records: each value of each element as a tag byte and 8 bytes (the number's bits,
//     or the string's index), in the keys' order;
//   the tables: the key count, each key, the string count, each string (a 4-byte length,
//     then the bytes);
//   the footer: where the tables start, and the element count (8 bytes each).
// Numbers are copied as bits in this machine's byte order: the value lives only as long as
// the document it was parsed into.
#include "pulse/base/json_records.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace pulse {

namespace {

enum Tag : std::uint8_t { kNull, kFalse, kTrue, kInteger, kUnsigned, kNumber, kString };

constexpr std::size_t kValueBytes = 9;
constexpr std::size_t kFooterBytes = 16;
// Beyond these an array is parsed as it is: records pay off for many elements alike.
constexpr std::size_t kMaxKeys = 64;
constexpr std::size_t kMaxStrings = 256;
constexpr std::size_t kMaxStringBytes = 256;

void put_bytes(std::vector<std::uint8_t>& out, const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  out.insert(out.end(), p, p + n);
}

void put_text(std::vector<std::uint8_t>& out, std::string_view s) {
  const auto n = static_cast<std::uint32_t>(s.size());
  put_bytes(out, &n, sizeof n);
  put_bytes(out, s.data(), s.size());
}

template <class T>
T get(const std::uint8_t* at) {
  T v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

// The strings of a table from `at`, which moves past them.
std::vector<std::string_view> get_texts(const std::uint8_t*& at) {
  const auto n = get<std::uint32_t>(at);
  at += sizeof n;
  std::vector<std::string_view> out;
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto size = get<std::uint32_t>(at);
    at += sizeof size;
    out.emplace_back(reinterpret_cast<const char*>(at), size);
    at += size;
  }
  return out;
}

}  // namespace

// --- JsonRecordWriter -------------------------------------------------------------------

bool JsonRecordWriter::begin() {
  if (in_element_) return false;
  in_element_ = true;
  at_key_ = 0;
  return true;
}

bool JsonRecordWriter::key(std::string_view k) {
  if (!in_element_ || expect_value_) return false;
  if (count_ == 0) {
    if (keys_.size() >= kMaxKeys || std::find(keys_.begin(), keys_.end(), k) != keys_.end()) {
      return false;
    }
    keys_.emplace_back(k);
  } else if (at_key_ >= keys_.size() || keys_[at_key_] != k) {
    return false;
  }
  ++at_key_;
  expect_value_ = true;
  return true;
}

bool JsonRecordWriter::value(std::uint8_t tag, std::uint64_t bits) {
  if (!expect_value_) return false;
  expect_value_ = false;
  bytes_.push_back(tag);
  put_bytes(bytes_, &bits, sizeof bits);
  return true;
}

bool JsonRecordWriter::null() {
  return value(kNull, 0);
}

bool JsonRecordWriter::boolean(bool v) {
  return value(v ? kTrue : kFalse, 0);
}

bool JsonRecordWriter::integer(std::int64_t v) {
  return value(kInteger, static_cast<std::uint64_t>(v));
}

bool JsonRecordWriter::unsigned_integer(std::uint64_t v) {
  return value(kUnsigned, v);
}

bool JsonRecordWriter::number(double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return value(kNumber, bits);
}

bool JsonRecordWriter::string(std::string_view v) {
  auto it = std::find(strings_.begin(), strings_.end(), v);
  if (it == strings_.end()) {
    if (strings_.size() >= kMaxStrings || v.size() > kMaxStringBytes) return false;
    it = strings_.emplace(strings_.end(), v);
  }
  return value(kString, static_cast<std::uint64_t>(it - strings_.begin()));
}

bool JsonRecordWriter::end() {
  if (!in_element_ || expect_value_) return false;
  if (count_ > 0 && at_key_ != keys_.size()) return false;
  in_element_ = false;
  ++count_;
  return true;
}

json JsonRecordWriter::finish() {
  if (in_element_) throw std::logic_error("JsonRecordWriter::finish inside an element");
  const std::uint64_t tables = bytes_.size(), count = count_;
  for (const std::vector<std::string>* texts : {&keys_, &strings_}) {
    const auto n = static_cast<std::uint32_t>(texts->size());
    put_bytes(bytes_, &n, sizeof n);
    for (const std::string& s : *texts) put_text(bytes_, s);
  }
  put_bytes(bytes_, &tables, sizeof tables);
  put_bytes(bytes_, &count, sizeof count);
  return json::binary(std::move(bytes_), kJsonRecordsSubtype);
}

// --- JsonRecords ------------------------------------------------------------------------

bool JsonRecords::holds(const json& v) {
  return v.is_binary() && v.get_binary().has_subtype() &&
         v.get_binary().subtype() == kJsonRecordsSubtype;
}

JsonRecords::JsonRecords(const json& v) {
  if (!holds(v)) throw std::logic_error("JsonRecords: the value holds no records");
  const std::vector<std::uint8_t>& bytes = v.get_binary();
  const std::uint8_t* end = bytes.data() + bytes.size();
  const auto tables = get<std::uint64_t>(end - kFooterBytes);
  count_ = get<std::uint64_t>(end - kFooterBytes + 8);
  const std::uint8_t* at = bytes.data() + tables;
  keys_ = get_texts(at);
  strings_ = get_texts(at);
  records_ = bytes.data();
}

json JsonRecords::at(std::size_t i) const {
  json out = json::object();
  const std::uint8_t* value = records_ + i * keys_.size() * kValueBytes;
  for (std::string_view key : keys_) {
    const auto bits = get<std::uint64_t>(value + 1);
    json& slot = out[std::string(key)];
    switch (value[0]) {
      case kNull:
        break;
      case kFalse:
        slot = false;
        break;
      case kTrue:
        slot = true;
        break;
      case kInteger:
        slot = static_cast<std::int64_t>(bits);
        break;
      case kUnsigned:
        slot = bits;
        break;
      case kNumber: {
        double d;
        std::memcpy(&d, &bits, sizeof d);
        slot = d;
        break;
      }
      case kString:
        slot = std::string(strings_[bits]);
        break;
    }
    value += kValueBytes;
  }
  return out;
}

}  // namespace pulse
