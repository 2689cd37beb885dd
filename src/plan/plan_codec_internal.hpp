// The plan codec's machinery (private to src/plan). plan_sections.cpp lists every section's
// keys once, as calls on an `io` object; the three IO classes below give those calls their
// meaning: PlanWriter writes the value, PlanReader reads and checks it, KeyLister records the
// key for the schema test. A section function is a template over the IO class, so a key
// added to a section is written, read and listed by the same line.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pulse/base/json_check.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/plan/plan_codec.hpp"

namespace pulse::detail {

using ojson = nlohmann::ordered_json;

/// Whether a key must be present, and what an absent one means.
enum class Need {
  required,   ///< The reader fails without it; always written.
  optional,   ///< A std::optional member: absent when empty, and not written then.
  defaulted,  ///< The reader keeps the member's default when absent; always written.
};

/// How a number is written: rounded to its quantum, so it prints the same everywhere.
enum class Format {
  raw,      ///< As it is (settings such as bytes per parameter).
  seconds,  ///< To the nanosecond (cost_model.hpp's quantum).
  ratio,    ///< To 1e-9.
  rate,     ///< To 1e-6 (samples per second).
};

/// What the reader accepts for a number.
enum class Range { nonnegative, positive, finite };

/// What an index counts, which bounds it: stages read so far, the pipeline degree, the
/// microbatches. `stage_in_order` is a stage's own id, which must equal its position.
enum class IndexOf { stage, stage_in_order, device, microbatch };

/// How long an array of objects must be.
enum class Length { any, num_stages };

enum class Kind { count, bytes, number, text, note, flag, index, choice, op, sha256 };

/// What one key holds and how it is checked. Built with the helpers below.
struct Spec {
  Kind kind = Kind::count;
  std::optional<Need> need;  ///< Unset: required, or optional for a std::optional member.
  /// A std::optional member written as null when empty, and read empty from a null.
  bool null_ok = false;
  Format format = Format::raw;
  Range range = Range::nonnegative;
  IndexOf index = IndexOf::stage;
  int minimum = 0;
  std::vector<std::string_view> choices;
  const char* noun = nullptr;  ///< For lists that must not be empty: "layer".
  /// Bounds beyond the type's and the range's (plan_check.hpp's limits), and the limit's name
  /// for the message: "the pipeline degree limit". Times (Format::seconds), byte counts
  /// (Kind::bytes) and rank lists have theirs without asking.
  std::optional<double> least;
  std::optional<double> most;
  const char* limit = nullptr;

  Spec defaulted() const { return with(Need::defaulted); }
  Spec at_most(double high, const char* what) const {
    Spec s = *this;
    s.most = high;
    s.limit = what;
    return s;
  }
  Spec within(double low, double high, const char* what) const {
    Spec s = at_most(high, what);
    s.least = low;
    return s;
  }
  /// Present, and null where there is no value.
  Spec nullable() const {
    Spec s = with(Need::required);
    s.null_ok = true;
    return s;
  }
  /// Null or absent where there is no value (written as null).
  Spec nullable_or_absent() const {
    Spec s = with(Need::optional);
    s.null_ok = true;
    return s;
  }
  Spec nonempty(const char* what) const {
    Spec s = *this;
    s.noun = what;
    return s;
  }

