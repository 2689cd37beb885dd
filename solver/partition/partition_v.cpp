// The skip-aware V partitioner.
//
// Layers 0..L-1 are cut into 2P contiguous stages; device d runs stage d (encoder side)
// and stage 2P-1-d (decoder side). Walking the V from the outside in, device d takes an
// encoder segment E = [i+1, i'] and a decoder segment D = [j', j-1]; the bottom device P-1
// takes everything left, [i+1, j-1], as stages P-1 and P. So a partition is a path of
// states (i, j) = "layers <= i and >= j are placed", from (-1, L) inwards:
//
//   V_0(-1, L) = 0
//   V_{d+1}(i', j') = min over (i, j) of  max(V_d(i, j), cost_d(E, D))      d = 0..P-2
//   answer      = min over (i, j) of  max(V_{P-1}(i, j), cost_{P-1}([i+1, j-1]))
//
// subject to (a) every segment non-empty, (b) memory_d(E, D) <= capacity, and under
// SkipPolicy::local_only (c) every skip stays on one device. (c) is two O(1) checks per
// transition, because placed skips are local by induction:
//   (c1) j' <= min_consumer_crossing[i']: skips leaving E land in D or further out;
//   (c2) max_producer_crossing[j'] <= i': skips entering D start in E or further out.
// For nested skips the states satisfying (c) form a narrow band, which is what makes the
// DP fast at real sizes. With allow_nonlocal, skips with one end outside E u D are charged
// at their transfer cost on the slowest pipeline link (the destination device is not known
// yet); the answer is exact when the pipeline's links are uniform.
//
// cost_d(E, D) = compute(E) + compute(D) + blocking sends, exactly as PipelineModel
// derives them (tests check the two agree). The DP runs under an upper bound U on the
// primary cost, pruning states that cannot stay under it; U grows geometrically from the
// lower bound until a partition appears (fine_upper_bound_factors).
//
// The band is narrow when U is close to an even share of the work. It is not when one layer
// outweighs several devices' shares: every device may then take several shares, the states
// fill the (i, j) triangle and a run examines billions of transitions (a 1000-layer model
// whose heaviest layer is 10% of the compute, at P = 32, ran for more than four minutes).
// So an exact run stops after request.exact_transition_budget transitions, and from then on
// the program runs a bounded search: from each state and each encoder end i', only the
// fullest decoder segment under U (the smallest j'; with skips kept local, also the emptiest,
// as locality may leave the fullest no way on), and at each level only the kBeamWidth
// states whose optimistic completion max(V, what is left / devices left) is smallest. Its
// answer is a valid partition whose costs are computed exactly, but it is not proven optimal,
// and the result says so (PartitionResult::exact).

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <utility>

#include "partition_dp.hpp"
#include "pulse/base/limits.hpp"
#include "pulse/partition/partition.hpp"
#include "slot_index.hpp"

namespace pulse {

namespace {

using detail::DeviceCost;
using detail::DpFound;
using detail::DpValue;
using detail::LayerPrefix;
using detail::Objective;
using detail::SkipGrid;
using detail::SlotIndex;

constexpr std::size_t kBeamWidth = 512;  // States kept per level by the bounded search.

class VDynamicProgram {
 public:
  VDynamicProgram(const PartitionRequest& request, SkipPolicy policy, Objective objective)
      : request_(request),
        prefix_(*request.graph),
        num_layers_(prefix_.num_layers),
        pp_(request.pp),
        local_only_(policy == SkipPolicy::local_only),
        objective_(objective),
        slowest_(detail::slowest_link(request.links)),
        budget_(request.exact_transition_budget),
        slot_(static_cast<std::size_t>(num_layers_ + 1) * (num_layers_ + 1)) {
    build_crossing_tables();
    if (!local_only_) grid_ = SkipGrid::of(num_layers_, request.graph->skip_pairs());
    if (objective_ == Objective::time) load_floor_ = average_load_floor();
  }

  using Found = DpFound;

  /// The best partition whose devices all stay at or under `bound`, if any. Exact until a
  /// run exceeds the transition budget; bounded from then on (see the top of the file).
  std::optional<Found> run(double bound);

 private:
  struct State {
    int i, j;
    DpValue value;
    int parent;
    DeviceCost cost;  // of the device that led here
  };

  std::optional<Found> run_once(double bound);
  double average_load_floor() const;
  void keep_most_promising(int level);
  void build_crossing_tables();
  // The sends of device d that do not depend on where D starts (side_cost adds them in its
  // order): E's forward to device d+1, which depends on i2 alone, and with d >= 1 D's
  // forward and E's backward to device d-1, which depend on the state alone; their bytes.
  struct FixedSends {
    double e_next = 0, d_prev = 0, e_prev = 0;
    std::int64_t bytes = 0;
  };
  // One device's encoder segment fixed: from state (i, j) = `from` (at `from_index`), device
  // d takes E = [i + 1, i2]; what is left for its decoder segment D = [j2, j - 1]. Passed by
  // value, so that the loops keep it in registers.
  struct Step {
    int d, i, j, i2, rest;  // rest: devices after d, which need 2 * rest layers
    double bound, spp, compute_e;
    bool time;
    const State* from;
    int from_index;
    FixedSends sends;
  };

