// Buckets files and the model at a bucket's shape (buckets.hpp has the rules).

#include "pulse/profile/buckets.hpp"

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "pulse/base/io.hpp"
#include "pulse/base/json_check.hpp"
#include "pulse/base/limits.hpp"

namespace pulse {

namespace {

constexpr const char* kBucketsSchema = "pulse.buckets/v1";
constexpr std::int64_t kMaxBucketsFileBytes = std::int64_t{16} << 20;
constexpr int kMaxBuckets = 1024;
constexpr int kMaxEdge = 1 << 20;

// How pixels and frames become tokens (the file's top-level keys).
struct TokenRule {
  std::int64_t pixels_per_token = 0;  // 0: not given
  std::int64_t frames_per_token = 0;
  bool causal_first_frame = false;
};

// `integer` of JsonChecker, or 0 when absent.
std::int64_t optional_integer(JsonChecker& check, const json& obj, const JsonPath& path,
                              std::string_view key, std::int64_t most) {
  if (!obj.contains(key)) return 0;
  return check.integer(obj, path, key, 1, true, most).value_or(0);
}

// A shape's tokens by the rule, or 0 with the error recorded at `path`.
std::int64_t shape_tokens(JsonChecker& check, const json& shape, const JsonPath& path,
                          const TokenRule& rule, Bucket& out) {
  if (shape.contains("tokens")) {
    if (shape.contains("height") || shape.contains("width") || shape.contains("frames")) {
      check.fail(path, "expected either tokens or a shape (height, width, frames), not both");
      return 0;
    }
    return out.tokens = optional_integer(check, shape, path, "tokens", kMaxBytesPerSample);
  }
  const auto height = check.integer(shape, path, "height", 1, true, kMaxEdge);
  const auto width = check.integer(shape, path, "width", 1, true, kMaxEdge);
  const std::int64_t frames = optional_integer(check, shape, path, "frames", kMaxEdge);
  if (!height || !width || (shape.contains("frames") && frames == 0)) return 0;
  out.height = static_cast<int>(*height);
  out.width = static_cast<int>(*width);
  out.frames = static_cast<int>(frames);
  const std::int64_t p = rule.pixels_per_token;
  if (p == 0) {
    check.fail(path, "a shape in pixels needs the file's pixels_per_token");
    return 0;
  }
  if (*height % p != 0 || *width % p != 0) {
    check.fail(path, fmt::format("expected height and width divisible by pixels_per_token {}, "
                                 "got {} x {}",
                                 p, *height, *width));
    return 0;
  }
  std::int64_t latent_frames = 1;
  if (frames > 0) {
    const std::int64_t q = rule.frames_per_token;
    const std::int64_t counted = rule.causal_first_frame ? frames - 1 : frames;
    if (q == 0 || counted % q != 0) {
      check.fail(path.key("frames"),
                 fmt::format("expected {} divisible by the file's frames_per_token ({}), got {}",
                             rule.causal_first_frame ? "frames - 1" : "frames",
                             q == 0 ? "not given" : std::to_string(q), frames));
      return 0;
    }
    latent_frames = counted / q + (rule.causal_first_frame ? 1 : 0);
  }
  return out.tokens = latent_frames * (*height / p) * (*width / p);
}

TokenRule read_rule(JsonChecker& check, const json& root) {
  TokenRule rule;
  rule.pixels_per_token = optional_integer(check, root, JsonPath{}, "pixels_per_token", kMaxEdge);
  rule.frames_per_token = optional_integer(check, root, JsonPath{}, "frames_per_token", kMaxEdge);
  if (root.contains("causal_first_frame")) {
    rule.causal_first_frame =
        check.boolean(root, JsonPath{}, "causal_first_frame", true).value_or(false);
  }
  return rule;
}

const std::vector<std::string_view> kShapeKeys = {"tokens", "height", "width", "frames"};

void read_buckets(JsonChecker& check, const json& root, const TokenRule& rule, BucketSet& set) {
  const json* list = check.array(root, JsonPath{}, "buckets", true);
  if (!list) return;
  const JsonPath lp = JsonPath{}.key("buckets");
  if (list->empty() || list->size() > kMaxBuckets) {
    check.fail(lp, fmt::format("expected 1 to {} buckets, got {}", kMaxBuckets, list->size()));
    return;
  }
  double total = 0;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& value = (*list)[i];
    const JsonPath path = lp.at(i);
    std::vector<std::string_view> keys = kShapeKeys;
    keys.insert(keys.end(), {"name", "share"});
    if (!check.object(value, path, keys)) continue;
    Bucket b;
    shape_tokens(check, value, path, rule, b);
    const auto share = check.number(value, path, "share", 0.0, true, true, 1e9);
    b.share = share.value_or(0);
    total += b.share;
    if (auto name = check.string(value, path, "name", false)) {
      b.name = *name;
    } else if (b.height > 0) {
      b.name = b.frames > 0 ? fmt::format("{}x{}x{}", b.frames, b.height, b.width)
                            : fmt::format("{}x{}", b.height, b.width);
    } else {
      b.name = fmt::format("{} tokens", b.tokens);
    }
    set.buckets.push_back(std::move(b));
  }
  if (total > 0) {
    for (Bucket& b : set.buckets) b.share /= total;
  }
}

}  // namespace