 private:
  Spec with(Need n) const {
    Spec s = *this;
    s.need = n;
    return s;
  }
};

inline Spec spec_of(Kind kind) {
  Spec s;
  s.kind = kind;
  return s;
}
inline Spec count(int minimum = 0) {
  Spec s = spec_of(Kind::count);
  s.minimum = minimum;
  return s;
}
inline Spec bytes() {
  return spec_of(Kind::bytes);
}
inline Spec number(Format format, Range range) {
  Spec s = spec_of(Kind::number);
  s.format = format;
  s.range = range;
  return s;
}
inline Spec seconds() {
  return number(Format::seconds, Range::nonnegative);
}
inline Spec text() {
  return spec_of(Kind::text);
}
/// Any string, the empty one included.
inline Spec note() {
  return spec_of(Kind::note);
}
inline Spec flag() {
  return spec_of(Kind::flag);
}
inline Spec index(IndexOf of) {
  Spec s = spec_of(Kind::index);
  s.index = of;
  return s;
}
inline Spec choice(std::initializer_list<std::string_view> values) {
  Spec s = spec_of(Kind::choice);
  s.choices = values;
  return s;
}
/// A SHA-256 digest: 64 lowercase hex digits.
inline Spec sha256() {
  return spec_of(Kind::sha256);
}
/// An op letter: "F", "B", "I" or "W".
inline Spec op_kind() {
  Spec s = spec_of(Kind::op);
  s.choices = {"F", "B", "I", "W"};
  return s;
}

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
inline constexpr bool is_optional_v = is_optional<std::remove_const_t<T>>::value;

/// The presence a spec asks of a member of type T.
template <class T>
Need need_of(const Spec& spec) {
  return spec.need.value_or(is_optional_v<T> ? Need::optional : Need::required);
}

/// A number rounded as `format` says.
double rounded(double value, Format format);

// ---------------------------------------------------------------------------------------
// PlanWriter: section -> the plan's text, written as the sections are walked. The bytes are
// those nlohmann's dump(2) prints for the same keys as an ordered tree, without the tree (a
// plan of millions of ops is gigabytes as one), but for each op of the schedule, which is
// one line, `{"op": "F", "stage": 0, "mb": 0, "start_s": 0.0, "end_s": 1.8e-05}`: the ops
// are nearly all of a large plan, and on seven lines each, as plans were written before
// December 2026, they made it 1.7 times as large (at pp 1024 over 2048 layers 0.62 GB
// against 0.37 GB). JSON readers see the same document.

/// The text being written, and where its first number that is not finite is (JSON has
/// none: it is written as null, and the plan is refused).
struct PlanText {
  std::string text;
  std::optional<std::pair<JsonPath, double>> non_finite;
  /// The keys (index unset) and array indices down to the value being written.
  std::vector<std::pair<std::string_view, std::optional<std::size_t>>> at;
  /// Each device's ops written as `[]` (encode_plan reads them back from the plan itself).
  bool without_ops = false;
  /// Where set, `text` is handed to it once past kPieceBytes at the end of an array's
  /// element, and emptied (stream_plan): at pp 512 the plan's text is 0.4 GB.
  const TextSink* sink = nullptr;
  bool refused = false;  ///< The sink refused a piece: nothing more is handed to it.

  static constexpr std::size_t kPieceBytes = std::size_t{1} << 20;
  /// Hands `text` to the sink (until it refuses) and empties it.
  void hand_over() {
    if (!refused) refused = !(*sink)(text);
    text.clear();
  }
};

class PlanWriter {
 public:
  /// The text of an object whose members `keys(writer)` writes, at nesting `level` (the
  /// plan itself is 0): its members are indented by 2 (level + 1) spaces.
  template <class Fn>
  static void object_text(PlanText& out, int level, Fn&& keys) {
    out.text += '{';
    PlanWriter sub(out, level);
    keys(sub);
    if (sub.any_) sub.line_break(level);
    out.text += '}';
  }
  /// An op's line as line_object_text writes it through plan_sections.cpp's op_keys (the
  /// same keys, in the same order, the same digits), appended directly: a plan at pp 512
  /// over 2048 layers has 6.3 million of them, and a member at a time (its JSON path kept
  /// for errors) executed 14 G instructions besides the digits. False, writing nothing,
  /// where a time is not finite: the generic path says where (PlanText::non_finite).
  static bool op_line(PlanText& out, const PlanOp& op);
  /// The text of an object on one line: its members separated by ", " (an op).
  template <class Fn>
  static void line_object_text(PlanText& out, Fn&& keys) {
    out.text += '{';
    PlanWriter sub(out, 0);
    sub.one_line_ = true;
    keys(sub);
    out.text += '}';
  }

  template <class T>
  void field(std::string_view key, const T& value, const Spec& spec) {
    if constexpr (is_optional_v<T>) {
      if (value) {
        member(key, [&] { scalar(*value, spec); });
      } else if (spec.null_ok) {
        member(key, [&] { out_.text += "null"; });
      }
    } else {
      member(key, [&] { scalar(value, spec); });
    }
  }

