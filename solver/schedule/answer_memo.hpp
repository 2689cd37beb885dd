// The memo's tables and keys (internal; the memo itself is include/pulse/schedule/
// schedule_memo.hpp). Each key is what one cached computation depends on, compared field by
// field by a defaulted operator==: the request, the pipeline model and what they hold compare
// every member they have, so a member added to any of them is compared as soon as it exists
// (no byte image, no sizeof guard). A hash of a few fields skips most comparisons; equal keys
// hash alike, and a field the hash leaves out only costs a comparison. See answer_memo.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "list_outcomes.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/schedule/published.hpp"
#include "pulse/schedule/schedule_memo.hpp"
#include "pulse/schedule/synthesize.hpp"
#include "staircase.hpp"
#include "v_auto.hpp"

namespace pulse::detail {

/// A whole synthesis (synthesize_schedule): every field of the request, and its model by
/// value.
struct ScheduleKey {
  ScheduleRequest request;  ///< With its model and memo pointers null.
  PipelineModel model;
  bool operator==(const ScheduleKey&) const = default;
};

/// What a computation over one pipeline's memory depends on: the model, the split backward,
/// M and each device's room for activations (capacity less static state, within the
/// budget). The lower bound (a configuration's screen and full synthesis share it) and the
/// published schedules' pool (v_seeds.hpp) are keyed by it.
struct RoomKey {
  PipelineModel model;
  bool split_backward = false;
  int num_microbatches = 0;
  std::vector<std::int64_t> room;
  bool operator==(const RoomKey&) const = default;
};

/// The ladder's staircase (ladder_search.cpp): the request without what the staircase does
/// not depend on (its budget, its memory curve, its order search's work limit, whether it
/// probes a smaller budget, the integer program's limits, the CPU-time limit), and whether
/// the policy search at the wide room adds its list schedules, which it does.
struct LadderKey {
  ScheduleKey open;
  bool wide_list = false;
  bool operator==(const LadderKey&) const = default;
};

/// V-auto's candidates (v_auto.hpp): P, M and the budget in stage activations.
struct VAutoKey {
  int pp = 0;
  int num_microbatches = 0;
  int budget = 0;
  bool operator==(const VAutoKey&) const = default;
};

ScheduleKey schedule_key(const ScheduleRequest& request);

std::size_t hash_of(const ScheduleKey& key);
std::size_t hash_of(const RoomKey& key);
std::size_t hash_of(const LadderKey& key);
std::size_t hash_of(const VAutoKey& key);

/// One table: the last few values computed, by key.
template <class Key, class Value>
class MemoTable {
 public:
  /// Keeps the last `kept` values.
  explicit MemoTable(std::size_t kept = 4) : kept_most_(kept) {}

  /// The value kept for a key equal to `key`, counted as recalled; else nothing, counted as
  /// computed (the caller computes it next).
  std::optional<Value> recall(const Key& key) {
    const std::size_t hash = hash_of(key);
    const std::lock_guard<std::mutex> hold(lock_);
    for (const Entry& e : kept_) {
      if (e.hash == hash && e.key == key) {
        ++counts_.recalled;
        return e.value;
      }
    }
    ++counts_.computed;
    return std::nullopt;
  }

  void keep(Key key, Value value) {
    const std::size_t hash = hash_of(key);
    const std::lock_guard<std::mutex> hold(lock_);
    kept_.push_back(Entry{hash, std::move(key), std::move(value)});
    if (kept_.size() > kept_most_) kept_.pop_front();
  }

  ScheduleMemo::Counts counts() const {
    const std::lock_guard<std::mutex> hold(lock_);
    return counts_;
  }

 private:
  struct Entry {
    std::size_t hash = 0;
    Key key;
    Value value;
  };
  std::size_t kept_most_;
  mutable std::mutex lock_;
  std::deque<Entry> kept_;
  ScheduleMemo::Counts counts_;
};

struct LadderCandidates;  // ladder_search.cpp

/// A published V order replayed (synthesize.cpp, published_orders; PublishedReplay,
/// synthesize.hpp). Its figures depend on the model, M and the split alone, so the job's
/// memo keeps them by RoomKey with no room, and a synthesis at a budget they do not fit (the
/// memory curve's) neither generates nor replays them.
using OrderReplay = PublishedReplay;

/// The memo's key for the published orders' replays of a model, M and split: no room, as
/// they depend on none (published_orders keeps them by it, kept_published_replay reads them).
RoomKey order_replays_key(const PipelineModel& model, bool split_backward, int num_microbatches);

/// Orders' replays kept: a few numbers per device each.
inline constexpr std::size_t kKeptOrderReplays = 64;

/// Bounds kept: a number and a key each, and a level asks for one per configuration and
/// family of each alternative (a few hundred at most on the shipped profiles).
inline constexpr std::size_t kKeptBounds = 512;

/// A handful of each, as the equal requests of one plan come close together; but the bounds
/// of every configuration a level 0 screen asks for (synthesis_lower_bound), to be found
/// again when they are synthesized.
struct MemoTables {
  MemoTable<ScheduleKey, ScheduleAnswer> answers;
  MemoTable<RoomKey, double> bounds{kKeptBounds};
  MemoTable<LadderKey, std::shared_ptr<const LadderCandidates>> ladders;
  MemoTable<RoomKey, std::shared_ptr<const std::vector<StairMember>>> seeds;
  MemoTable<VAutoKey, std::shared_ptr<const VAutoSearch>> v_auto_pools;
  MemoTable<RoomKey, std::shared_ptr<const std::vector<OrderReplay>>> order_replays{
      kKeptOrderReplays};
  /// 1F1B's replay, by the same key as order_replays: a synthesis's first list schedule
  /// where it is 1F1B's (synthesize.cpp, keep_one_f_one_b).
  MemoTable<RoomKey, std::shared_ptr<const OrderReplay>> one_f_one_b_replays{kKeptOrderReplays};
  ListOutcomeTable list_outcomes;
};

/// The answer `request.memo` keeps for an equal request; nothing without a memo.
std::optional<ScheduleAnswer> recall_answer(const ScheduleRequest& request);

/// Keeps `answer` for `request` in its memo (not when its status is time_limit: the wall
/// clock cut it short, and another run may get further). synthesize_schedule keeps it
/// without its timeline, and replays that on a recall.
void remember_answer(const ScheduleRequest& request, const ScheduleAnswer& answer);

/// Where the first list schedule of a synthesis with a bound (a plan's own, not the memory
/// curve's points at a budget) is 1F1B's own (published.cpp, one_f_one_b: `limits` are the
/// default in-flight limits, which no device's memory lowered, and the policy is
/// backward first), its replay is the one the plan's certificate would make for 1F1B (the
/// same schedule and model: the same timeline, to the bit; its figures depend on no
/// memory): kept in the request's memo for it (kept_published_replay). At pp 1024 over 2048
/// layers the certificate made it again, 0.9 s of list schedule and 0.3 s of replay.
void keep_one_f_one_b(const ScheduleRequest& request, const std::vector<int>& limits,
                      const Timeline& replay);

/// The lower bound `memo` keeps for `key`, else `compute()`'s, then kept.
double recall_bound(ScheduleMemo* memo, const RoomKey& key, const std::function<double()>& compute);

}  // namespace pulse::detail
