// parse_json (json_check.hpp): nlohmann's SAX parser driving a document builder of our own.
// nlohmann's parse-with-callback, which an earlier version used to find duplicate keys,
// searches the enclosing array for discarded values each time an object ends: quadratic in
// the length of an array of objects (400,000 small objects, 1.6 MB: 28 s). Here every event
// costs O(log n) at most (the key look-up in its object), and the limits are counted as the
// values arrive.
#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "pulse/base/json_check.hpp"
#include "pulse/base/json_records.hpp"

namespace pulse {

namespace {

// 1-based line and column of byte offset `offset` (0-based) in `text`.
std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t offset) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < std::min(offset, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// What the parser reported: its position (bytes read), the token and nlohmann's exception.
struct SyntaxError {
  std::size_t position = 0;
  std::string token;
  int id = 0;
  std::string what;
};

// Builds the document from the parser's events. A key twice in one object is remembered
// (the first, by path) and the parse goes on: a syntax error later in the file is the one
// to report. A limit passed ends the parse at once.
class Builder {
 public:
  Builder(const JsonLimits& limits, const JsonRecordPath* records)
      : limits_(limits), record_path_(records) {}

  bool null() { return records_ ? record_value(records_->null()) : put(nullptr); }
  bool boolean(bool v) { return records_ ? record_value(records_->boolean(v)) : put(v); }
  bool number_integer(json::number_integer_t v) {
    return records_ ? record_value(records_->integer(v)) : put(v);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return records_ ? record_value(records_->unsigned_integer(v)) : put(v);
  }
  bool number_float(json::number_float_t v, const json::string_t&) {
    return records_ ? record_value(records_->number(v)) : put(v);
  }
  bool string(json::string_t& v) {
    return records_ ? record_value(records_->string(v)) : put(std::move(v));
  }
  bool binary(json::binary_t& v) {
    return records_ ? record(false) : put(json::binary(std::move(v)));
  }
  bool start_object(std::size_t) {
    if (!records_) return open(json::object());
    // An element of the records: counted as the object it stands for would be.
    return record(++values_ <= limits_.max_values &&
                  ++frames_.back().members <= limits_.max_members &&
                  frames_.size() + 1 <= limits_.max_depth && records_->begin());
  }
  bool start_array(std::size_t) {
    if (records_) return record(false);
    if (!open(json::array())) return false;
    if (on_record_path()) records_.emplace();
    return true;
  }
  bool end_object() { return records_ ? record(records_->end()) : close(); }
  bool end_array() {
    if (records_) {
      if (records_->size() > 0) *frames_.back().value = records_->finish();
      records_.reset();
    }
    return close();
  }

  bool key(json::string_t& k) {
    if (records_) return record(records_->keys_read() < limits_.max_members && records_->key(k));
    Frame& top = frames_.back();
    top.key = k;
    if (++top.members > limits_.max_members) {
      return exceeded(limits_.max_members, "keys in one object");
    }
    auto& members = top.value->get_ref<json::object_t&>();
    auto [it, fresh] = members.try_emplace(std::move(k));
    if (!fresh && !duplicate_) duplicate_ = path();
    slot_ = &it->second;
    return true;
  }

  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    syntax_ = SyntaxError{position, token, e.id, e.what()};
    return false;
  }

  json& document() { return root_; }
  const std::optional<SyntaxError>& syntax() const { return syntax_; }
  const std::optional<JsonPath>& duplicate() const { return duplicate_; }
  const std::optional<std::string>& limit() const { return limit_; }
  /// Whether an array on the record path was not records: the document is to be parsed
  /// again, as it is.
  bool not_records() const { return not_records_; }

 private:
  struct Frame {
    json* value;
    std::size_t members = 0;  // array: elements so far; object: keys so far
    std::string key;          // object: the key whose value is being read
  };

  // Where the next value goes: the root, the end of the open array, or the slot of the
  // key just read. Nothing is pushed into an array until the value before it is closed, so
  // the pointers on the stack stay valid.
  json* place(json value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& top = frames_.back();
    if (top.value->is_array()) {
      auto& elements = top.value->get_ref<json::array_t&>();
      elements.push_back(std::move(value));
      return &elements.back();
    }
    *slot_ = std::move(value);
    return slot_;
  }

  bool count() {
    if (++values_ > limits_.max_values) {
      return exceeded(limits_.max_values, "values in the document");
    }
    if (!frames_.empty() && frames_.back().value->is_array() &&
        ++frames_.back().members > limits_.max_members) {
      return exceeded(limits_.max_members, "elements in one array");
    }
    return true;
  }

  template <class V>
  bool put(V&& v) {
    if (!count()) return false;
    place(json(std::forward<V>(v)));
    return true;
  }

  bool open(json container) {
    if (!count()) return false;
    if (frames_.size() + 1 > limits_.max_depth) {
      return exceeded(limits_.max_depth, "arrays and objects inside one another");
    }
    frames_.push_back({place(std::move(container)), 0, ""});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return true;
  }

  // Whether the array just opened is on the record path: the keys and indices above it match.
  bool on_record_path() const {
    if (!record_path_ || frames_.size() != record_path_->size() + 1) return false;
    for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      const std::string_view step = (*record_path_)[i];
      if (f.value->is_object() ? step != f.key : step != "[]") return false;
    }
    return true;
  }

