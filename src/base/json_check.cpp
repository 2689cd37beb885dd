#include "pulse/base/json_check.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "pulse/base/text.hpp"

namespace pulse {

namespace {

bool is_identifier(std::string_view k) {
  if (k.empty() || std::isdigit(static_cast<unsigned char>(k[0]))) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string quoted_list(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += (i ? ", " : "") + std::string(names[i]);
  }
  return out;
}

std::string format_bound(double minimum, bool exclusive) {
  return fmt::format("{} {}", exclusive ? ">" : ">=", minimum);
}

}  // namespace

JsonPath JsonPath::key(std::string_view k) const {
  JsonPath p = *this;
  p.text += is_identifier(k) ? fmt::format(".{}", k) : fmt::format("[\"{}\"]", printable(k));
  return p;
}

JsonPath JsonPath::at(std::size_t index) const {
  JsonPath p = *this;
  p.text += fmt::format("[{}]", index);
  return p;
}

JsonPath JsonPath::noted(std::string n) const {
  JsonPath p = *this;
  p.note = printable(n);
  return p;
}

std::string JsonPath::str() const {
  return note.empty() ? text : text + " (" + note + ")";
}

Result<std::string> read_text_file(const std::string& path, std::int64_t max_bytes,
                                   std::string_view limit) {
  if (path.empty())
    return input_error("an input's file name is empty; expected the path of a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return input_error(
        fmt::format("{}: cannot open file for reading: {}", path, std::strerror(errno)));
  }
  // In pieces, so that a stream with no end (a pipe that never closes its writer's side
  // while writing) stops at the limit instead of filling the memory. A piece holding a byte
  // no JSON text holds (a control byte other than tab, newline and return, raw in a string
  // or outside one) ends the read: the parser stops at or before that byte, so it gives the
  // message the whole file would, without reading up to the limit first (/dev/urandom,
  // /dev/zero or a binary file named by mistake: 1 GiB took 5 s).
  std::string text;
  std::vector<char> piece(std::size_t{1} << 20);
  while (in) {
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    text.append(piece.data(), got);
    if (static_cast<std::int64_t>(text.size()) > max_bytes) {
      return input_error(fmt::format("{}: more than {} bytes ({})", path, max_bytes, limit));
    }
    const bool not_json = std::any_of(piece.begin(), piece.begin() + got, [](char c) {
      const auto b = static_cast<unsigned char>(c);
      return b < 0x20 && b != '\t' && b != '\n' && b != '\r';
    });
    if (not_json) break;
  }
  if (in.bad()) return input_error(fmt::format("{}: read error", path));
  return text;
}

// Only the errors shown are kept: a file with a million bad cells costs a count, not a
// million messages.
void JsonChecker::fail(const JsonPath& path, std::string_view message) {
  if (++count_ <= kMaxShown)
    errors_.push_back(fmt::format("{}: {}: {}", file_, path.str(), message));
}

Error JsonChecker::error() const {
  std::string message;
  for (std::size_t i = 0; i < errors_.size(); ++i) message += (i ? "\n" : "") + errors_[i];
  if (count_ > errors_.size()) {
    message += fmt::format("\n{}: ... and {} more errors", file_, count_ - errors_.size());
  }
  return input_error(std::move(message));
}

bool JsonChecker::object(const json& value, const JsonPath& path,
                         const std::vector<std::string_view>& allowed) {
  if (!value.is_object()) {
    fail(path, fmt::format("expected an object, got {}", describe(value)));
    return false;
  }
  std::vector<std::string> allowed_strings(allowed.begin(), allowed.end());
  for (const auto& [k, v] : value.items()) {
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
    const std::string guess = full() ? "" : closest_match(k, allowed_strings);
    fail(path.key(k), guess.empty()
                          ? fmt::format("unknown key (allowed here: {})", quoted_list(allowed))
                          : fmt::format("unknown key; did you mean \"{}\"?", guess));
  }
  return true;
}