int BucketSet::largest() const {
  int best = 0;
  for (std::size_t b = 1; b < buckets.size(); ++b) {
    if (buckets[b].tokens > buckets[best].tokens) best = static_cast<int>(b);
  }
  return best;
}

Result<BucketSet> parse_bucket_set(const std::string& text, const std::string& file) {
  auto root = parse_json(text, file, kProfileJsonLimits);
  if (!root) return root.error();
  JsonChecker check(file);
  BucketSet set;
  set.file = file;
  set.sha256 = sha256_hex(text);
  if (!check.object(*root, JsonPath{},
                    {"schema", "name", "source", "share_of", "pixels_per_token", "frames_per_token",
                     "causal_first_frame", "profile_shape", "buckets"})) {
    return check.error();
  }
  const auto schema = check.string(*root, JsonPath{}, "schema");
  if (schema && *schema != kBucketsSchema) {
    check.fail(JsonPath{}.key("schema"),
               fmt::format("expected \"{}\", got \"{}\"", kBucketsSchema, *schema));
  }
  set.name = check.string(*root, JsonPath{}, "name").value_or("");
  set.source = check.string(*root, JsonPath{}, "source").value_or("");
  set.share_of = check.string(*root, JsonPath{}, "share_of").value_or("");
  if (root->contains("share_of") && set.share_of != "samples" && set.share_of != "steps") {
    check.fail(JsonPath{}.key("share_of"),
               fmt::format("expected \"samples\" or \"steps\", got \"{}\"", set.share_of));
  }
  const TokenRule rule = read_rule(check, *root);
  if (const json* shape = check.member(*root, JsonPath{}, "profile_shape", true)) {
    const JsonPath path = JsonPath{}.key("profile_shape");
    Bucket profile;
    if (check.object(*shape, path, kShapeKeys)) {
      set.profile_tokens = shape_tokens(check, *shape, path, rule, profile);
    }
  }
  read_buckets(check, *root, rule, set);
  if (!check.ok()) return check.error();
  for (std::size_t b = 0; b < set.buckets.size(); ++b) {
    const double r = set.ratio(set.buckets[b]);
    if (r < kMinScale || r > kMaxScale) {
      check.fail(JsonPath{}.key("buckets").at(b),
                 fmt::format("expected tokens within {:g} to {:g} times the profile_shape's {}, "
                             "got {} ({:.3g} times)",
                             kMinScale, kMaxScale, set.profile_tokens, set.buckets[b].tokens, r));
    }
  }
  if (!check.ok()) return check.error();
  return set;
}

Result<BucketSet> load_bucket_set(const std::string& path) {
  auto text = read_text_file(path, kMaxBucketsFileBytes, "the buckets file limit, 16 MiB");
  if (!text) return text.error();
  return parse_bucket_set(*text, path);
}

void scale_to_tokens(ModelProfile& model, double ratio) {
  if (ratio == 1) return;
  const auto bytes = [ratio](std::int64_t b) {
    return static_cast<std::int64_t>(std::llround(static_cast<double>(b) * ratio));
  };
  const std::vector<int>& sizes = model.microbatch_sizes;
  const auto rescale = [&](std::vector<double>& times, double attention) {
    const std::vector<double> given = times;
    for (std::size_t i = 0; i < times.size() && i < sizes.size(); ++i) {
      const double b = sizes[i];
      times[i] = (1 - attention) * interpolate_time_at(given, sizes, b * ratio) +
                 attention * interpolate_time_at(given, sizes, b * ratio * ratio);
    }
  };
  for (Layer& l : model.layers) {
    double attention = 0;
    if (l.sequence && l.sequence->heads > 0 && l.forward_flops_per_sample > 0) {
      attention = l.sequence->attention_flops_per_sample / l.forward_flops_per_sample;
    }
    for (auto& times : l.forward_s) rescale(times, attention);
    for (auto& times : l.backward_s) rescale(times, attention);
    l.activation_bytes_per_sample = bytes(l.activation_bytes_per_sample);
    l.output_bytes_per_sample = bytes(l.output_bytes_per_sample);
    l.forward_flops_per_sample *= (1 - attention) * ratio + attention * ratio * ratio;
    if (l.sequence) {
      l.sequence->tokens = std::max<std::int64_t>(1, bytes(l.sequence->tokens));
      l.sequence->attention_flops_per_sample *= ratio * ratio;
    }
  }
  for (Skip& k : model.skips) k.bytes_per_sample = bytes(k.bytes_per_sample);
}

}  // namespace pulse
