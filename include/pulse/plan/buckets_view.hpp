// How every view names a plan's buckets (plan.hpp's PlanBuckets, docs/buckets.md): the plan's
// summary, `simulate`'s report, `diff` and the HTML report print the same lines.
#pragma once

#include <string>
#include <vector>

#include "pulse/plan/plan.hpp"

namespace pulse {

/// "buckets NAME (N buckets, shares of samples; partition made for the largest bucket):
/// weighted X samples/s; the largest bucket's plan applied to every bucket Y samples/s".
std::string buckets_headline(const PlanBuckets& buckets);

/// The rows' header and one line per bucket: name, tokens, share, microbatching, family,
/// iteration, throughput, peak memory, and the largest bucket's plan's iteration on it.
std::vector<std::string> bucket_lines(const PlanBuckets& buckets);

/// One bucket in a cell: "microbatch 2 x 32, 4.926 s".
std::string bucket_cell(const BucketRow& row);

}  // namespace pulse