  void expand(int d, const State& from, int from_index, double bound);
  template <class Visit>
  void for_each_encoder_end(int d, const State& from, double bound, double spp,
                            Visit&& visit) const;
  std::int64_t count_transitions(int d, const State& from, double bound, std::int64_t limit) const;
  bool level_over_budget(int d, double bound) const;
  bool expand_exact(Step step, int j2_min, int j2_hi);
  void expand_bounded(Step step, int j2_min, int j2_hi);
  int first_not_over_memory(const Step& step, int lo, int hi);
  std::optional<DeviceCost> edge(const Step& step, int j2) const;
  void take(const Step& step, int j2, const DeviceCost& cost);
  void relax(int level, int i, int j, const DpValue& v, int parent, const DeviceCost& cost);
  FixedSends fixed_sends(int d, int i, int j, int i2) const;
  /// Device d's cost for E = [i+1, i2] and D = [j2, j-1] (`step`'s). Where even the fewest
  /// skip sends the segments' ends allow put its load over `load_cap`, only that lower load
  /// is set (the skips inside are not summed): the device is over any bound at or below
  /// the cap.
  DeviceCost side_cost(const Step& step, int j2,
                       double load_cap = std::numeric_limits<double>::infinity()) const;
  DeviceCost middle_cost(int i, int j) const;
  bool within(const DeviceCost& c, double bound) const;
  std::int64_t held_skip_bytes(int ea, int eb, int da, int db, int* fwd_count,
                               std::int64_t* fwd_bytes, int* bwd_count,
                               std::int64_t* bwd_bytes) const;
  double send(int from, int to, int count, std::int64_t bytes) const {
    return transfer_time(request_.links[from][to], count, bytes);
  }
  Found reconstruct(const State& last, const DeviceCost& middle, const DpValue& value) const;