  // An event of an array kept as records; `ok` false ends the parse (not_records). Limits
  // are found again by the parse that follows, with its message.
  bool record(bool ok) {
    if (!ok) not_records_ = true;
    return ok;
  }
  bool record_value(bool ok) { return record(ok && ++values_ <= limits_.max_values); }

  bool exceeded(std::size_t limit, std::string_view what) {
    limit_ = fmt::format("{}: more than {} {} ({})", path().str(), limit, what, limits_.why);
    return false;
  }

  // The path of the value being read: each open container's key or element index.
  JsonPath path() const {
    JsonPath p;
    for (const Frame& f : frames_) {
      p = f.value->is_object() ? p.key(f.key) : p.at(f.members > 0 ? f.members - 1 : 0);
    }
    return p;
  }

  const JsonLimits& limits_;
  const JsonRecordPath* record_path_;
  std::optional<JsonRecordWriter> records_;  // the array being kept as records
  bool not_records_ = false;
  json root_;
  std::vector<Frame> frames_;
  json* slot_ = nullptr;
  std::size_t values_ = 0;
  std::optional<SyntaxError> syntax_;
  std::optional<JsonPath> duplicate_;
  std::optional<std::string> limit_;
};

// nlohmann's message is "[json.exception.parse_error.101] parse error at line L, column C:
// what"; what follows the location is kept, and the location is ours, FILE:LINE:COL.
Error syntax_error(std::string_view text, const std::string& file, const SyntaxError& e) {
  if (e.id == 406) {  // a number too large for a double (1e999), located at its first byte
    const std::size_t start = e.position >= e.token.size() ? e.position - e.token.size() : 0;
    const auto [line, column] = line_column(text, start);
    return input_error(fmt::format("{}:{}:{}: number {} is out of range for a double", file, line,
                                   column, e.token));
  }
  if (e.id < 100 || e.id >= 200) {
    return input_error(fmt::format("{}: malformed JSON: {}", file, e.what));
  }
  const auto [line, column] = line_column(text, e.position > 0 ? e.position - 1 : 0);
  std::string what = e.what;
  const auto at = what.find(", column ");
  const auto cut = at == std::string::npos ? std::string::npos : what.find(": ", at);
  if (cut != std::string::npos) what = what.substr(cut + 2);
  return input_error(fmt::format("{}:{}:{}: malformed JSON: {}", file, line, column, what));
}

}  // namespace

Result<json> parse_json(std::string_view text, const std::string& file, const JsonLimits& limits,
                        const JsonRecordPath* records) {
  Builder builder(limits, records);
  json::sax_parse(text.begin(), text.end(), &builder);
  if (builder.not_records()) return parse_json(text, file, limits, nullptr);
  if (builder.limit()) return input_error(fmt::format("{}: {}", file, *builder.limit()));
  if (builder.syntax()) return syntax_error(text, file, *builder.syntax());
  if (const auto& at = builder.duplicate()) {
    return input_error(
        fmt::format("{}: {}: this key appears twice in one object; which value "
                    "counts would be a guess",
                    file, at->str()));
  }
  return std::move(builder.document());
}

}  // namespace pulse
