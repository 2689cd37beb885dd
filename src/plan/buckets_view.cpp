#include "pulse/plan/buckets_view.hpp"

#include <fmt/format.h>

#include "pulse/base/units.hpp"

namespace pulse {

std::string buckets_headline(const PlanBuckets& b) {
  return fmt::format(
      "buckets {} ({} buckets, shares of {}; partition made for the {} bucket): weighted {:.4g} "
      "samples/s; the largest bucket's plan applied to every bucket {:.4g} samples/s",
      b.name, b.rows.size(), b.share_of, b.partition_from, b.weighted_samples_per_s,
      b.largest_plan_samples_per_s);
}

std::vector<std::string> bucket_lines(const PlanBuckets& b) {
  std::vector<std::string> out = {fmt::format(
      "{:<14} {:>9} {:>6}  {:>12}  {:<12} {:>11} {:>10} {:>10}  {:>14}", "bucket", "tokens",
      "share", "microbatch", "family", "iteration", "samples/s", "peak", "largest plan's")};
  for (const BucketRow& r : b.rows) {
    out.push_back(fmt::format(
        "{:<14} {:>9} {:>6.3f}  {:>12}  {:<12} {:>11} {:>10.4g} {:>10}  {:>14}", r.name, r.tokens,
        r.share, fmt::format("{} x {}", r.microbatch_size, r.num_microbatches), r.family,
        format_seconds(r.iteration_s), r.samples_per_s, format_bytes(r.peak_memory_bytes),
        r.largest_plan_iteration_s > 0 ? format_seconds(r.largest_plan_iteration_s)
                                       : "does not fit"));
  }
  return out;
}

std::string bucket_cell(const BucketRow& r) {
  return fmt::format("microbatch {} x {}, {}", r.microbatch_size, r.num_microbatches,
                     format_seconds(r.iteration_s));
}

}  // namespace pulse