  template <class T>
  void list(std::string_view key, const std::vector<T>& values, const Spec& spec) {
    member(key,
           [&] { array(values, level_ + 1, [&](std::size_t, const T& v) { scalar(v, spec); }); });
  }
  /// An optional list: absent when unset (so plans without it stay byte-identical).
  template <class T>
  void list(std::string_view key, const std::optional<std::vector<T>>& values, const Spec& spec) {
    if (values) list(key, *values, spec);
  }
  void groups(std::string_view key, const std::vector<std::vector<RankId>>& groups);
  void groups(std::string_view key, const std::optional<std::vector<std::vector<RankId>>>& groups);
  void byte_map(std::string_view key,
                const std::optional<std::map<std::string, std::int64_t>>& values);
  /// A value the writer derives and the reader ignores (Bytes::total).
  void derived(std::string_view key, std::int64_t value) {
    member(key, [&] { integer(value); });
  }

  template <class T, class Fn>
  void object(std::string_view key, const T& value, Fn&& keys, std::optional<Need> = {}) {
    if constexpr (is_optional_v<T>) {
      if (value) object(key, *value, keys);
    } else {
      member(key,
             [&] { object_text(out_, level_ + 1, [&](PlanWriter& sub) { keys(sub, value); }); });
    }
  }
  template <class T, class Fn>
  void objects(std::string_view key, const std::vector<T>& values, Fn&& keys, Need = Need::required,
               Length = Length::any) {
    member(key, [&] {
      array(values, level_ + 1, [&](std::size_t, const T& v) {
        object_text(out_, level_ + 2, [&](PlanWriter& sub) { keys(sub, v); });
      });
    });
  }
  template <class T, class Fn>
  void objects(std::string_view key, const std::optional<std::vector<T>>& values, Fn&& keys) {
    if (values) objects(key, *values, keys);
  }
  template <class Fn>
  void device_schedules(std::string_view key, const std::vector<std::vector<PlanOp>>& schedule,
                        Fn&& op_keys) {
    member(key, [&] {
      array(schedule, level_ + 1, [&](std::size_t d, const std::vector<PlanOp>& ops) {
        object_text(out_, level_ + 2, [&](PlanWriter& entry) {
          entry.member("device", [&] { entry.integer(static_cast<std::int64_t>(d)); });
          entry.member("ops", [&] {
            if (out_.without_ops) {
              out_.text += "[]";
              return;
            }
            entry.array(ops, level_ + 3, [&](std::size_t, const PlanOp& op) {
              if (!op_line(out_, op)) {
                line_object_text(out_, [&](PlanWriter& sub) { op_keys(sub, op); });
              }
            });
          });
        });
      });
    });
  }

 private:
  PlanWriter(PlanText& out, int level) : out_(out), level_(level) {}

  /// `"key": ` on a line of its own (or after ", " on one line), then the value `value()`
  /// writes.
  template <class Fn>
  void member(std::string_view key, Fn&& value) {
    if (one_line_) {
      if (any_) out_.text += ", ";
    } else {
      if (any_) out_.text += ',';
      line_break(level_ + 1);
    }
    any_ = true;
    string(key);
    out_.text += ": ";
    out_.at.emplace_back(key, std::nullopt);
    value();
    out_.at.pop_back();
  }
  /// An array at nesting `level`, each element written by `element(index, value)`.
  template <class List, class Fn>
  void array(const List& values, int level, Fn&& element) {
    if (values.empty()) {
      out_.text += "[]";
      return;
    }
    out_.text += '[';
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out_.text += ',';
      line_break(level + 1);
      out_.at.emplace_back(std::string_view{}, i);
      element(i, values[i]);
      out_.at.pop_back();
      if (out_.sink && out_.text.size() >= PlanText::kPieceBytes) out_.hand_over();
    }
    line_break(level);
    out_.text += ']';
  }
  /// A new line indented for nesting `level`.
  void line_break(int level) {
    out_.text += '\n';
    out_.text.append(2 * static_cast<std::size_t>(level), ' ');
  }

  void scalar(double v, const Spec& spec) { number(rounded(v, spec.format)); }
  void scalar(int v, const Spec&) { integer(v); }
  void scalar(std::int64_t v, const Spec&) { integer(v); }
  void scalar(bool v, const Spec&) { out_.text += v ? "true" : "false"; }
  void scalar(const std::string& v, const Spec&) { string(v); }
  void scalar(OpKind v, const Spec&) {
    const char letter = op_letter(v);
    string(std::string_view(&letter, 1));
  }
  void integer(std::int64_t v);
  void number(double v);
  void string(std::string_view s);

