#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>

#include "pulse/cost/memory.hpp"
#include "pulse/schedule/list_schedule.hpp"
#include "pulse/simulate/engine.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse {

std::vector<int> default_inflight(const StageLayout& layout, int num_microbatches) {
  // A microbatch admitted by device d's first stage returns for its last backward after
  // passing every later stage; to keep d busy meanwhile, admit about as many microbatches
  // as there are stages from d's first to the end, divided by the stages d itself runs
  // (1F1B's "P - s" warm-up on a chain; about P - d on the V).
  std::vector<int> k(layout.num_devices, 1);
  for (DeviceId d = 0; d < layout.num_devices; ++d) {
    const std::vector<StageId> mine = layout.stages_on(d);
    if (mine.empty()) continue;  // an idle device (possible in hand-made layouts)
    const int span = layout.num_stages() - mine.front();
    const int per_device = static_cast<int>(mine.size());
    k[d] = std::clamp((span + per_device - 1) / per_device, 1, num_microbatches);
  }
  return k;
}

// Weight-gradient ops rank below every other kind whatever the search assigns the others
// (ranks 0..3 per device): they are what fills bubbles.
constexpr int kWeightRank = 1000;

ListPolicy ListPolicy::backward_first(int num_stages) {
  return ListPolicy{std::vector<int>(num_stages, 1),
                    std::vector<int>(num_stages, 0),
                    std::vector<int>(num_stages, kWeightRank),
                    {},
                    false};
}

ListPolicy ListPolicy::forward_first(int num_stages) {
  return ListPolicy{std::vector<int>(num_stages, 0),
                    std::vector<int>(num_stages, 1),
                    std::vector<int>(num_stages, kWeightRank),
                    {},
                    false};
}

namespace {

// Candidate order: earliest start, then the policy's rank, then the oldest microbatch, then
// the later stage, then the lower device. The four after the start are packed into one
// word, 16 bits each, most significant first, so that a comparison is a double's and an
// integer's (the tournament and each device's best compare keys at every step).
struct Key {
  double at;
  std::uint64_t order;

  Key(double start, int rank, const Op& op, DeviceId d)
      : at(start),
        order(static_cast<std::uint64_t>(rank + kRankOffset) << 48 |
              static_cast<std::uint64_t>(op.mb) << 32 |
              static_cast<std::uint64_t>(kField - 1 - op.stage) << 16 |
              static_cast<std::uint64_t>(d)) {}
  friend bool operator<(const Key& a, const Key& b) {
    return a.at < b.at || (a.at == b.at && a.order < b.order);
  }

  // Each field's range: the limits (base/limits.hpp) keep microbatches, stages and devices
  // below 2^16, and ListScheduler checks them (check_key_fields) with the ranks.
  static constexpr std::int64_t kField = std::int64_t{1} << 16;
  static constexpr int kRankOffset = 1 << 15;
  static bool fits(int rank) { return rank >= -kRankOffset && rank < kRankOffset; }
};

int rank_of(const ListPolicy& p, const Op& op) {
  switch (op.kind) {
    case OpKind::forward:
      return p.forward_rank[op.stage];
    case OpKind::backward_weight:
      return p.weight_rank[op.stage];
    default:
      return p.backward_rank[op.stage];
  }
}

}  // namespace

Schedule gpipe_schedule(const PipelineModel& model, int num_microbatches, bool split_backward) {
  Schedule s;
  s.policy = "gpipe";
  s.split_backward = split_backward;
  const OpKind back = split_backward ? OpKind::backward_input : OpKind::backward;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    const std::vector<StageId> stages = model.layout.stages_on(d);
    std::vector<Op> ops;
    for (int m = 0; m < num_microbatches; ++m) {
      for (StageId st : stages) ops.push_back({OpKind::forward, st, m});
    }
    for (int m = 0; m < num_microbatches; ++m) {
      for (auto st = stages.rbegin(); st != stages.rend(); ++st) {
        ops.push_back({back, *st, m});
        if (split_backward) ops.push_back({OpKind::backward_weight, *st, m});
      }
    }
    s.device_ops.push_back(std::move(ops));
  }
  return s;
}

