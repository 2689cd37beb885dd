// Resolution buckets (`plan --buckets FILE`, docs/buckets.md): the shapes a diffusion model
// trains on, each with its share, and the model profile at a bucket's shape, derived from the
// profile's own shape (not measured).
//
// A bucket's tokens: an image of H x W pixels has (H / p) x (W / p) tokens, p the file's
// `pixels_per_token` (the VAE's downsampling times the patch size); a video of F frames has
// that times its latent frames, F / q, or 1 + (F - 1) / q with `causal_first_frame` (q the
// file's `frames_per_token`); or the bucket gives `tokens` itself. Its ratio r is its tokens
// over the tokens of the file's `profile_shape` (the shape the model profile was made at).
//
// The model at ratio r (scale_to_tokens), per layer, with a = the share of its forward FLOPs
// in attention (its `sequence.attention_flops_per_sample` over `forward_flops_per_sample`;
// 0 for a layer without `sequence`, whose attention, if any, the profile does not name):
//
//   time(b)          = (1 - a) x T(b x r) + a x T(b x r^2)
//                      T the profile's times at a real microbatch size (interpolate_time's
//                      rule): the token-wise part does the work of b x r samples, the
//                      attention part, quadratic in tokens, that of b x r^2
//   activation, output bytes per sample, skip bytes per sample      x r (rounded)
//   forward FLOPs  x ((1 - a) r + a r^2); sequence tokens x r; attention FLOPs x r^2
//
// Carried tensors (time and text embeddings) keep their bytes: they do not depend on the
// image's shape. Parameters are unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pulse/base/result.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

/// One shape the model trains on.
struct Bucket {
  std::string name;
  /// As the file gave it: 0 where it gave `tokens` (and 0 frames for an image).
  int frames = 0;
  int height = 0;
  int width = 0;
  std::int64_t tokens = 0;  ///< Its token count (given, or from its shape).
  double share = 0;         ///< Normalized: the shares of a set sum to 1.
};

/// A `pulse.buckets/v1` file, checked (docs/buckets.md, "The file").
struct BucketSet {
  std::string file;
  std::string sha256;  ///< Of the file's bytes.
  std::string name;
  std::string source;
  /// "samples" or "steps": what a share is a share of. With one global batch for every
  /// bucket (the rule the planner keeps) the two are the same weights.
  std::string share_of;
  std::int64_t profile_tokens = 0;  ///< The tokens of the profile's shape.
  std::vector<Bucket> buckets;      ///< As listed.

  /// A bucket's tokens over the profile's.
  double ratio(const Bucket& b) const {
    return static_cast<double>(b.tokens) / static_cast<double>(profile_tokens);
  }
  /// The first bucket of the most tokens.
  int largest() const;
};

/// Reads and checks a buckets file; an input error names the file and the JSON path of every
/// problem (a shape not divisible into tokens, a share not positive, an unknown key).
Result<BucketSet> load_bucket_set(const std::string& path);
/// The same from text; `file` names it in messages.
Result<BucketSet> parse_bucket_set(const std::string& text, const std::string& file);

/// The model at `ratio` times its tokens (the header's rules). `ratio` is positive and finite;
/// at 1 the model is unchanged.
void scale_to_tokens(ModelProfile& model, double ratio);

}  // namespace pulse