  PlanText& out_;
  int level_;
  bool any_ = false;       ///< Whether a member is written yet.
  bool one_line_ = false;  ///< Members on one line (line_object_text): only scalars.
};

// ---------------------------------------------------------------------------------------
// PlanReader: JSON -> section, every problem recorded in the checker.

class PlanReader {
 public:
  PlanReader(JsonChecker& check, const json& obj, JsonPath path, const Plan& context)
      : check_(check), obj_(obj), path_(std::move(path)), plan_(context) {}

  template <class T>
  void field(std::string_view key, T& value, const Spec& spec) {
    const Need need = need_of<T>(spec);
    const json* v = check_.member(obj_, path_, key, need == Need::required);
    if (!v || (spec.null_ok && v->is_null())) return;
    if constexpr (is_optional_v<T>) {
      typename T::value_type x{};
      if (read(key, *v, x, spec)) value = x;
    } else {
      read(key, *v, value, spec);
    }
  }

  void list(std::string_view key, std::vector<std::string>& values, const Spec& spec);
  void list(std::string_view key, std::vector<std::int64_t>& values, const Spec& spec);
  void list(std::string_view key, std::vector<int>& values, const Spec& spec);
  /// An optional list: left empty when the key is absent.
  template <class T>
  void list(std::string_view key, std::optional<std::vector<T>>& values, const Spec& spec) {
    if (!obj_.is_object() || !obj_.contains(key)) return;
    values.emplace();
    list(key, *values, spec);
  }
  void groups(std::string_view key, std::vector<std::vector<RankId>>& groups);
  void groups(std::string_view key, std::optional<std::vector<std::vector<RankId>>>& groups);
  void byte_map(std::string_view key, std::optional<std::map<std::string, std::int64_t>>& values);
  void derived(std::string_view, std::int64_t) {}

  template <class T, class Fn>
  void object(std::string_view key, T& value, Fn&& keys, std::optional<Need> need = {}) {
    const bool required =
        need.value_or(is_optional_v<T> ? Need::optional : Need::required) == Need::required;
    const json* v = check_.member(obj_, path_, key, required);
    if (!v) return;
    if (!v->is_object()) {
      check_.fail(path_.key(key), fmt_expected_object(*v));
      return;
    }
    PlanReader sub(check_, *v, path_.key(key), plan_);
    if constexpr (is_optional_v<T>) {
      // Read in place: GCC 12 takes a local's defaulted std::string members (chosen's
      // precision) for uninitialized once inlined (-Wmaybe-uninitialized).
      keys(sub, value.emplace());
    } else {
      keys(sub, value);
    }
  }

  /// An array of objects. Length::num_stages: its length must equal
  /// $.parallelism.num_stages (checked after the elements' types, before their keys).
  template <class T, class Fn>
  void objects(std::string_view key, std::vector<T>& values, Fn&& keys, Need need = Need::required,
               Length length = Length::any) {
    if (need != Need::required && !obj_.contains(std::string(key))) return;
    read_objects(key, values, keys, length == Length::num_stages);
  }
  template <class T, class Fn>
  void objects(std::string_view key, std::optional<std::vector<T>>& values, Fn&& keys) {
    if (!obj_.contains(std::string(key))) return;
    std::vector<T> read;
    read_objects(key, read, keys, false);
    values = std::move(read);
  }

  template <class Fn>
  void device_schedules(std::string_view key, std::vector<std::vector<PlanOp>>& schedule,
                        Fn&& op_keys);

 private:
  template <class T, class Fn>
  void read_objects(std::string_view key, std::vector<T>& values, Fn&& keys,
                    bool count_is_num_stages) {
    const json* list = check_.array(obj_, path_, key, true);
    if (!list) return;
    std::vector<std::size_t> good;
    for (std::size_t i = 0; i < list->size(); ++i) {
      if ((*list)[i].is_object()) {
        good.push_back(i);
      } else {
        check_.fail(path_.key(key).at(i), fmt_expected_object((*list)[i]));
      }
    }
    if (count_is_num_stages) check_stage_count(key, list->size());
    for (std::size_t i : good) {
      T value{};
      PlanReader sub(check_, (*list)[i], path_.key(key).at(i), plan_);
      sub.position_ = static_cast<int>(values.size());
      keys(sub, value);
      values.push_back(std::move(value));
    }
  }
  void check_stage_count(std::string_view key, std::size_t count);
  static std::string fmt_expected_object(const json& v);