Schedule list_schedule(const PipelineModel& model, int num_microbatches,
                       const std::vector<int>& inflight_limit, bool split_backward) {
  return list_schedule(model, num_microbatches, inflight_limit, split_backward,
                       ListPolicy::backward_first(model.layout.num_stages()));
}

namespace {

// The list scheduler's state. Each device's best candidate is cached and recomputed only
// when something that can change it happened: the device ran an op (its free time and its
// queue moved) or an op completed the inputs of one of its candidates.
class ListScheduler {
 public:
  ListScheduler(const PipelineModel& model, int M, const std::vector<int>& limits, bool split,
                const ListPolicy& policy, bool record_ties)
      : record_ties_(record_ties && !policy.active),
        model_(model),
        num_microbatches_(M),
        limits_(limits),
        split_(split),
        policy_(policy),
        engine_(model, M, /*record_sends=*/false),
        next_f_(model.layout.num_stages(), 0),
        next_b_(model.layout.num_stages(), 0),
        next_w_(model.layout.num_stages(), 0),
        open_(model.layout.num_stages(), 0),
        queues_(model.num_devices()),
        best_(model.num_devices()),
        listed_(record_ties_ ? model.num_devices() : 0),
        checked_(model.num_devices(), 0),
        out_of_(model.layout.num_stages()),
        into_(model.layout.num_stages()) {
    check_key_fields();
    init_inputs();
    while (leaves_ < model.num_devices()) leaves_ *= 2;
    winner_.assign(2 * static_cast<std::size_t>(leaves_), -1);
    for (DeviceId d = 0; d < model.num_devices(); ++d) {
      queues_[d].stages = model.layout.stages_on(d);
      queues_[d].admitting = queues_[d].stages.empty() ? -1 : queues_[d].stages.front();
      refresh(d);
    }
  }

  const std::vector<int>& checked() const { return checked_; }

  // Per device, the memory rule's residency peak of the run, from the engine's times: what
  // a replay's Timeline says (resident_peak), from the same helper.
  std::vector<std::int64_t> resident_peaks() const {
    std::vector<std::int64_t> peaks(model_.num_devices(), 0);
    detail::MemoryRuns scratch;
    for (DeviceId d = 0; d < model_.num_devices(); ++d) {
      peaks[d] = residency_of(model_, engine_, d, num_microbatches_, scratch).peak_bytes;
    }
    return peaks;
  }

  ListTies ties() const {
    ListTies out;
    out.complete = record_ties_ && !zero_length_;
    if (!out.complete) return out;
    for (std::uint64_t p : pairs_.table)
      if (p != 0) out.pairs.push_back(p - 1);
    std::sort(out.pairs.begin(), out.pairs.end());
    return out;
  }