  const PartitionRequest& request_;
  LayerPrefix prefix_;
  int num_layers_, pp_;
  bool local_only_;
  Objective objective_;
  LinkClass slowest_;
  std::vector<int> min_consumer_crossing_;  // [i]: min c over skips p <= i < c; L if none
  std::vector<int> max_producer_crossing_;  // [j]: max p over skips p < j <= c; -1 if none
  std::shared_ptr<const SkipGrid> grid_;    // allow_nonlocal only
  std::int64_t budget_;
  std::int64_t transitions_ = 0;       // in the current run
  std::int64_t most_transitions_ = 0;  // of an exact run that finished
  bool over_budget_ = false;           // the current exact run gave up
  int memory_frontier_ = 0;            // first_not_over_memory's walk, per expand()
  int compute_lo_ = -1;                // expand_bounded's lower_bound, per expand()
  bool bounded_ = false;               // runs are bounded searches from now on
  double load_floor_ = 0;              // no partition's largest load is below it (time objective)
  std::vector<std::vector<State>> levels_;
  // Dense (i+1, j) -> 1 + index in the level being built; 0: not in it.
  SlotIndex slot_;
};

// One sweep over the layers with a heap of the skips open there (O((L + S) log S); a loop
// over each skip's span cost O(L S), 8 M steps a table at 2048 skips of 4096 layers, and
// the tuner builds a table per partition).
void VDynamicProgram::build_crossing_tables() {
  min_consumer_crossing_.assign(num_layers_, num_layers_);
  max_producer_crossing_.assign(num_layers_ + 1, -1);
  std::vector<std::vector<int>> consumers_from(num_layers_ + 1);  // by producer
  for (const SkipPair& s : request_.graph->skip_pairs()) {
    consumers_from[s.producer].push_back(s.consumer);
  }
  // min_consumer_crossing_[i]: the least consumer c > i of the skips with producer <= i.
  std::priority_queue<int, std::vector<int>, std::greater<>> least_consumer;
  for (int i = 0; i < num_layers_; ++i) {
    for (int c : consumers_from[i]) least_consumer.push(c);
    while (!least_consumer.empty() && least_consumer.top() <= i) least_consumer.pop();
    if (!least_consumer.empty()) min_consumer_crossing_[i] = least_consumer.top();
  }
  // max_producer_crossing_[j]: the largest producer p < j of the skips with consumer >= j.
  std::priority_queue<std::pair<int, int>> latest_producer;  // (producer, consumer)
  for (int j = 1; j <= num_layers_; ++j) {
    for (int c : consumers_from[j - 1]) latest_producer.emplace(j - 1, c);
    while (!latest_producer.empty() && latest_producer.top().second < j) latest_producer.pop();
    if (!latest_producer.empty()) max_producer_crossing_[j] = latest_producer.top().first;
  }
}

// Skip bytes one microbatch holds on a device with segments [ea, eb] and [da, db]: every
// skip it produces (kept locally or sent) plus every skip it receives. Also returns, for
// allow_nonlocal, the skips it must send forward (produced here, consumed elsewhere) and
// backward (consumed here, produced elsewhere).
std::int64_t VDynamicProgram::held_skip_bytes(int ea, int eb, int da, int db, int* fwd_count,
                                              std::int64_t* fwd_bytes, int* bwd_count,
                                              std::int64_t* bwd_bytes) const {
  const auto& pb = prefix_.skip_bytes_by_producer;
  const std::int64_t produced = (pb[eb + 1] - pb[ea]) + (db >= da ? pb[db + 1] - pb[da] : 0);
  *fwd_count = 0;
  *bwd_count = 0;
  *fwd_bytes = 0;
  *bwd_bytes = 0;
  if (local_only_) return produced;
  if (prefix_.skip_count_by_producer.back() == 0) return 0;  // no skips: every sum below is 0
  const auto& cb = prefix_.skip_bytes_by_consumer;
  const auto& pc = prefix_.skip_count_by_producer;
  const auto& cc = prefix_.skip_count_by_consumer;
  const std::int64_t consumed = (cb[eb + 1] - cb[ea]) + (db >= da ? cb[db + 1] - cb[da] : 0);
  const int produced_e = pc[eb + 1] - pc[ea];
  const int produced_d = db >= da ? pc[db + 1] - pc[da] : 0;
  const int produced_n = produced_e + produced_d;
  const int consumed_n = (cc[eb + 1] - cc[ea]) + (db >= da ? cc[db + 1] - cc[da] : 0);
  // Both ends inside: E->E, E->D, D->D (a consumer never precedes its producer). A segment
  // that produces no skip has no sum to look up (most devices, with few skips).
  std::int64_t inside = 0;
  int inside_n = 0;
  auto add = [&](const SkipGrid::Skips& s) {
    inside += s.bytes;
    inside_n += static_cast<int>(s.count);
  };
  if (produced_e > 0) {
    add(grid_->sum(ea, eb, ea, eb));
    add(grid_->sum(ea, eb, da, db));
  }
  if (produced_d > 0) add(grid_->sum(da, db, da, db));
  *fwd_bytes = produced - inside;
  *fwd_count = produced_n - inside_n;
  *bwd_bytes = consumed - inside;
  *bwd_count = consumed_n - inside_n;
  return produced + consumed - inside;
}

// Device d's sends that no decoder start changes (Step::sends). Each is one transfer_time, a
// pure function: side_cost adds the values it computed itself, in its order, to the bit.
VDynamicProgram::FixedSends VDynamicProgram::fixed_sends(int d, int i, int j, int i2) const {
  const LayerPrefix& p = prefix_;
  FixedSends f;
  // Forward E -> stage d+1; nothing is held there yet, so every carried tensor goes along.
  f.bytes = p.output[i2] + p.carried_bytes_upto[i2 + 1];
  f.e_next = send(d, d + 1, 1 + p.carried_count_upto[i2 + 1], f.bytes);
  if (d >= 1) {
    // Forward D -> stage 2P-d on device d-1, which already holds carried tensors up to i.
    const std::int64_t d_prev =
        p.output[j - 1] + p.carried_bytes_upto[j] - p.carried_bytes_upto[i + 1];
    f.d_prev = send(d, d - 1, 1 + p.carried_count_upto[j] - p.carried_count_upto[i + 1], d_prev);
    // Backward E -> stage d-1: gradient of E's input.
    const std::int64_t e_prev = p.output[i] + p.carried_grad_bytes_upto[i + 1];
    f.e_prev = send(d, d - 1, 1 + p.carried_grad_count_upto[i + 1], e_prev);
    f.bytes += d_prev + e_prev;
  }
  return f;
}

// Device d < P-1 takes E = [i+1, i2] and D = [j2, j-1].
DeviceCost VDynamicProgram::side_cost(const Step& step, int j2, double load_cap) const {
  const LayerPrefix& p = prefix_;
  const int d = step.d, i = step.i, j = step.j, i2 = step.i2;
  DeviceCost c;
  // E's forward to d+1, D's backward to d+1, then to d-1 D's forward and E's backward.
  double sends = step.sends.e_next;
  // Backward D -> stage 2P-2-d: gradient of D's input, and of carried tensors that device
  // d+1 sent because device d did not hold them (producer in (i2, j2-1]).
  const std::int64_t d_next =
      p.output[j2 - 1] + p.carried_grad_bytes_upto[j2] - p.carried_grad_bytes_upto[i2 + 1];
  sends +=
      send(d, d + 1, 1 + p.carried_grad_count_upto[j2] - p.carried_grad_count_upto[i2 + 1], d_next);
  if (d >= 1) {
    sends += step.sends.d_prev;
    sends += step.sends.e_prev;
  }
  c.bytes = step.sends.bytes + d_next;
  const double compute = p.compute_in(i + 1, i2) + p.compute_in(j2, j - 1);
  if (!local_only_ && p.skip_count_by_producer.back() > 0 &&
      load_cap < std::numeric_limits<double>::infinity()) {
    // The skips with both ends here are at most the fewer of those produced and those
    // consumed here (by count and by bytes), so at least the difference is sent, one way
    // or the other, on the slowest link: the sum below with fewer messages and bytes in
    // each term, never more (the same order of operations; each step is monotone).
    const auto& pc = p.skip_count_by_producer;
    const auto& cc = p.skip_count_by_consumer;
    const auto& pb = p.skip_bytes_by_producer;
    const auto& cb = p.skip_bytes_by_consumer;
    const int produced_n = pc[i2 + 1] - pc[i + 1] + pc[j] - pc[j2];
    const int consumed_n = cc[i2 + 1] - cc[i + 1] + cc[j] - cc[j2];
    const std::int64_t produced = pb[i2 + 1] - pb[i + 1] + pb[j] - pb[j2];
    const std::int64_t consumed = cb[i2 + 1] - cb[i + 1] + cb[j] - cb[j2];
    const int both_n = std::min(produced_n, consumed_n);
    const std::int64_t both = std::min(produced, consumed);
    const double least =
        device_load(compute,
                    sends + (transfer_time(slowest_, produced_n - both_n, produced - both) +
                             transfer_time(slowest_, consumed_n - both_n, consumed - both)),
                    request_.overlap_comm);
    if (least > load_cap) {
      c.load = least;
      return c;
    }
  }
  int fwd_n = 0, bwd_n = 0;
  std::int64_t fwd_b = 0, bwd_b = 0;
  const std::int64_t held = held_skip_bytes(i + 1, i2, j2, j - 1, &fwd_n, &fwd_b, &bwd_n, &bwd_b);
  if (fwd_n + bwd_n > 0) {
    sends += transfer_time(slowest_, fwd_n, fwd_b) + transfer_time(slowest_, bwd_n, bwd_b);
    c.bytes += fwd_b + bwd_b;
  }
  c.load = device_load(compute, sends, request_.overlap_comm);
  const std::int64_t params = p.params_in(i + 1, i2) + p.params_in(j2, j - 1);
  const std::int64_t act = p.activation_in(i + 1, i2) + p.activation_in(j2, j - 1);
  c.memory = memory_bound(request_.memory, params, request_.dp, request_.inflight[d], act + held);
  return c;
}

// The bottom device P-1 takes [i+1, j-1] as stages P-1 and P.
DeviceCost VDynamicProgram::middle_cost(int i, int j) const {
  const LayerPrefix& p = prefix_;
  const int d = pp_ - 1;
  DeviceCost c;
  double sends = 0;
  if (pp_ >= 2) {
    const std::int64_t fwd =
        p.output[j - 1] + p.carried_bytes_upto[j] - p.carried_bytes_upto[i + 1];
    sends += send(d, d - 1, 1 + p.carried_count_upto[j] - p.carried_count_upto[i + 1], fwd);
    const std::int64_t bwd = p.output[i] + p.carried_grad_bytes_upto[i + 1];
    sends += send(d, d - 1, 1 + p.carried_grad_count_upto[i + 1], bwd);
    c.bytes = fwd + bwd;
  }
  int fwd_n = 0, bwd_n = 0;
  std::int64_t fwd_b = 0, bwd_b = 0;
  const std::int64_t held = held_skip_bytes(i + 1, j - 1, 0, -1, &fwd_n, &fwd_b, &bwd_n, &bwd_b);
  if (fwd_n + bwd_n > 0) {
    sends += transfer_time(slowest_, fwd_n, fwd_b) + transfer_time(slowest_, bwd_n, bwd_b);
    c.bytes += fwd_b + bwd_b;
  }
  c.load = device_load(p.compute_in(i + 1, j - 1), sends, request_.overlap_comm);
  c.memory = memory_bound(request_.memory, p.params_in(i + 1, j - 1), request_.dp,
                          request_.inflight[d], p.activation_in(i + 1, j - 1) + held);
  return c;
}

bool VDynamicProgram::within(const DeviceCost& c, double bound) const {
  if (objective_ == Objective::memory) return static_cast<double>(c.memory) <= bound;
  return c.load <= bound && c.memory <= request_.memory_capacity;
}

// Inlined into the loops of expand, as edge and take are (below).
[[gnu::always_inline]] inline void VDynamicProgram::relax(int level, int i, int j, const DpValue& v,
                                                          int parent, const DeviceCost& cost) {
  const std::size_t key = static_cast<std::size_t>(i + 1) * (num_layers_ + 1) + j;
  std::vector<State>& states = levels_[level];
  const int slot = slot_.at(key);
  if (slot == 0) {
    slot_.add(key, static_cast<int>(states.size()) + 1);
    states.push_back(State{i, j, v, parent, cost});
  } else if (detail::better(v, states[slot - 1].value)) {
    states[slot - 1] = State{i, j, v, parent, cost};
  }
}

// Device d's cost for D = [j2, j-1] after E, if it stays within the bound and leaves the
// devices after it able to hold the remaining weights and their state. edge, take and relax
// run once per transition: inlined into the loops below (as edge and take were lambdas
// there), bench_partition --repeat 1 runs the 24.10 G instructions it ran before the split
// (cachegrind); called, 26.21 G.
[[gnu::always_inline]] inline std::optional<DeviceCost> VDynamicProgram::edge(const Step& step,
                                                                              int j2) const {
  const int i2 = step.i2;
  if (local_only_ && max_producer_crossing_[j2] > i2) return std::nullopt;
  const DeviceCost cost =
      side_cost(step, j2, step.time ? step.bound : std::numeric_limits<double>::infinity());
  if (!within(cost, step.bound)) return std::nullopt;
  const double rest_static =
      step.spp * static_cast<double>(prefix_.params_in(i2 + 1, j2 - 1)) - step.rest;
  const double per_device = step.time ? static_cast<double>(request_.memory_capacity) : step.bound;
  if (rest_static > step.rest * per_device) return std::nullopt;
  return cost;
}

[[gnu::always_inline]] inline void VDynamicProgram::take(const Step& step, int j2,
                                                         const DeviceCost& cost) {
  relax(step.d + 1, step.i2, j2,
        detail::extend(step.from->value, cost, objective_, request_.memory_capacity),
        step.from_index, cost);
}

// Device d's encoder ends from state `from`, in order: visit(i2, compute_e, j2_min, j2_hi)
// with E = [i + 1, i2], its compute, and the range of decoder starts j2 the bound leaves
// (the devices after d need 2 * rest layers and, under the time objective, must fit what is
// left), until visit returns false.
template <class Visit>
void VDynamicProgram::for_each_encoder_end(int d, const State& from, double bound, double spp,
                                           Visit&& visit) const {
  const LayerPrefix& p = prefix_;
  const int i = from.i, j = from.j;
  const int rest = pp_ - 1 - d;  // devices after this one; they need 2 * rest layers
  const bool time = objective_ == Objective::time;
  // Largest x with compute[x] <= compute[i2 + 1] + rest * bound. The right side grows with
  // i2, so one forward walk finds it for every i2 (a binary search per i2 cost more than
  // the transitions themselves on long models).
  int fits = static_cast<int>(std::upper_bound(p.compute.begin(), p.compute.end(),
                                               p.compute[i + 2] + rest * bound) -
                              p.compute.begin()) -
             1;
  for (int i2 = i + 1; i2 + 1 + 2 * rest <= j - 1; ++i2) {
    const double compute_e = p.compute_in(i + 1, i2);
    if (time && compute_e > bound) break;
    if (!time && spp * static_cast<double>(p.params_in(i + 1, i2)) > bound) break;
    int j2_hi = j - 1;
    if (local_only_) j2_hi = std::min(j2_hi, min_consumer_crossing_[i2]);
    if (time) {
      // The devices after this one must fit what is left: compute(i2+1 .. j2-1) <= rest * U.
      const double cap = p.compute[i2 + 1] + rest * bound;
      while (fits < num_layers_ && p.compute[fits + 1] <= cap) ++fits;
      j2_hi = std::min(j2_hi, fits);
    }
    if (!visit(i2, compute_e, i2 + 1 + 2 * rest, j2_hi)) return;
  }
}

void VDynamicProgram::expand(int d, const State& from, int from_index, double bound) {
  const int rest = pp_ - 1 - d;
  const bool time = objective_ == Objective::time;
  // Per-parameter bytes for pruning; one byte of slack per device absorbs rounding.
  const double spp =
      request_.memory.static_bytes(1 << 20, request_.dp) / static_cast<double>(1 << 20);
  memory_frontier_ = 0;
  compute_lo_ = -1;
  for_each_encoder_end(d, from, bound, spp, [&](int i2, double compute_e, int j2_min, int j2_hi) {
    const Step step{d,   from.i,    from.j, i2,    rest,       bound,
                    spp, compute_e, time,   &from, from_index, fixed_sends(d, from.i, from.j, i2)};
    if (!bounded_) return expand_exact(step, j2_min, j2_hi);
    expand_bounded(step, j2_min, j2_hi);
    return true;
  });
}

// How many transitions the exact DP examines from `from` (time objective): expand()'s walk
// over encoder ends, each decoder start from j2_hi down to j2_min or to the first whose
// compute alone is over the bound, without costing any (expand_exact counts them the same
// way). Stops once past `limit`.
std::int64_t VDynamicProgram::count_transitions(int d, const State& from, double bound,
                                                std::int64_t limit) const {
  const LayerPrefix& p = prefix_;
  const int j = from.j;
  // The device's compute, E's and D = [j2, j - 1]'s, only grows as j2 falls: those within
  // the bound are j2 >= low. E grows with i2, so low never falls: one search, then a walk.
  int low = -1;
  std::int64_t n = 0;
  for_each_encoder_end(d, from, bound, 0.0, [&](int, double compute_e, int j2_min, int j2_hi) {
    auto over = [&](int j2) { return compute_e + p.compute_in(j2, j - 1) > bound; };
    if (low < 0) {  // (std::ranges over an iota view does not build with clang 14)
      int a = 0, b = j;
      while (a < b) {
        const int mid = a + (b - a) / 2;
        if (over(mid))
          a = mid + 1;
        else
          b = mid;
      }
      low = a;
    }
    while (low < j && over(low)) ++low;
    const int first = std::max(j2_min, low);
    if (j2_hi >= first) n += j2_hi - first + 1;
    return n <= limit;
  });
  return n;
}

// Whether expanding level d takes an exact run past its transition budget: counted before
// any of the level's transitions is costed, the cost the run's last level would otherwise
// pay for nothing (when a model turns to the bounded search, the exact run that finds out
// examined a budget's worth, a sixth of the planning time of a 4096-layer model). The
// verdict is the one counting as it goes gives: the same transitions, the same total.
bool VDynamicProgram::level_over_budget(int d, double bound) const {
  if (objective_ != Objective::time) return false;  // counted as it goes (expand_exact)
  std::int64_t left = budget_ - transitions_;
  for (const State& from : levels_[d]) {
    left -= count_transitions(d, from, bound, left);
    if (left < 0) return true;
  }
  return false;
}

// Every decoder segment of the exact DP, j2 from j2_hi down; false once the run is over its
// transition budget.
bool VDynamicProgram::expand_exact(Step step, int j2_min, int j2_hi) {
  const LayerPrefix& p = prefix_;
  const int i = step.i, j = step.j, d = step.d;
  // D grows as j2 falls, and with it the device's weights, their state and its
  // activations: once those alone (skips aside) pass the bound (memory) or the device
  // (time), no smaller j2 is within.
  const std::int64_t params_e = p.params_in(i + 1, step.i2);
  const std::int64_t act_e = p.activation_in(i + 1, step.i2);
  const double memory_limit =
      step.time ? static_cast<double>(request_.memory_capacity) : step.bound;
  bool full = false;
  for (int j2 = j2_hi; j2 >= j2_min; --j2) {
    if (step.time && step.compute_e + p.compute_in(j2, j - 1) > step.bound) break;
    if (++transitions_ > budget_) {
      over_budget_ = true;
      return false;
    }
    // The rest are still counted, as they were before this shortcut, so the models
    // that switch to the bounded search (and their plans) stay the same.
    if (full) continue;
    const std::int64_t least =
        memory_bound(request_.memory, params_e + p.params_in(j2, j - 1), request_.dp,
                     request_.inflight[d], act_e + p.activation_in(j2, j - 1));
    if (static_cast<double>(least) > memory_limit) {
      full = true;
      continue;
    }
    if (const auto cost = edge(step, j2)) take(step, j2, *cost);
  }
  return true;
}

// Bounded search: only the fullest decoder segment, the smallest j2 that passes.
void VDynamicProgram::expand_bounded(Step step, int j2_min, int j2_hi) {
  const LayerPrefix& p = prefix_;
  const int j = step.j;
  int lo = j2_min;
  if (step.time) {
    const double room = step.bound - step.compute_e;
    // lower_bound of compute[j] - room, which never falls as expand() walks i2 up (room
    // shrinks): searched once per state, then walked forward from the last answer.
    const double target = p.compute[j] - room;
    const int n = static_cast<int>(p.compute.size());
    if (compute_lo_ < 0) {
      compute_lo_ = static_cast<int>(std::lower_bound(p.compute.begin(), p.compute.end(), target) -
                                     p.compute.begin());
    }
    while (compute_lo_ < n && p.compute[compute_lo_] < target) ++compute_lo_;
    lo = std::max(lo, compute_lo_);
    // The search works on a rearranged sum; settle rounding with the test the loop uses.
    while (lo > j2_min && step.compute_e + p.compute_in(lo - 1, j - 1) <= step.bound) --lo;
    while (lo <= j2_hi && step.compute_e + p.compute_in(lo, j - 1) > step.bound) ++lo;
  }
  lo = first_not_over_memory(step, lo, j2_hi);
  const double per_device = step.time ? static_cast<double>(request_.memory_capacity) : step.bound;
  int fullest = j2_hi + 1;
  for (int j2 = lo; j2 <= j2_hi; ++j2) {
    // edge's last test: what is left between E and D must fit the devices after this one.
    // It only grows with j2, so once it fails no larger j2 passes.
    const double rest_static =
        step.spp * static_cast<double>(p.params_in(step.i2 + 1, j2 - 1)) - step.rest;
    if (rest_static > step.rest * per_device) break;
    if (const auto cost = edge(step, j2)) {
      take(step, j2, *cost);
      fullest = j2;
      break;
    }
  }
  // And the emptiest, where skip locality may rule out every continuation of the fullest:
  // a second way on. Without that constraint the fullest always has one at U = infinity.
  if (!local_only_ || request_.graph->skip_pairs().empty()) return;
  for (int j2 = j2_hi; j2 > fullest; --j2) {
    if (const auto cost = edge(step, j2)) {
      take(step, j2, *cost);
      break;
    }
  }
}

// The smallest j2 in [lo, hi] (hi + 1 if none) whose device is not over the memory limit on
// its weights, their state and its activations alone (skips aside), the test expand_exact's
// `full` makes: edge() refuses every j2 below it. That memory only shrinks as j2 grows (D
// shrinks; memory_bound is monotone in both sums) and grows with i2 (E grows), so the first
// j2 not over it never falls as expand() walks i2 up: memory_frontier_ keeps where the last
// walk stopped, a lower bound for the next (lo never falls either), instead of one
// side_cost per j2 (a 3001-layer chain at pp 4 tried thousands per encoder end).
int VDynamicProgram::first_not_over_memory(const Step& step, int lo, int hi) {
  const LayerPrefix& p = prefix_;
  const int i = step.i, j = step.j, d = step.d;
  const std::int64_t params_e = p.params_in(i + 1, step.i2);
  const std::int64_t act_e = p.activation_in(i + 1, step.i2);
  const double memory_limit =
      step.time ? static_cast<double>(request_.memory_capacity) : step.bound;
  int j2 = std::max(lo, memory_frontier_);
  for (; j2 <= hi; ++j2) {
    const std::int64_t least =
        memory_bound(request_.memory, params_e + p.params_in(j2, j - 1), request_.dp,
                     request_.inflight[d], act_e + p.activation_in(j2, j - 1));
    if (static_cast<double>(least) <= memory_limit) break;
  }
  memory_frontier_ = j2;
  return j2;
}

// Bounded search: keeps the kBeamWidth states of `level` with the smallest optimistic
// completion, the larger of the value so far and an even share of what is left over the
// devices left; ties go to fewer bytes, more headroom, then position, so the cut is
// deterministic.
void VDynamicProgram::keep_most_promising(int level) {
  std::vector<State>& states = levels_[level];
  if (states.size() <= kBeamWidth) return;
  const int left = pp_ - level;
  const double spp =
      request_.memory.static_bytes(1 << 20, request_.dp) / static_cast<double>(1 << 20);
  auto key = [&](const State& s) {
    const double rest = objective_ == Objective::time
                            ? prefix_.compute_in(s.i + 1, s.j - 1)
                            : spp * static_cast<double>(prefix_.params_in(s.i + 1, s.j - 1));
    return std::max(s.value.primary, rest / left);
  };
  std::vector<std::pair<double, int>> order;
  order.reserve(states.size());
  for (std::size_t k = 0; k < states.size(); ++k) {
    order.emplace_back(key(states[k]), static_cast<int>(k));
  }
  // A strict total order ((i, j) is unique in a level), so the kept set is the same on any
  // machine; selection rather than a full sort, as a level can hold 10^5 states here.
  auto before = [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    const State& x = states[a.second];
    const State& y = states[b.second];
    if (x.value.bytes != y.value.bytes) return x.value.bytes < y.value.bytes;
    if (x.value.headroom != y.value.headroom) return x.value.headroom > y.value.headroom;
    return std::pair(x.i, x.j) < std::pair(y.i, y.j);
  };
  std::nth_element(order.begin(), order.begin() + kBeamWidth, order.end(), before);
  std::sort(order.begin(), order.begin() + kBeamWidth, before);
  std::vector<State> kept;
  kept.reserve(kBeamWidth);
  for (std::size_t k = 0; k < kBeamWidth; ++k) kept.push_back(states[order[k].second]);
  states = std::move(kept);
}

// The average device load of any partition, at least: every layer's compute once, and each
// device's fewest sends, one message of the smallest layer output per neighbour and
// direction (side_cost and middle_cost send at least that much; skips only add). With
// blocking sends a device's load is its compute plus its sends, so the largest load is at
// least the average of this sum; overlapped sends may hide behind compute, so then the
// floor is the compute alone.
double VDynamicProgram::average_load_floor() const {
  const LayerPrefix& p = prefix_;
  double total = p.compute_in(0, num_layers_ - 1);
  if (!request_.overlap_comm && pp_ >= 2) {
    const std::int64_t least_output = *std::min_element(p.output.begin(), p.output.end());
    for (int d = 0; d < pp_; ++d) {
      if (d + 1 < pp_) total += 2 * send(d, d + 1, 1, least_output);  // E forward, D backward
      if (d >= 1) total += 2 * send(d, d - 1, 1, least_output);       // D forward, E backward
    }
  }
  return total / pp_;
}

std::optional<VDynamicProgram::Found> VDynamicProgram::run(double bound) {
  if (!bounded_) {
    std::optional<Found> found = run_once(bound);
    if (!over_budget_) {
      most_transitions_ = std::max(most_transitions_, transitions_);
      if (found) found->exact_transitions = most_transitions_;
      return found;
    }
    bounded_ = true;  // looser bounds would cost more still
  }
  // A bound under the average load floor admits no partition: the bounded search, whose
  // partitions are valid, would find none (a relative 1e-6 absorbs rounding in the sums).
  // Exact runs still run, as whether they exceed the budget decides when the search turns
  // bounded.
  if (objective_ == Objective::time && bound * (1 + 1e-6) < load_floor_) return std::nullopt;
  return run_once(bound);
}

std::optional<VDynamicProgram::Found> VDynamicProgram::run_once(double bound) {
  transitions_ = 0;
  over_budget_ = false;
  levels_.assign(pp_, {});
  levels_[0].push_back(State{-1, num_layers_, DpValue{}, -1, DeviceCost{}});
  int states = 1;
  for (int d = 0; d + 1 < pp_; ++d) {
    slot_.clear();
    if (!bounded_ && level_over_budget(d, bound)) {
      over_budget_ = true;
      return std::nullopt;
    }
    for (std::size_t s = 0; s < levels_[d].size() && !over_budget_; ++s) {
      expand(d, levels_[d][s], static_cast<int>(s), bound);
    }
    if (over_budget_) return std::nullopt;
    if (bounded_) keep_most_promising(d + 1);
    states += static_cast<int>(levels_[d + 1].size());
    if (levels_[d + 1].empty()) return std::nullopt;
  }
  std::optional<Found> best;
  for (const State& s : levels_[pp_ - 1]) {
    if (s.j - s.i - 1 < 2) continue;
    const DeviceCost middle = middle_cost(s.i, s.j);
    if (!within(middle, bound)) continue;
    const DpValue v = detail::extend(s.value, middle, objective_, request_.memory_capacity);
    if (!best || detail::better(v, best->value)) best = reconstruct(s, middle, v);
  }
  if (best) {
    best->states = states;
    best->exact = !bounded_;
  }
  return best;
}

VDynamicProgram::Found VDynamicProgram::reconstruct(const State& last, const DeviceCost& middle,
                                                    const DpValue& value) const {
  // Walk the parents back to the outermost device: (i_d, j_d) for d = 0..P-2.
  std::vector<int> enc_end(pp_, 0), dec_start(pp_, 0);
  std::vector<DeviceCost> devices(pp_);
  devices[pp_ - 1] = middle;
  const State* s = &last;
  for (int level = pp_ - 1; level >= 1; --level) {
    enc_end[level - 1] = s->i;
    dec_start[level - 1] = s->j;
    devices[level - 1] = s->cost;
    s = &levels_[level - 1][s->parent];
  }
  // Split the bottom segment into stages P-1 and P where compute balances best.
  const int a = last.i + 1, b = last.j - 1;
  int split = a;
  double best_gap = std::numeric_limits<double>::infinity();
  for (int m = a; m < b; ++m) {
    const double gap = std::fabs(prefix_.compute_in(a, m) - prefix_.compute_in(m + 1, b));
    if (gap < best_gap) {
      best_gap = gap;
      split = m;
    }
  }
  Found f;
  f.first_layer.assign(2 * pp_ + 1, 0);
  for (int d = 0; d < pp_; ++d) f.first_layer[d] = d == 0 ? 0 : enc_end[d - 1] + 1;
  f.first_layer[pp_] = split + 1;
  for (int d = 0; d + 1 < pp_; ++d) f.first_layer[2 * pp_ - 1 - d] = dec_start[d];
  f.first_layer[2 * pp_] = num_layers_;
  f.value = value;
  f.devices = std::move(devices);
  return f;
}

PartitionResult to_result(const VDynamicProgram::Found& f, const PartitionRequest& r,
                          SkipPolicy policy) {
  PartitionResult out;
  out.layout = v_layout(f.first_layer, r.pp);
  out.method = policy == SkipPolicy::local_only ? "v-dp-local" : "v-dp-nonlocal";
  if (!f.exact) out.method += "-bounded";
  out.objective_s = f.value.primary;
  out.bytes_per_microbatch = f.value.bytes;
  out.states_explored = f.states;
  out.exact_transitions = f.exact_transitions;
  detail::record_devices(f.devices, out);
  return out;
}

}  // namespace

PartitionAnswer partition_v(const PartitionRequest& request, SkipPolicy policy) {
  if (request.waves > 1) return detail::partition_waves(request, policy);
  PartitionAnswer outcome;
  const LayerGraph& graph = *request.graph;
  const int L = graph.num_layers();
  // The dense state index is (L+1)^2 ints: 64 MiB at the profiles' limit, which the loader
  // holds every model to.
  if (L < 2 * request.pp || L > kMaxLayers) return outcome;
  const LayerPrefix prefix(graph);
  // Device 0 runs the first and the last layer, whatever the cuts.
  const double lower_bound = std::max(prefix.load_lower_bound(request.pp),
                                      prefix.compute_in(0, 0) + prefix.compute_in(L - 1, L - 1));

  VDynamicProgram time_dp(request, policy, Objective::time);
  if (detail::weights_alone_overflow(request, prefix)) {
    // No time DP run can find a partition (partition_dp.hpp); skip to the shortfall.
  } else if (auto found = detail::solve_increasing(time_dp, lower_bound,
                                                   detail::fine_upper_bound_factors())) {
    outcome.result = to_result(*found, request, policy);
    outcome.result.lower_bound_s = lower_bound;
    bool local = true;
    const PipelineModel model = build_pipeline_model(
        graph, outcome.result.layout, SkipRouting::direct, request.links, request.overlap_comm);
    for (const SkipPlacement& s : model.skips) local = local && s.local;
    outcome.result.all_skips_local = local;
    outcome.result.exact = found->exact && (policy == SkipPolicy::local_only || local ||
                                            detail::links_uniform(request.links));
    outcome.status = outcome.result.exact ? SolveStatus::optimal : SolveStatus::feasible;
    return outcome;
  }
  // local_only: the caller retries non-locally.
  if (policy == SkipPolicy::local_only || !request.shortfall) return outcome;
  if ((outcome.shortfall = detail::weights_alone_shortfall(request, prefix))) return outcome;
  // Nothing fits: find the partition with the smallest peak memory, to say by how much.
  VDynamicProgram memory_dp(request, policy, Objective::memory);
  outcome.shortfall = detail::smallest_shortfall(memory_dp, request, prefix);
  return outcome;
}

}  // namespace pulse