  bool read(std::string_view key, const json& v, int& out, const Spec& spec);
  bool read(std::string_view key, const json& v, std::int64_t& out, const Spec& spec);
  bool read(std::string_view key, const json& v, double& out, const Spec& spec);
  bool read(std::string_view key, const json& v, bool& out, const Spec& spec);
  bool read(std::string_view key, const json& v, std::string& out, const Spec& spec);
  bool read(std::string_view key, const json& v, OpKind& out, const Spec& spec);
  /// An index in [0, limit) (`what` names it), or -1 recorded as a problem.
  int read_index(const json& v, const JsonPath& at, IndexOf of);
  /// The integers >= 0 of `array`, found at this reader's path (a rank group).
  void list_elements(const json& array, std::vector<int>& out);

  JsonChecker& check_;
  const json& obj_;
  JsonPath path_;
  const Plan& plan_;
  int position_ = 0;  ///< This object's place in its array (for IndexOf::stage_in_order).
};

template <class Fn>
void PlanReader::device_schedules(std::string_view key, std::vector<std::vector<PlanOp>>& schedule,
                                  Fn&& op_keys) {
  // One entry per pipeline device, in device order (as stages are in id order), so that
  // $.schedule[d] is device d's list in every message.
  const int P = plan_.parallelism.pp;
  schedule.assign(P, {});
  const json* list = check_.array(obj_, path_, key, true);
  if (list && static_cast<int>(list->size()) != P) {
    check_.fail(path_.key(key), fmt::format("expected {} entries, one per pipeline device "
                                            "($.parallelism.pp), got {}",
                                            P, list->size()));
  }
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    const json& entry = (*list)[i];
    const JsonPath at = path_.key(key).at(i);
    if (!entry.is_object()) {
      check_.fail(at, fmt_expected_object(entry));
      continue;
    }
    const json* device = check_.member(entry, at, "device", true);
    const int d = device ? read_index(*device, at.key("device"), IndexOf::device) : -1;
    if (d >= 0 && d != static_cast<int>(i)) {
      check_.fail(
          at.key("device"),
          fmt::format("expected {} (schedule entries are listed in device order), got {}", i, d));
      continue;
    }
    auto read_op = [&](std::size_t k, const json& value) {
      const JsonPath op_at = at.key("ops").at(k);
      if (!value.is_object()) {
        check_.fail(op_at, fmt_expected_object(value));
        return;
      }
      PlanOp op;
      op.op.stage = -1;
      op.op.mb = -1;
      PlanReader sub(check_, value, op_at, plan_);
      op_keys(sub, op);
      if (op.op.stage >= 0 && op.op.mb >= 0) schedule[d].push_back(op);
    };
    // Parsed as records (parse_plan): each op is made an object as it is read.
    if (const auto it = entry.find("ops"); it != entry.end() && JsonRecords::holds(*it)) {
      if (d < 0) continue;
      const JsonRecords ops(*it);
      schedule[d].reserve(ops.size());
      for (std::size_t k = 0; k < ops.size(); ++k) read_op(k, ops.at(k));
      continue;
    }
    const json* ops = check_.array(entry, at, "ops", true);
    if (d < 0 || !ops) continue;
    for (std::size_t k = 0; k < ops->size(); ++k) read_op(k, (*ops)[k]);
  }
}

// ---------------------------------------------------------------------------------------
// KeyLister: every key with its JSON type, for the schema test.

class KeyLister {
 public:
  KeyLister(std::vector<PlanKey>& out, std::string path) : out_(out), path_(std::move(path)) {}