  // The run, recorded into `replay` as it goes where one is given (ListReplay).
  Schedule run(double* makespan_s, ListStop* stop, ListReplay* replay) {
    const int S = model_.layout.num_stages(), P = model_.num_devices();
    Schedule schedule;
    schedule.device_ops.assign(P, {});
    for (DeviceId d = 0; d < P; ++d) {
      schedule.device_ops[d].reserve(queues_[d].stages.size() * num_microbatches_ *
                                     (split_ ? 3 : 2));
    }
    schedule.split_backward = split_;
    const std::size_t total = static_cast<std::size_t>(S) * num_microbatches_ * (split_ ? 3 : 2);
    double makespan = 0;
    std::vector<DeviceId> dirty;
    const bool may_stop = stop && stop->at < std::numeric_limits<double>::infinity();
    std::vector<double> left = may_stop ? compute_left() : std::vector<double>{};
    Timeline* timeline = replay ? &replay->timeline : nullptr;
    const bool whole = !replay || !replay->last_ops_only;
    if (timeline) {
      *timeline = Timeline{};
      timeline->devices.resize(P);
      for (DeviceId d = 0; d < P && whole; ++d) {
        timeline->devices[d].ops.reserve(schedule.device_ops[d].capacity());
      }
    }
    // With the last ops alone, their bookkeeping side by side (LastOpsRecorder).
    detail::LastOpsRecorder lasts(timeline && !whole ? P : 0);
    for (std::size_t done = 0; done < total; ++done) {
      const DeviceId d = winner_[1];
      if (d < 0) throw std::logic_error("list_schedule: no operation is ready (deadlock)");
      const Op op = best_[d]->second;
      // The key's time is ready_at's (nothing on d or its inputs moved since it was computed).
      const TimedOp ran = engine_.execute_at(op, best_[d]->first.at);
      makespan = std::max(makespan, ran.busy_until_s);
      if (!(ran.end_s > ran.start_s)) zero_length_ = true;
      if (may_stop && cannot_end_before(stop->at, ran.busy_until_s, left[d] -= compute(op))) {
        stop->stopped = true;
        return Schedule{};
      }
      schedule.device_ops[d].push_back(op);
      if (timeline) {
        if (whole) {
          detail::record_op(*timeline, d, ran);
        } else {
          lasts.record(d, ran);
        }
      }
      advance(d, op);
      dirty.assign(1, d);
      deliver_outputs(op, dirty);  // the active rule's consumers join d here
      if (dirty.size() > 1) {
        std::sort(dirty.begin(), dirty.end());
        dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());
      }
      for (DeviceId e : dirty) refresh(e);
    }
    schedule.policy = "list";
    if (makespan_s) *makespan_s = makespan;
    if (timeline && !whole) lasts.put(*timeline);
    if (timeline) {
      detail::finish_timeline(model_, engine_, num_microbatches_, *replay->static_bytes,
                              replay->peaks, *timeline);
      if (!whole) keep_last_ops(*timeline);
    }
    return schedule;
  }

 private:
  struct DeviceQueue {
    std::vector<StageId> stages;
    StageId admitting = 0;  // the device's first stage: a microbatch enters the device there
    int inflight = 0;
  };

  double compute(const Op& op) const { return engine_.compute_time(op); }

  // Every key's fields within their 16 bits (Key).
  void check_key_fields() const {
    const auto field = [](std::int64_t n) { return n >= 0 && n < Key::kField; };
    if (!field(num_microbatches_) || !field(model_.layout.num_stages()) ||
        !field(model_.num_devices())) {
      throw std::invalid_argument("list_schedule: 2^16 or more microbatches, stages or devices");
    }
    for (const std::vector<int>* ranks :
         {&policy_.forward_rank, &policy_.backward_rank, &policy_.weight_rank}) {
      for (int rank : *ranks) {
        if (!Key::fits(rank)) throw std::invalid_argument("list_schedule: a rank beyond +-2^15");
      }
    }
  }

  // Per device: the compute of every op it runs (ListStop).
  std::vector<double> compute_left() const {
    std::vector<double> left(model_.num_devices(), 0.0);
    const OpKind back = split_ ? OpKind::backward_input : OpKind::backward;
    for (StageId s = 0; s < model_.layout.num_stages(); ++s) {
      double one = compute({OpKind::forward, s, 0}) + compute({back, s, 0});
      if (split_) one += compute({OpKind::backward_weight, s, 0});
      left[model_.layout.device[s]] += one * num_microbatches_;
    }
    return left;
  }

  // Whether a device free at `free` with `left` seconds of compute to run ends at `at` or
  // later, beyond the rounding of the sums (ListStop).
  static bool cannot_end_before(double at, double free, double left) {
    return (free + left) * (1 - ListStop::kRoundingMargin) >= at;
  }