const json* JsonChecker::member(const json& obj, const JsonPath& path, std::string_view key,
                                bool required) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) fail(path, fmt::format("missing required key \"{}\"", key));
    return nullptr;
  }
  return &*it;
}

const json* JsonChecker::array(const json& obj, const JsonPath& path, std::string_view key,
                               bool required) {
  const json* v = member(obj, path, key, required);
  if (v && !v->is_array()) {
    fail(path.key(key), fmt::format("expected an array, got {}", describe(*v)));
    return nullptr;
  }
  return v;
}

std::optional<std::string> JsonChecker::string(const json& obj, const JsonPath& path,
                                               std::string_view key, bool required) {
  const json* v = member(obj, path, key, required);
  if (!v) return std::nullopt;
  if (!v->is_string() || v->get_ref<const std::string&>().empty()) {
    fail(path.key(key), fmt::format("expected a non-empty string, got {}", describe(*v)));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::int64_t> JsonChecker::integer(const json& obj, const JsonPath& path,
                                                 std::string_view key, std::int64_t minimum,
                                                 bool required, std::int64_t maximum) {
  const json* v = member(obj, path, key, required);
  if (!v) return std::nullopt;
  // A float with an integral value (1e9, 4.0) is accepted: generators write such numbers.
  std::optional<std::int64_t> value;
  if (v->is_number_integer()) {
    value = v->get<std::int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      value = static_cast<std::int64_t>(d);
    }
  }
  if (!value || *value < minimum) {
    fail(path.key(key), fmt::format("expected an integer >= {}, got {}", minimum, describe(*v)));
    return std::nullopt;
  }
  if (*value > maximum) {
    fail(path.key(key), fmt::format("expected an integer <= {} (pulse-plan's limit), got {}",
                                    maximum, describe(*v)));
    return std::nullopt;
  }
  return value;
}

std::optional<double> JsonChecker::number(const json& value, const JsonPath& path, double minimum,
                                          bool exclusive, double maximum) {
  const bool in_range =
      value.is_number() && std::isfinite(value.get<double>()) &&
      (exclusive ? value.get<double>() > minimum : value.get<double>() >= minimum);
  if (!in_range) {
    fail(path, fmt::format("expected a finite number {}, got {}", format_bound(minimum, exclusive),
                           describe(value)));
    return std::nullopt;
  }
  if (value.get<double>() > maximum) {
    fail(path, fmt::format("expected a number <= {} (pulse-plan's limit), got {}", maximum,
                           describe(value)));
    return std::nullopt;
  }
  return value.get<double>();
}

std::optional<double> JsonChecker::number(const json& obj, const JsonPath& path,
                                          std::string_view key, double minimum, bool exclusive,
                                          bool required, double maximum) {
  const json* v = member(obj, path, key, required);
  if (!v) return std::nullopt;
  return number(*v, path.key(key), minimum, exclusive, maximum);
}

std::optional<bool> JsonChecker::boolean(const json& obj, const JsonPath& path,
                                         std::string_view key, bool required) {
  const json* v = member(obj, path, key, required);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    fail(path.key(key), fmt::format("expected true or false, got {}", describe(*v)));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::string describe(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return fmt::format("an array of {}", value.size());
    case json::value_t::string: {
      std::string s = printable(value.get<std::string>());
      if (s.size() > 40) {
        std::size_t cut = 37;  // not inside a UTF-8 sequence
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
        s = s.substr(0, cut) + "...";
      }
      return fmt::format("a string \"{}\"", s);
    }
    case json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    default:
      return value.dump();
  }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  // A typo is a few edits, but a very short word is a few edits from anything short:
  // one or two letters allow one edit.
  std::string best;
  std::size_t best_distance =
      (word.size() <= 2 ? 1 : std::max<std::size_t>(2, word.size() / 3)) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace pulse
