// The memo's keys and its answers (see answer_memo.hpp). The hashes mix a few fields that
// tell requests of one plan apart (M, the budget, the work limits, the stage times); the
// comparison that decides is the keys' defaulted operator==.

#include "answer_memo.hpp"

#include <functional>
#include <limits>

#include "pulse/schedule/list_schedule.hpp"

namespace pulse::detail {

namespace {

std::size_t mix(std::size_t seed, std::size_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

template <class T>
std::size_t mix_in(std::size_t seed, const T& value) {
  return mix(seed, std::hash<T>{}(value));
}

std::size_t hash_model(const PipelineModel& m) {
  std::size_t h = mix_in(m.stages.size(), m.transfers.size());
  for (const StageCost& s : m.stages) {
    h = mix_in(mix_in(h, s.forward_s), s.backward_s);
    h = mix_in(h, s.activation_bytes);
  }
  for (LayerId l : m.layout.first_layer) h = mix_in(h, l);
  return h;
}

std::size_t hash_room(std::size_t h, const std::vector<std::int64_t>& room) {
  for (std::int64_t r : room) h = mix_in(h, r);
  return h;
}

}  // namespace

ScheduleKey schedule_key(const ScheduleRequest& request) {
  ScheduleKey key{request, *request.model};
  key.request.model = nullptr;
  key.request.memo = nullptr;
  return key;
}

std::size_t hash_of(const ScheduleKey& key) {
  const ScheduleRequest& r = key.request;
  std::size_t h = mix_in(hash_model(key.model), r.num_microbatches);
  h = mix_in(mix_in(h, r.activation_budget), r.memory_capacity);
  h = mix_in(mix_in(h, r.max_evaluations), r.max_order_evaluations);
  h = mix_in(mix_in(mix_in(h, r.split_backward), r.probe_smaller_budget), r.weighs_searched);
  for (const MemoryBreakdown& m : r.static_bytes) h = mix_in(h, m.total());
  return h;
}

std::size_t hash_of(const RoomKey& key) {
  const std::size_t h =
      mix_in(mix_in(hash_model(key.model), key.num_microbatches), key.split_backward);
  return hash_room(h, key.room);
}

std::size_t hash_of(const LadderKey& key) {
  return mix_in(hash_of(key.open), key.wide_list);
}

std::size_t hash_of(const VAutoKey& key) {
  return mix_in(mix_in(mix_in(std::size_t{0}, key.pp), key.num_microbatches), key.budget);
}

std::optional<ScheduleAnswer> recall_answer(const ScheduleRequest& request) {
  if (request.memo == nullptr || request.model == nullptr) return std::nullopt;
  return request.memo->tables().answers.recall(schedule_key(request));
}

void remember_answer(const ScheduleRequest& request, const ScheduleAnswer& answer) {
  if (request.memo == nullptr || request.model == nullptr) return;
  if (answer.status == SolveStatus::time_limit) return;
  request.memo->tables().answers.keep(schedule_key(request), answer);
}

double recall_bound(ScheduleMemo* memo, const RoomKey& key,
                    const std::function<double()>& compute) {
  if (memo == nullptr) return compute();
  if (auto kept = memo->tables().bounds.recall(key)) return *kept;
  const double bound = compute();
  memo->tables().bounds.keep(key, bound);
  return bound;
}

RoomKey order_replays_key(const PipelineModel& model, bool split_backward, int num_microbatches) {
  return {model, split_backward, num_microbatches, {}};
}

void keep_one_f_one_b(const ScheduleRequest& r, const std::vector<int>& limits,
                      const Timeline& replay) {
  if (!r.memo || limits != default_inflight(r.model->layout, r.num_microbatches)) return;
  RoomKey key = order_replays_key(*r.model, r.split_backward, r.num_microbatches);
  auto& table = r.memo->tables().one_f_one_b_replays;
  if (table.recall(key)) return;
  table.keep(std::move(key), std::make_shared<const OrderReplay>(
                                 published_replay(PublishedSchedule::one_f_one_b, replay)));
}

}  // namespace pulse::detail

namespace pulse {

PublishedReplay published_replay(PublishedSchedule which, const Timeline& t) {
  PublishedReplay o{which, t.makespan_s, {}, {}};
  for (const DeviceTimeline& d : t.devices) {
    o.resident_peak.push_back(d.resident_peak);
    o.last_end_s.push_back(d.ops.empty() ? -std::numeric_limits<double>::infinity()
                                         : d.ops.back().busy_until_s);
  }
  return o;
}

std::optional<PublishedReplay> kept_published_replay(ScheduleMemo& memo, const PipelineModel& model,
                                                     int num_microbatches, bool split_backward,
                                                     PublishedSchedule which) {
  if (which == PublishedSchedule::one_f_one_b) {
    const auto kept = memo.tables().one_f_one_b_replays.recall(
        detail::order_replays_key(model, split_backward, num_microbatches));
    if (!kept) return std::nullopt;
    return **kept;
  }
  const auto kept = memo.tables().order_replays.recall(
      detail::order_replays_key(model, split_backward, num_microbatches));
  if (!kept) return std::nullopt;
  for (const PublishedReplay& o : **kept) {
    if (o.which == which) return o;
  }
  return std::nullopt;
}

}  // namespace pulse