  // Device d's candidates, its best, and the pairs its ranks decide, from scratch: after d
  // ran an op (its free time and queue moved), or at the start.
  void refresh(DeviceId d) {
    const OpKind back = split_ ? OpKind::backward_input : OpKind::backward;
    const DeviceQueue& q = queues_[d];
    best_[d].reset();
    // Kept: for the active rule's pass over them, or as d's list, which add_candidate
    // extends until d runs again.
    std::vector<std::pair<Key, Op>>& kept = record_ties_ ? listed_[d] : candidates_;
    const bool keep = policy_.active || record_ties_;
    if (keep) kept.clear();
    const double free = engine_.device_free(d);
    // Inlined: GCC kept it a call per candidate, about 5% of a tuned plan's time.
    auto consider = [&](const Op& op) __attribute__((always_inline)) {
      const double ready = ready_of(free, op);
      if (std::isnan(ready)) return;
      const Key key(ready, rank_of(policy_, op), op, d);
      if (keep) kept.push_back({key, op});
      if (!best_[d] || key < best_[d]->first) best_[d] = {key, op};
    };
    for (StageId s : q.stages) {
      const bool admits = s == q.admitting;
      if (admits && next_f_[s] < num_microbatches_) checked_[d] = std::max(checked_[d], q.inflight);
      if (next_f_[s] < num_microbatches_ && room(d, s)) {
        consider(Op{OpKind::forward, s, next_f_[s]});
      }
      if (next_b_[s] < next_f_[s]) consider(Op{back, s, next_b_[s]});
      if (split_ && next_w_[s] < next_b_[s]) consider(Op{OpKind::backward_weight, s, next_w_[s]});
    }
    if (policy_.active && best_[d]) prefer_by_rank(d);
    if (record_ties_ && best_[d] && kept.size() > 1) record_ties(kept, best_[d]->first.at);
    replay_match(d);
  }

  // Whether device d's stage s may take its next forward: below d's in-flight limit where a
  // microbatch enters d, else within the stage's window.
  bool room(DeviceId d, StageId s) const {
    const DeviceQueue& q = queues_[d];
    return s == q.admitting ? q.inflight < limits_[d] : window_open(s);
  }

  // `op`, the next op of its stage and kind, just got its last input, on device e, which has
  // not run an op since its last refresh: its free time, queue and the inputs of its
  // candidates are as they were, so a refresh would find the candidates it found then, and
  // `op`. So `op` joins them: it is e's best if its key is less, and with the plain rule the
  // pairs a refresh would add are op's with the candidates tied at the earliest time when
  // op starts then too (the pairs among those were recorded when they tied). The active
  // rule weighs every candidate against the earliest one's end: e is refreshed instead.
  void add_candidate(DeviceId e, const Op& op, std::vector<DeviceId>& dirty) {
    if (policy_.active) {
      dirty.push_back(e);
      return;
    }
    if (op.kind == OpKind::forward && !room(e, op.stage)) return;
    const Key key(ready_of(engine_.device_free(e), op), rank_of(policy_, op), op, e);
    if (record_ties_) {
      std::vector<std::pair<Key, Op>>& listed = listed_[e];
      if (best_[e] && key.at == best_[e]->first.at) {
        for (const auto& c : listed) {
          if (c.first.at == key.at) record_pair(c.second, op);
        }
      }
      listed.push_back({key, op});
    }
    if (!best_[e] || key < best_[e]->first) {
      best_[e] = {key, op};
      replay_match(e);
    }
  }

