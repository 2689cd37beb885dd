// The plan's writer (plan_codec_internal.hpp, PlanWriter): the pieces of text its
// templates do not write inline. The reader, the key lister and the checks are in
// plan_codec.cpp.

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "plan_codec_internal.hpp"

namespace pulse::detail {

void PlanWriter::groups(std::string_view key, const std::vector<std::vector<RankId>>& groups) {
  member(key, [&] {
    array(groups, level_ + 1, [&](std::size_t, const std::vector<RankId>& group) {
      array(group, level_ + 2, [&](std::size_t, RankId rank) { integer(rank); });
    });
  });
}

void PlanWriter::groups(std::string_view key,
                        const std::optional<std::vector<std::vector<RankId>>>& groups) {
  if (groups) this->groups(key, *groups);
}

void PlanWriter::byte_map(std::string_view key,
                          const std::optional<std::map<std::string, std::int64_t>>& values) {
  if (!values) return;
  member(key, [&] {
    object_text(out_, level_ + 1, [&](PlanWriter& sub) {
      for (const auto& entry : *values) {
        sub.member(entry.first, [&] { sub.integer(entry.second); });
      }
    });
  });
}

// A plan at pp 512 over 2048 layers holds 16.8 million numbers (8.4 million integers, as
// many fractions): each is written into the text as it is, without a string (or a tree) of
// its own.
void PlanWriter::integer(std::int64_t v) {
  const fmt::format_int digits(v);
  out_.text.append(digits.data(), digits.size());
}

void PlanWriter::number(double v) {
  if (std::isfinite(v)) {
    // nlohmann's shortest round-trip digits (".0" after a whole number), as a tree's dump
    // has them: its serializer calls this same function for every finite double.
    std::array<char, 64> digits;
    const char* end = nlohmann::detail::to_chars(digits.data(), digits.data() + digits.size(), v);
    out_.text.append(digits.data(), static_cast<std::size_t>(end - digits.data()));
    return;
  }
  if (!out_.non_finite) {
    JsonPath at;
    for (const auto& [key, index] : out_.at) at = index ? at.at(*index) : at.key(key);
    out_.non_finite = std::pair{at, v};
  }
  out_.text += "null";
}

bool PlanWriter::op_line(PlanText& out, const PlanOp& op) {
  const double start = rounded(op.start_s, Format::seconds);
  const double end = rounded(op.end_s, Format::seconds);
  if (!std::isfinite(start) || !std::isfinite(end)) return false;
  // Each piece at most 26 characters (a double's digits), the keys' text fixed.
  std::array<char, 192> line;
  char* at = line.data();
  const auto text = [&at](std::string_view s) { at = std::copy(s.begin(), s.end(), at); };
  const auto whole = [&](std::int64_t v) {
    const fmt::format_int digits(v);
    text({digits.data(), digits.size()});
  };
  const auto number = [&at, &line](double v) {
    at = nlohmann::detail::to_chars(at, line.data() + line.size(), v);
  };
  text("{\"op\": \"");
  *at++ = op_letter(op.op.kind);
  text("\", \"stage\": ");
  whole(op.op.stage);
  text(", \"mb\": ");
  whole(op.op.mb);
  text(", \"start_s\": ");
  number(start);
  text(", \"end_s\": ");
  number(end);
  *at++ = '}';
  out.text.append(line.data(), static_cast<std::size_t>(at - line.data()));
  return true;
}

void PlanWriter::string(std::string_view s) {
  const bool plain = std::all_of(
      s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (!plain) {
    out_.text += ojson(std::string(s)).dump(-1, ' ', false, ojson::error_handler_t::replace);
    return;
  }
  out_.text += '"';
  out_.text += s;
  out_.text += '"';
}

}  // namespace pulse::detail
