// `plan --buckets` (docs/buckets.md): one partition for every bucket of a BucketSet
// (profile/buckets.hpp), each bucket planned on it with its own microbatch size and schedule.
//
// The search, for a global batch G that every bucket keeps (so a share of samples and a share
// of steps are the same weights w_b, summing to 1):
//
//   (a) the plan made for the largest bucket (its model at the largest bucket's shape);
//   (b) the plan made for the share-weighted average bucket (tokens sum w_b x tokens_b);
//   for each, its partition (stage boundaries, pipeline and data-parallel degrees, family,
//   ZeRO stage, recomputation, precision, sequence layout) fixed, every bucket b planned on
//   it with the microbatch size searched, giving iteration T_b; the candidate is feasible
//   when every bucket fits (each plan is held to the memory rule);
//   weighted iteration T = sum_b w_b T_b, weighted throughput G / T;
//   kept: the feasible candidate of the higher weighted throughput, (a) on a tie.
//
// Never worse than the largest bucket's plan applied to every bucket (its partition and its
// microbatch size, each bucket's schedule synthesized on that bucket's costs, time L_b):
// under (a) each bucket keeps the faster of its re-tuned plan and L_b, so T <= sum w_b L_b,
// and (b) is kept only when faster still.
#pragma once

#include "pulse/base/result.hpp"
#include "pulse/compile/compile.hpp"
#include "pulse/compile/pass_clock.hpp"
#include "pulse/plan/plan.hpp"
#include "pulse/profile/buckets.hpp"

namespace pulse {

/// What compile_buckets found: the plan the document's body states (the largest bucket on the
/// partition kept), the model it was made from, and the plan's `buckets` section.
struct BucketsCompiled {
  CompiledPlan body;
  ModelProfile body_model;
  PlanBuckets section;
};

/// The bucket search above. Errors: the largest bucket's own plan fails (nothing fits), or
/// every candidate leaves a bucket that does not fit.
Result<BucketsCompiled> compile_buckets(const ModelProfile& model, const ClusterProfile& cluster,
                                        const PlanOptions& options, const BucketSet& set,
                                        PassClock& clock);

}  // namespace pulse