  // The pairs of candidates ready at the earliest time, `first`, the one the device chooses
  // at (see ListTies).
  void record_ties(const std::vector<std::pair<Key, Op>>& candidates, double first) {
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i].first.at != first) continue;
      for (std::size_t j = i + 1; j < candidates.size(); ++j) {
        if (candidates[j].first.at != first) continue;
        record_pair(candidates[i].second, candidates[j].second);
      }
    }
  }

  void record_pair(const Op& a, const Op& b) {
    const std::uint64_t sa = stream(a.stage, kind_slot(a.kind));
    const std::uint64_t sb = stream(b.stage, kind_slot(b.kind));
    const bool a_first = std::pair(a.mb, -a.stage) < std::pair(b.mb, -b.stage);
    pairs_.insert(sa < sb ? (sa << 33 | sb << 1 | (a_first ? 1 : 0))
                          : (sb << 33 | sa << 1 | (a_first ? 0 : 1)));
  }

  // A set of pair codes: open addressing, linear probing (few distinct codes,
  // inserted millions of times).
  struct PairSet {
    std::vector<std::uint64_t> table = std::vector<std::uint64_t>(64, 0);  // code + 1; 0 empty
    std::size_t size = 0;
    void insert(std::uint64_t code) {
      const std::uint64_t v = code + 1;
      const std::size_t mask = table.size() - 1;
      for (std::size_t i = (v * 0x9E3779B97F4A7C15ULL) >> 40 & mask;; i = (i + 1) & mask) {
        if (table[i] == v) return;
        if (table[i] == 0) {
          table[i] = v;
          if (++size * 2 > table.size()) grow();
          return;
        }
      }
    }
    void grow() {
      std::vector<std::uint64_t> old(table.size() * 2, 0);
      old.swap(table);
      size = 0;
      for (std::uint64_t v : old)
        if (v != 0) insert(v - 1);
    }
  };

  // ready_at without re-reading inputs: each op's inputs are counted as they are produced
  // (deliver_outputs), so a candidate's input time is known the moment its last input is
  // there. max is exact and order-free, so the time is inputs_ready's to the bit. `op` is
  // the next op of its stage and kind (every candidate is), whose time head_ keeps: one
  // read of a small table, where the inputs' table (3 S M entries) missed the cache.
  double ready_of(double device_free, const Op& op) const {
    const double at = head_[stream(op.stage, kind_slot(op.kind))];
    if (std::isnan(at)) return detail::kNotYet;
    return std::max(device_free, at);
  }

  // head_ for stage s's ops of kind slot k, from the microbatch it runs next.
  void set_head(StageId s, int k) {
    double& head = head_[stream(s, k)];
    head = detail::kNotYet;
    const int next = next_of(s, k);
    if (next >= num_microbatches_) return;
    const Inputs& in = inputs_[stream(s, k) * num_microbatches_ + next];
    if (in.missing == 0) head = in.at;
  }

  // Ops by kind slot: 0 forward, 1 backward or backward_input, 2 backward_weight.
  static int kind_slot(OpKind k) {
    return k == OpKind::forward ? 0 : k == OpKind::backward_weight ? 2 : 1;
  }
  // Stage s's ops of kind slot k, one stream: its entry of head_, and of inputs_ times M.
  static std::size_t stream(StageId s, int k) { return static_cast<std::size_t>(s) * 3 + k; }
  std::size_t slot(OpKind k, StageId s, int m) const {
    return stream(s, kind_slot(k)) * num_microbatches_ + m;
  }
  // The microbatch stage s runs next among its ops of kind slot k.
  int next_of(StageId s, int k) const {
    return k == 0 ? next_f_[s] : k == 2 ? next_w_[s] : next_b_[s];
  }

  // Each op's inputs, as ExecutionEngine::inputs_ready reads them: a forward needs the
  // previous stage's output on the same device and every transfer into its stage; B or I
  // needs its own forward, the next stage's gradient on the same device and every transfer
  // out of its stage (their gradients); W needs its B or I.
  void init_inputs() {
    const int S = model_.layout.num_stages();
    for (std::size_t t = 0; t < model_.transfers.size(); ++t) {
      out_of_[model_.transfers[t].from].push_back(t);
      into_[model_.transfers[t].to].push_back(t);
    }
    inputs_.resize(static_cast<std::size_t>(S) * 3 * num_microbatches_);
    for (StageId s = 0; s < S; ++s) {
      const int f = (s > 0 && same_device(s - 1, s) ? 1 : 0) + static_cast<int>(into_[s].size());
      const int b =
          1 + (s + 1 < S && same_device(s + 1, s) ? 1 : 0) + static_cast<int>(out_of_[s].size());
      for (int m = 0; m < num_microbatches_; ++m) {
        inputs_[slot(OpKind::forward, s, m)].missing = f;
        inputs_[slot(OpKind::backward, s, m)].missing = b;
        inputs_[slot(OpKind::backward_weight, s, m)].missing = 1;
      }
    }
    head_.assign(static_cast<std::size_t>(S) * 3, detail::kNotYet);
    for (StageId s = 0; s < S; ++s) {
      for (int k = 0; k < 3; ++k) set_head(s, k);
    }
  }

  bool same_device(StageId a, StageId b) const {
    return model_.layout.device[a] == model_.layout.device[b];
  }

  // One input of (k, s, m) is there at `when`. If that completes the op its stage and kind
  // offer next, its device has one more candidate (add_candidate), unless that device is
  // the one that ran the op, which is refreshed whole after the deliveries. Nothing else
  // changes a device's candidates: its free time, queue and candidates' inputs are as they
  // were. Inlined into deliver_outputs' six calls: the list schedules of pp 32 over 1024
  // layers execute 5.5% fewer instructions (scripts/instruction_counts.py).
  [[gnu::always_inline]] void deliver(OpKind k, StageId s, int m, double when, DeviceId ran_on,
                                      std::vector<DeviceId>& dirty) {
    Inputs& in = inputs_[slot(k, s, m)];
    in.at = std::max(in.at, when);
    if (--in.missing > 0) return;
    const int ks = kind_slot(k);
    if (m != next_of(s, ks)) return;
    head_[stream(s, ks)] = in.at;
    const DeviceId e = model_.layout.device[s];
    if (e == ran_on) return;
    const OpKind kind = k == OpKind::backward && split_ ? OpKind::backward_input : k;
    add_candidate(e, Op{kind, s, m}, dirty);
  }

  // After `op` ran: what it produced, to the ops that consume it.
  void deliver_outputs(const Op& op, std::vector<DeviceId>& dirty) {
    const StageId s = op.stage;
    const int m = op.mb, S = model_.layout.num_stages();
    const DeviceId d = model_.layout.device[s];
    if (op.kind == OpKind::forward) {
      const double end = engine_.forward_end(s, m);
      deliver(OpKind::backward, s, m, end, d, dirty);
      if (s + 1 < S && same_device(s + 1, s)) deliver(OpKind::forward, s + 1, m, end, d, dirty);
      for (std::size_t t : out_of_[s]) {
        deliver(OpKind::forward, model_.transfers[t].to, m, engine_.arrival(t, m, true), d, dirty);
      }
    } else if (op.kind != OpKind::backward_weight) {
      const double end = engine_.grad_end(s, m);
      if (split_) deliver(OpKind::backward_weight, s, m, end, d, dirty);
      if (s > 0 && same_device(s - 1, s)) deliver(OpKind::backward, s - 1, m, end, d, dirty);
      for (std::size_t t : into_[s]) {
        deliver(OpKind::backward, model_.transfers[t].from, m, engine_.arrival(t, m, false), d,
                dirty);
      }
    }
  }

  // The device whose candidate starts first is the root of a tournament over the devices'
  // candidates (winner_[1]), replayed from d's leaf up when d's candidate changes: O(log P)
  // a step instead of a scan of every device (pp 512: 512 compares for each of a million
  // ops). Keys end with the device, so no two are equal and the winner is the scan's. Only
  // d's key moved since the tree was last replayed: a match that another device still wins
  // is the match it was, and so is every match above it.
  void replay_match(DeviceId d) {
    std::size_t at = static_cast<std::size_t>(leaves_) + d;
    winner_[at] = best_[d] ? d : -1;
    for (at /= 2; at >= 1; at /= 2) {
      const DeviceId a = winner_[2 * at], b = winner_[2 * at + 1];
      const DeviceId w = a < 0 ? b : b < 0 ? a : best_[b]->first < best_[a]->first ? b : a;
      if (w == winner_[at] && w != d) return;
      winner_[at] = w;
    }
  }

  // Giffler and Thompson's rule: every candidate that could start before the earliest one
  // ends competes by rank, oldest microbatch, later stage; the winner may wait for an input
  // still on its way rather than let a lower-ranked op take the device.
  void prefer_by_rank(DeviceId d) {
    const double first_end = best_[d]->first.at + engine_.compute_time(best_[d]->second);
    for (const auto& c : candidates_) {
      if (c.first.at >= first_end) continue;
      // Rank, microbatch, stage (the packed order: its device field is d's in both), then
      // the start.
      const auto order = [](const Key& k) { return std::pair(k.order, k.at); };
      if (order(c.first) < order(best_[d]->first)) best_[d] = c;
    }
  }

  bool window_open(StageId s) const {
    const auto& w = policy_.window_limit;
    return w.empty() || w[s] <= 0 || open_[s] < w[s];
  }

  void advance(DeviceId d, const Op& op) {
    DeviceQueue& q = queues_[d];
    const StageId s = op.stage;
    const bool last = op.kind == OpKind::backward_weight || (op.kind != OpKind::forward && !split_);
    if (op.kind == OpKind::forward) {
      ++next_f_[s];
      ++open_[s];
      if (s == q.admitting) ++q.inflight;
    } else if (op.kind == OpKind::backward_weight) {
      ++next_w_[s];
    } else {
      ++next_b_[s];
    }
    set_head(s, kind_slot(op.kind));
    if (last) {
      --open_[s];
      if (s == q.admitting) --q.inflight;
    }
  }

  bool record_ties_;
  bool zero_length_ = false;  // an op ran for no time (then ties() is not complete)
  PairSet pairs_;
  const PipelineModel& model_;
  int num_microbatches_;
  const std::vector<int>& limits_;
  bool split_;
  const ListPolicy& policy_;
  detail::ExecutionEngine engine_;
  std::vector<int> next_f_, next_b_, next_w_;
  std::vector<int> open_;  // per stage: microbatches between its forward and last backward
  std::vector<DeviceQueue> queues_;
  std::vector<std::optional<std::pair<Key, Op>>> best_;
  std::vector<std::pair<Key, Op>> candidates_;           // refresh's scratch
  std::vector<std::vector<std::pair<Key, Op>>> listed_;  // per device, with ties: its candidates
  std::vector<int> checked_;  // per device: most in flight when its limit was consulted
  // [(stage * 3 + kind slot) * M + microbatch]: how many inputs are still missing, and when
  // the last of those already produced arrives.
  struct Inputs {
    double at = -std::numeric_limits<double>::infinity();
    int missing = 0;
  };
  std::vector<Inputs> inputs_;
  // [stage * 3 + kind slot]: when the next op of that stage and kind has its inputs, or
  // kNotYet while one is missing (or none is left).
  std::vector<double> head_;
  std::vector<std::vector<std::size_t>> out_of_, into_;  // [stage]: transfers from / to it
  int leaves_ = 1;
  std::vector<DeviceId> winner_;  // the tournament: [1] the root, [leaves_ + d] device d
};

}  // namespace