  template <class T>
  void field(std::string_view key, const T&, const Spec& spec) {
    const Need need = need_of<T>(spec);
    std::string type = type_of(spec);
    if (spec.null_ok) type += "|null";
    add(key, type, need == Need::required);
  }
  template <class T>
  void list(std::string_view key, const std::vector<T>&, const Spec& spec) {
    add(key, "array", need_of<std::vector<T>>(spec) == Need::required);
    out_.push_back({path_ + "." + std::string(key) + "[]", type_of(spec), false});
  }
  template <class T>
  void list(std::string_view key, const std::optional<std::vector<T>>&, const Spec& spec) {
    add(key, "array", false);
    out_.push_back({path_ + "." + std::string(key) + "[]", type_of(spec), false});
  }
  void groups(std::string_view key, const std::vector<std::vector<RankId>>&);
  void groups(std::string_view key, const std::optional<std::vector<std::vector<RankId>>>&);
  void byte_map(std::string_view key, const std::optional<std::map<std::string, std::int64_t>>&);
  void derived(std::string_view key, std::int64_t) { add(key, "integer", false); }

  template <class T, class Fn>
  void object(std::string_view key, const T&, Fn&& keys, std::optional<Need> need = {}) {
    add(key, "object",
        need.value_or(is_optional_v<T> ? Need::optional : Need::required) == Need::required);
    KeyLister sub(out_, path_ + "." + std::string(key));
    if constexpr (is_optional_v<T>) {
      // In an optional: GCC 12 takes a plain local's defaulted std::string members (chosen's
      // precision) for uninitialized once inlined (-Wmaybe-uninitialized).
      std::remove_const_t<T> x;
      x.emplace();
      keys(sub, *x);
    } else {
      std::remove_const_t<T> x{};
      keys(sub, x);
    }
  }
  template <class V, class Fn>
  void objects(std::string_view key, const V&, Fn&& keys, Need need = Need::required,
               Length = Length::any) {
    using Vec = std::remove_const_t<V>;
    out_.push_back({path_ + "." + std::string(key) + "[]", "object", false});
    if constexpr (is_optional_v<Vec>) {
      add(key, "array", false);
      typename Vec::value_type::value_type x{};
      KeyLister sub(out_, path_ + "." + std::string(key) + "[]");
      keys(sub, x);
    } else {
      add(key, "array", need == Need::required);
      typename Vec::value_type x{};
      KeyLister sub(out_, path_ + "." + std::string(key) + "[]");
      keys(sub, x);
    }
  }
  template <class Fn>
  void device_schedules(std::string_view key, const std::vector<std::vector<PlanOp>>&,
                        Fn&& op_keys) {
    add(key, "array", true);
    const std::string entry = path_ + "." + std::string(key) + "[]";
    out_.push_back({entry, "object", false});
    out_.push_back({entry + ".device", "integer", true});
    out_.push_back({entry + ".ops", "array", true});
    out_.push_back({entry + ".ops[]", "object", false});
    KeyLister sub(out_, entry + ".ops[]");
    PlanOp op;
    op_keys(sub, op);
  }

 private:
  void add(std::string_view key, std::string type, bool required) {
    out_.push_back({path_ + "." + std::string(key), std::move(type), required});
  }
  static std::string type_of(const Spec& spec);

  std::vector<PlanKey>& out_;
  std::string path_;
};

// The sections (plan_sections.cpp), each a list of keys in writing order.
void plan_keys(PlanWriter& io, const Plan& plan);
void plan_keys(PlanReader& io, Plan& plan);
void plan_keys(KeyLister& io, const Plan& plan);
/// The degrees that bound the rest of a plan (`parallelism`'s pp, dp, num_microbatches,
/// num_stages), read before it.
void degree_keys(PlanReader& io, Plan& plan);
/// The figures sections alone: `comm` and `predicted`.
void figure_keys(PlanWriter& io, const Plan& plan);
/// One op of `schedule[].ops[]`, written and read as the plan's schedule does.
void op_keys(PlanWriter& io, const PlanOp& op);
void op_keys(PlanReader& io, PlanOp& op);

/// The plan's ops as the reader reads them back from its text, into `read` (the rest of the
/// plan, read from the text without its ops). An op the reader takes plainly is copied, its
/// times as written; any other is written and read back by the codec's own op keys,
/// so that it is refused in the reader's words (listed after the other sections' problems,
/// where the reader lists them in the order of the text).
void read_back_ops(const Plan& plan, Plan& read, JsonChecker& check);

}  // namespace pulse::detail
