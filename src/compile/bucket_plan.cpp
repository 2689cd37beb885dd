// The bucket search (bucket_plan.hpp has it as math).

#include "pulse/compile/bucket_plan.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "compile_internal.hpp"
#include "pulse/compile/plan_options.hpp"

namespace pulse {

using detail::compile_checked;

namespace {

struct Inputs {
  const ModelProfile* model;
  const ClusterProfile* cluster;
  const BucketSet* set;
  PassClock* clock;
};

// One bucket set's plans on one partition, by token count (buckets of the same tokens, as
// 1024 x 960 and 960 x 1024, are the same model) and by the options that fix the partition.
class PlanCache {
 public:
  explicit PlanCache(const Inputs& in) : in_(in) {}

  const Result<CompiledPlan>& at(std::int64_t tokens, const PlanOptions& options) {
    const auto key = std::make_pair(tokens, options.microbatch_size.value_or(0));
    if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    ModelProfile model = *in_.model;
    scale_to_tokens(model, static_cast<double>(tokens) / in_.set->profile_tokens);
    return plans_.emplace(key, compile_checked(model, *in_.cluster, options, *in_.clock))
        .first->second;
  }

 private:
  const Inputs& in_;
  std::map<std::pair<std::int64_t, int>, Result<CompiledPlan>> plans_;
};

// The options that plan a bucket on `made`'s partition: its stage boundaries (none at pp 1),
// degrees, family and modes; the microbatch size searched.
PlanOptions on_partition(const CompiledPlan& made, const ModelProfile& model) {
  PlanOptions o = made.options;
  o.pp = made.pp;
  o.dp = made.dp;
  o.global_batch = made.global_batch;
  o.family = std::string(made.family->name);
  o.cuts.clear();
  const std::vector<LayerId>& first = made.partition.layout.first_layer;
  for (std::size_t s = 1; made.pp > 1 && s + 1 < first.size(); ++s) {
    o.cuts.push_back(model.layers.at(first[s]).name);
  }
  o.microbatch_size.reset();
  o.zero_given = true;
  o.sequence_fixed = true;
  o.progress = nullptr;
  return o;
}

// The fullest device under the memory rule: static state plus its residency peak.
std::int64_t peak_bytes(const CompiledPlan& p) {
  std::int64_t most = 0;
  for (std::size_t d = 0; d < p.static_bytes.size() && d < p.timeline.devices.size(); ++d) {
    most = std::max(most, p.static_bytes[d].total() + p.timeline.devices[d].resident_peak);
  }
  return most;
}

BucketRow row_of(const Bucket& b, const CompiledPlan& p) {
  BucketRow r;
  r.name = b.name;
  r.frames = b.frames;
  r.height = b.height;
  r.width = b.width;
  r.tokens = b.tokens;
  r.share = b.share;
  r.microbatch_size = p.microbatch_size;
  r.num_microbatches = p.num_microbatches;
  r.family = p.family->name;
  r.iteration_s = p.evaluation.iteration_s;
  r.samples_per_s = p.evaluation.samples_per_s;
  r.bubble_ratio = p.evaluation.bubble_ratio;
  r.peak_memory_bytes = peak_bytes(p);
  return r;
}

// One candidate partition, every bucket planned on it.
struct PartitionTry {
  BucketCandidate record;
  std::optional<CompiledPlan> body;  // the largest bucket
  std::vector<BucketRow> rows;
  double weighted_iteration_s = 0;
};

// Every bucket on `made`'s partition. `largest_plan` (candidate (a) only): the largest
// bucket's plan applied to every bucket, whose time each row also states and keeps when
// it is the faster; a bucket of `made_tokens` keeps `made` itself when no slower (its
// partition as the partitioner made it, not as a given cut).
PartitionTry plan_candidate(const Inputs& in, const CompiledPlan& made, std::int64_t made_tokens,
                            const std::string& from,
                            const std::optional<PlanOptions>& largest_plan) {
  PartitionTry c;
  c.record.from = from;
  const PlanOptions options = on_partition(made, *in.model);
  PlanCache cache(in);
  const int largest = in.set->largest();
  for (std::size_t b = 0; b < in.set->buckets.size(); ++b) {
    const Bucket& bucket = in.set->buckets[b];
    const Result<CompiledPlan>& tuned = cache.at(bucket.tokens, options);
    const CompiledPlan* kept = tuned ? &*tuned : nullptr;
    double applied_s = 0;
    if (largest_plan) {
      const Result<CompiledPlan>& applied = cache.at(bucket.tokens, *largest_plan);
      if (applied) applied_s = applied->evaluation.iteration_s;
      if (applied && (!kept || applied_s < kept->evaluation.iteration_s)) kept = &*applied;
    }
    if (bucket.tokens == made_tokens) {  // the plan made for it is what applies to it
      if (largest_plan) applied_s = made.evaluation.iteration_s;
      if (!kept || made.evaluation.iteration_s <= kept->evaluation.iteration_s) kept = &made;
    }
    if (!kept) {
      c.record.reason = fmt::format("bucket {} ({} tokens): {}", bucket.name, bucket.tokens,
                                    tuned.error().message);
      return c;
    }
    BucketRow row = row_of(bucket, *kept);
    row.largest_plan_iteration_s = applied_s;
    c.weighted_iteration_s += bucket.share * row.iteration_s;
    c.rows.push_back(std::move(row));
    if (static_cast<int>(b) == largest) c.body = *kept;
  }
  c.record.feasible = true;
  c.record.weighted_samples_per_s = made.global_batch / c.weighted_iteration_s;
  return c;
}

Result<CompiledPlan> plan_at(const Inputs& in, double ratio, const PlanOptions& options) {
  ModelProfile model = *in.model;
  scale_to_tokens(model, ratio);
  return compile_checked(model, *in.cluster, options, *in.clock);
}

}  // namespace

Result<BucketsCompiled> compile_buckets(const ModelProfile& model, const ClusterProfile& cluster,
                                        const PlanOptions& options, const BucketSet& set,
                                        PassClock& clock) {
  if (auto s = check_plan_options(options); !s) return s.error();
  const Inputs in{&model, &cluster, &set, &clock};
  const Bucket& largest = set.buckets[set.largest()];
  Result<CompiledPlan> for_largest = plan_at(in, set.ratio(largest), options);
  if (!for_largest) {
    return Error{for_largest.error().kind,
                 fmt::format("plan --buckets {}: the largest bucket, {} ({} tokens): {}", set.file,
                             largest.name, largest.tokens, for_largest.error().message)};
  }
  PlanOptions applied = on_partition(*for_largest, model);
  applied.microbatch_size = for_largest->microbatch_size;
  std::vector<PartitionTry> candidates;
  candidates.push_back(plan_candidate(in, *for_largest, largest.tokens, "largest", applied));
  double average = 0;
  for (const Bucket& b : set.buckets) average += b.share * set.ratio(b);
  if (average != set.ratio(largest)) {
    if (Result<CompiledPlan> for_average = plan_at(in, average, options)) {
      candidates.push_back(plan_candidate(in, *for_average, 0, "average", std::nullopt));
    } else {
      candidates.push_back({{"average", false, false, 0, for_average.error().message}, {}, {}, 0});
    }
  }
  int kept = -1;
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    if (!candidates[c].record.feasible) continue;
    if (kept < 0 || candidates[c].weighted_iteration_s < candidates[kept].weighted_iteration_s) {
      kept = static_cast<int>(c);
    }
  }
  if (kept < 0) {
    return infeasible_error(fmt::format("plan --buckets {}: no partition serves every bucket: {}",
                                        set.file, candidates[0].record.reason));
  }
  PartitionTry& chosen = candidates[kept];
  chosen.record.chosen = true;
  BucketsCompiled out{std::move(*chosen.body), model, {}};
  scale_to_tokens(out.body_model, set.ratio(largest));
  out.body.given = for_largest->given;
  PlanBuckets& s = out.section;
  s.file = set.file;
  s.name = set.name;
  s.source = set.source;
  s.share_of = set.share_of.empty() ? "samples" : set.share_of;
  s.profile_tokens = set.profile_tokens;
  s.body = set.largest();
  s.partition_from = chosen.record.from;
  s.weighted_iteration_s = chosen.weighted_iteration_s;
  s.weighted_samples_per_s = chosen.record.weighted_samples_per_s;
  // 0 when the largest bucket's plan, applied, leaves a bucket it does not fit.
  double applied_s = 0;
  bool applies = candidates[0].record.feasible;
  for (const BucketRow& r : candidates[0].rows) {
    applied_s += r.share * r.largest_plan_iteration_s;
    applies = applies && r.largest_plan_iteration_s > 0;
  }
  s.largest_plan_samples_per_s = applies ? out.body.global_batch / applied_s : 0;
  for (PartitionTry& c : candidates) s.candidates.push_back(c.record);
  s.rows = std::move(chosen.rows);
  // Every row states the largest bucket's plan applied to it, whichever partition was kept.
  for (std::size_t r = 0; r < s.rows.size() && r < candidates[0].rows.size(); ++r) {
    s.rows[r].largest_plan_iteration_s = candidates[0].rows[r].largest_plan_iteration_s;
  }
  return out;
}

}  // namespace pulse