Schedule list_schedule(const PipelineModel& model, int num_microbatches,
                       const std::vector<int>& inflight_limit, bool split_backward,
                       const ListPolicy& policy, double* makespan_s,
                       std::vector<int>* inflight_checked, ListTies* ties, ListStop* stop,
                       std::vector<std::int64_t>* resident_peaks, ListReplay* replay) {
  ListScheduler scheduler(model, num_microbatches, inflight_limit, split_backward, policy,
                          ties != nullptr);
  if (stop) stop->stopped = false;
  Schedule schedule = scheduler.run(makespan_s, stop, replay);
  if (inflight_checked) *inflight_checked = scheduler.checked();
  if (ties) *ties = scheduler.ties();
  if (resident_peaks && !(stop && stop->stopped)) *resident_peaks = scheduler.resident_peaks();
  return schedule;
}

bool same_rank_order(const ListTies& ties, const ListPolicy& a, const ListPolicy& b) {
  const auto rank = [](const ListPolicy& p, std::uint64_t slot) {
    const std::size_t stage = slot / 3;
    return slot % 3 == 0   ? p.forward_rank[stage]
           : slot % 3 == 1 ? p.backward_rank[stage]
                           : p.weight_rank[stage];
  };
  const auto a_first = [&](const ListPolicy& p, std::uint64_t code) {
    const int ra = rank(p, code >> 33), rb = rank(p, code >> 1 & ((1ULL << 32) - 1));
    return ra < rb || (ra == rb && (code & 1) != 0);
  };
  for (std::uint64_t code : ties.pairs) {
    if (a_first(a, code) != a_first(b, code)) return false;
  }
  return true;
}

}  // namespace pulse
