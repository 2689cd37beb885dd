// The conventional baselines: P contiguous stages, stage s on device s, and every skip
// tensor either relayed through each stage boundary between its producer and its consumer
// (what chain-only runtimes such as PyTorch pipelining and DeepSpeed do) or sent directly
// from the producer's stage to the consumer's (a runtime with point-to-point skip support).
//
//   V_0(b)   = cost_0([0, b])
//   V_s(b)   = min over a of max(V_{s-1}(a-1), cost_s([a, b]))      s = 1..P-1
//   answer   = V_{P-1}(L-1)
//
// cost_s([a, b]) = compute + forward send at cut b (output, carried tensors, and relayed
// skips; one message each) + backward send at cut a-1, as PipelineModel derives them; with
// direct routing, skips leaving [a, b] are sent forward and skips entering it have their
// gradients sent back, on the slowest link. memory_s (weights and state plus in-flight
// activations and the skips held) must fit. The same growing upper bound as the V
// partitioner prunes the search.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "partition_dp.hpp"
#include "pulse/partition/partition.hpp"

namespace pulse {

namespace {

using detail::DeviceCost;
using detail::DpFound;
using detail::DpValue;
using detail::LayerPrefix;
using detail::Objective;

class SequentialDynamicProgram {
 public:
  SequentialDynamicProgram(const PartitionRequest& request, Objective objective)
      : request_(request),
        prefix_(*request.graph),
        num_layers_(prefix_.num_layers),
        pp_(request.pp),
        objective_(objective),
        direct_(request.routing == SkipRouting::direct),
        slowest_(detail::slowest_link(request.links)) {
    // Skips crossing each cut, from their ends: + at the producer, - at the consumer, summed
    // (a loop over each skip's span was O(L S)). Direct skips never ride on the main path.
    live_bytes_.assign(num_layers_ + 1, 0);
    live_count_.assign(num_layers_ + 1, 0);
    const auto& skips = request.graph->skip_pairs();
    if (!direct_) {
      for (const SkipPair& s : skips) {
        live_bytes_[s.producer] += s.bytes;
        live_count_[s.producer] += 1;
        live_bytes_[s.consumer] -= s.bytes;
        live_count_[s.consumer] -= 1;
      }
      for (int x = 1; x < num_layers_; ++x) {
        live_bytes_[x] += live_bytes_[x - 1];
        live_count_[x] += live_count_[x - 1];
      }
    }
    live_bytes_.resize(num_layers_);
    live_count_.resize(num_layers_);
    grid_ = detail::SkipGrid::of(num_layers_, skips);
  }

  using Found = DpFound;

  std::optional<Found> run(double bound);

  /// The largest device load of the even split (stage s takes layers [s L / P, (s+1) L / P)).
  double even_split_load() const;

  /// Which end a greedy walk starts from.
  enum class Walk { forward, backward };

  /// The largest device load of a partition found greedily under `bound`. Forward, each
  /// stage in order ends at the last layer it can take within the bound (memory included),
  /// leaving a layer for each later stage; backward, each stage from the last starts at the
  /// first layer it can take, leaving one for each earlier stage. Infinity where the walk
  /// finds none. Any partition's load is at least the optimum's.
  double greedy_load(double bound, Walk walk) const;
  /// The lesser of the two walks' loads.
  double greedy_load(double bound) const {
    return std::min(greedy_load(bound, Walk::forward), greedy_load(bound, Walk::backward));
  }

  /// The least greedy_load found by bisecting its bound between `lower_bound` and the first
  /// of its doublings that finds a partition, to a relative 1e-3; infinity where none does
  /// below 2^20 times the lower bound.
  double greedy_upper_bound(double lower_bound) const;

  /// True when no partition fits memory at all, as one greedy walk at an infinite bound
  /// proves, and false where no walk can tell (see below).
  bool proven_unfit() const;

  /// Whether any partition fits memory at all, whatever its load: the DP's table with a
  /// yes or no in each cell, each cell's walk over starts stopping at the first that fits
  /// (see below).
  bool any_fits() const;

  /// A floor under the largest device load of every partition (the time objective), sends
  /// included: the stage holding layer m spans some [a, b] with a <= m <= b, so its load is
  /// at least that of [m, b] with its forward send at b alone (the last stage sends none),
  /// on the fastest link between neighbours. The most, over a few m, of the least over b.
  double send_floor() const;

 private:
  struct Cell {
    DpValue value;
    int start = -1;  // first layer of stage s; -1 when unreachable
  };
  /// at(s, b): the best value with stages 0..s covering layers [0, b], for b in
  /// [s, L - P + s] (each later stage needs a layer): L - P + 1 cells a stage, not L, and
  /// each device's cost recomputed for the answer alone rather than kept in every cell (at
  /// pp 1024 over 2048 layers, 34 MB a run where it was 117 MB).
  class Table {
   public:
    Table(int pp, int num_layers)
        : width_(num_layers - pp + 1), cells_(static_cast<std::size_t>(pp) * width_) {}
    Cell& at(int s, int b) { return cells_[index(s, b)]; }
    const Cell& at(int s, int b) const { return cells_[index(s, b)]; }

   private:
    std::size_t index(int s, int b) const {
      return static_cast<std::size_t>(s) * width_ + static_cast<std::size_t>(b - s);
    }
    std::size_t width_;
    std::vector<Cell> cells_;
  };

  /// Stage s's forward send at the cut after layer b (output, relayed skips, carried
  /// tensors: one message each), whatever its first layer; 0 for the last stage.
  double forward_send(int s, int b, std::int64_t* bytes = nullptr) const;
  /// The same send at the cut after layer b (b < L - 1) on `link`.
  double forward_send_on(const LinkClass& link, int b, std::int64_t* bytes = nullptr) const;
  /// Stage s's backward send (gradients of its input, relayed skips and carried tensors) at
  /// the cut before its first layer a, whatever its last; 0 for the first stage.
  double backward_send(int s, int a, std::int64_t* bytes = nullptr) const;
  double upper_value(int s, int b, const Table& table, double bound) const;

  /// What the walk over stage s's starts knows of all starts at or before one, from row
  /// s - 1 of the table: for each last layer x of stage s - 1, over the x' <= x it reaches,
  /// the last such x' and, for the time objective, the least of two floors under the value
  /// of stage s starting at x' + 1 (see cannot_beat).
  struct EarlierFloors {
    std::vector<int> reached;         // the last x' <= x row s - 1 reaches; -1: none
    std::vector<double> primary;      // max(x' value, stage s's backward send alone)
    std::vector<std::int64_t> bytes;  // x' bytes + stage s's backward bytes at x' + 1
  };
  /// Fills `floors` from row s - 1 of `table` (s >= 1); `back` and `back_bytes` are stage
  /// s's backward sends by first layer.
  void fill_floors(int s, const Table& table, const std::vector<double>& back,
                   const std::vector<std::int64_t>& back_bytes, EarlierFloors& floors) const;
  /// Stage s taking layers [a, b].
  DeviceCost cost(int s, int a, int b) const;
  /// Direct routing: skips sent from [a, b] and gradients sent back into it.
  double direct_sends(int a, int b, std::int64_t inside, int inside_count, DeviceCost& c,
                      std::int64_t& held) const;
  /// The earliest first layer stage s ending at b may take within the memory within()
  /// allows, as far as its weights, state, activations and the skips it relays past b tell
  /// (b + 1: none). cost() charges those and more that is never negative (the skips relayed
  /// into it, those inside it); the weights, state and activations only grow as the stage
  /// takes earlier layers, and the skips relayed past b stay as they are, so no earlier
  /// start fits. The DP's walk over starts stops there (GPipe, every microbatch in flight,
  /// pp 256 over 2048 layers and 1024 nested skips: the walk went on to layer 0 at every
  /// cell, 5 s for a placement that fits no run).
  int first_within_memory(int s, int b, double bound) const {
    const double limit =
        objective_ == Objective::memory ? bound : static_cast<double>(request_.memory_capacity);
    const std::int64_t relayed = s + 1 < pp_ ? live_bytes_[b] : 0;
    const auto fits = [&](int a) {
      return static_cast<double>(memory_bound(request_.memory, prefix_.params_in(a, b), request_.dp,
                                              request_.inflight[s],
                                              prefix_.activation_in(a, b) + relayed)) <= limit;
    };
    if (fits(s)) return s;
    int lo = s, hi = b + 1;  // fits(lo) is false; fits(hi) is taken as true (no start)
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      (fits(mid) ? hi : lo) = mid;
    }
    return hi;
  }
  /// The time objective: true when no start of stage s at or before a beats `best`. Each
  /// such start a' <= a, after stage s - 1 ends at x' = a' - 1, has the primary
  /// max(x' primary, its load), and its load is at least `least` (the compute of [a, b] and
  /// the forward send, which only grow as the stage does) and at least its backward send
  /// alone (device_load is monotone in both terms, and direct routing only adds sends):
  /// so at least max(least, floor_primary). Its bytes are x' bytes, its backward bytes,
  /// the forward bytes and, with direct routing, more: at least `floor_bytes`. A primary
  /// at least best's less half better()'s relative tie is not better than best's, and
  /// then more bytes are worse.
  static bool cannot_beat(const DpValue& best, double least, double floor_primary,
                          std::int64_t floor_bytes) {
    return std::max(least, floor_primary) >= best.primary * (1 - 5e-13) && floor_bytes > best.bytes;
  }
  bool within(const DeviceCost& c, double bound) const {
    if (objective_ == Objective::memory) return static_cast<double>(c.memory) <= bound;
    return c.load <= bound && c.memory <= request_.memory_capacity;
  }

  const PartitionRequest& request_;
  LayerPrefix prefix_;
  int num_layers_, pp_;
  Objective objective_;
  std::vector<std::int64_t> live_bytes_;  // [x]: skip bytes crossing the cut after layer x
  std::vector<int> live_count_;
  std::shared_ptr<const detail::SkipGrid> grid_;  // skips inside a stage, summed
  bool direct_;
  LinkClass slowest_;
};

double SequentialDynamicProgram::direct_sends(int a, int b, std::int64_t inside, int inside_count,
                                              DeviceCost& c, std::int64_t& held) const {
  const LayerPrefix& p = prefix_;
  const std::int64_t produced = p.skip_bytes_by_producer[b + 1] - p.skip_bytes_by_producer[a];
  const std::int64_t consumed = p.skip_bytes_by_consumer[b + 1] - p.skip_bytes_by_consumer[a];
  const int produced_n = p.skip_count_by_producer[b + 1] - p.skip_count_by_producer[a];
  const int consumed_n = p.skip_count_by_consumer[b + 1] - p.skip_count_by_consumer[a];
  c.bytes += (produced - inside) + (consumed - inside);
  held = produced + consumed - inside;
  return transfer_time(slowest_, produced_n - inside_count, produced - inside) +
         transfer_time(slowest_, consumed_n - inside_count, consumed - inside);
}

double SequentialDynamicProgram::forward_send(int s, int b, std::int64_t* bytes) const {
  if (s + 1 >= pp_) return 0.0;
  return forward_send_on(request_.links[s][s + 1], b, bytes);
}

double SequentialDynamicProgram::forward_send_on(const LinkClass& link, int b,
                                                 std::int64_t* bytes) const {
  const LayerPrefix& p = prefix_;
  const std::int64_t sent = p.output[b] + live_bytes_[b] + p.carried_bytes_upto[b + 1];
  if (bytes) *bytes = sent;
  return transfer_time(link, 1 + live_count_[b] + p.carried_count_upto[b + 1], sent);
}

double SequentialDynamicProgram::backward_send(int s, int a, std::int64_t* bytes) const {
  if (s == 0) return 0.0;
  const LayerPrefix& p = prefix_;
  const std::int64_t sent = p.output[a - 1] + live_bytes_[a - 1] + p.carried_grad_bytes_upto[a];
  if (bytes) *bytes = sent;
  return transfer_time(request_.links[s][s - 1],
                       1 + live_count_[a - 1] + p.carried_grad_count_upto[a], sent);
}

DeviceCost SequentialDynamicProgram::cost(int s, int a, int b) const {
  const detail::SkipGrid::Skips in = grid_->sum(a, b, a, b);  // skips with both ends in it
  const std::int64_t inside = in.bytes;
  const int inside_count = static_cast<int>(in.count);
  const LayerPrefix& p = prefix_;
  DeviceCost c;
  double sends = 0;
  std::int64_t relayed = 0;
  if (s + 1 < pp_) {
    std::int64_t bytes = 0;
    sends += forward_send(s, b, &bytes);
    c.bytes += bytes;
    relayed += live_bytes_[b];
  }
  if (s > 0) {
    std::int64_t bytes = 0;
    sends += backward_send(s, a, &bytes);
    c.bytes += bytes;
    relayed += live_bytes_[a - 1];
  }
  std::int64_t held = relayed + inside;
  if (direct_) sends += direct_sends(a, b, inside, inside_count, c, held);
  c.load = device_load(p.compute_in(a, b), sends, request_.overlap_comm);
  c.memory = memory_bound(request_.memory, p.params_in(a, b), request_.dp, request_.inflight[s],
                          p.activation_in(a, b) + held);
  return c;
}

double SequentialDynamicProgram::even_split_load() const {
  double most = 0;
  for (int s = 0; s < pp_; ++s) {
    const int a = static_cast<int>(static_cast<std::int64_t>(s) * num_layers_ / pp_);
    const int b = static_cast<int>(static_cast<std::int64_t>(s + 1) * num_layers_ / pp_) - 1;
    most = std::max(most, cost(s, a, b).load);
  }
  return most;
}

double SequentialDynamicProgram::greedy_load(double bound, Walk walk) const {
  const bool forward = walk == Walk::forward;
  double most = 0;
  int edge = forward ? 0 : num_layers_ - 1;  // the stage's first layer (forward) or last
  for (int k = 0; k + 1 < pp_; ++k) {
    const int s = forward ? k : pp_ - 1 - k;
    // The stage's other end runs outwards from `edge`, as far as the stages beyond it allow.
    const int far = forward ? num_layers_ - (pp_ - s) : s;
    const int step = forward ? 1 : -1;
    int found = -1;
    double load = 0;
    for (int x = edge; forward ? x <= far : x >= far; x += step) {
      const int a = forward ? edge : x, b = forward ? x : edge;
      if (prefix_.compute_in(a, b) > bound) break;  // the load only grows from here
      if (const DeviceCost c = cost(s, a, b); within(c, bound)) {
        found = x;
        load = c.load;
      }
    }
    if (found < 0) return std::numeric_limits<double>::infinity();
    most = std::max(most, load);
    edge = found + step;
  }
  const DeviceCost rest = forward ? cost(pp_ - 1, edge, num_layers_ - 1) : cost(0, 0, edge);
  if (!within(rest, bound)) return std::numeric_limits<double>::infinity();
  return std::max(most, rest.load);
}

// A proof that nothing fits, where a walk is complete. Suppose a stage's memory only grows as
// it takes more layers (true with direct routing, whose skips held are those with an end in
// the stage, and where no skip crosses a cut; a relayed skip is held by the stages it passes,
// not the ones it ends in), and the in-flight counts never fall from stage to stage. Take
// any partition that fits, stage s ending at e_s, and the forward walk at an infinite bound
// (memory alone decides), stage s ending at g_s. Then g_s >= e_s for every s, by induction:
// stage s starts at g_{s-1} + 1 >= e_{s-1} + 1. If that start is at most e_s, the layers up
// to e_s lie inside the partition's stage s and fit, so the walk ends at e_s or later. If not,
// the one layer at the start lies in a later stage t of the partition, and fits there; stage s
// holds no more microbatches in flight than t, and nothing else in its memory depends on
// which stage it is, so it fits in stage s too and the walk goes past e_s. The last stage
// takes layers inside the partition's last. So where the walk fails, no partition fits.
// The backward walk is the same proof mirrored, for in-flight counts that never rise.
bool SequentialDynamicProgram::proven_unfit() const {
  if (!direct_ && !request_.graph->skip_pairs().empty()) return false;
  const std::vector<int>& inflight = request_.inflight;
  const double infinity = std::numeric_limits<double>::infinity();
  if (std::is_sorted(inflight.begin(), inflight.end()) &&
      !std::isfinite(greedy_load(infinity, Walk::forward))) {
    return true;
  }
  return std::is_sorted(inflight.rbegin(), inflight.rend()) &&
         !std::isfinite(greedy_load(infinity, Walk::backward));
}

double SequentialDynamicProgram::greedy_upper_bound(double lower_bound) const {
  double high = lower_bound, found = greedy_load(high);
  for (int i = 0; i < 20 && !std::isfinite(found); ++i) found = greedy_load(high *= 2);
  if (!std::isfinite(found)) return found;
  double low = high == lower_bound ? lower_bound : high / 2;
  while (high > low * (1 + 1e-3)) {
    const double mid = std::sqrt(low * high);
    const double load = greedy_load(mid);
    if (std::isfinite(load)) {
      high = mid;
      found = std::min(found, load);
    } else {
      low = mid;
    }
  }
  return found;
}

// The table of run() at an infinite bound, each cell saying only whether stages 0..s can
// cover layers [0, b] within memory. A cell's walk stops at its first start that fits after
// a reachable cell, and at first_within_memory's floor: where memory binds, no earlier start
// fits; where it does not, the first start tried fits. So a model that fits nowhere costs one
// walk to that floor a cell (GPipe, all 2048 microbatches in flight, pp 1024 over 2048
// layers relaying 1024 nested skips: where the ladder's four runs took 1.1 s).
bool SequentialDynamicProgram::any_fits() const {
  const double infinity = std::numeric_limits<double>::infinity();
  std::vector<char> before(num_layers_, 0), row(num_layers_, 0);
  for (int s = 0; s < pp_; ++s) {
    std::fill(row.begin(), row.end(), 0);
    for (int b = s; b <= num_layers_ - pp_ + s; ++b) {
      if (s == pp_ - 1 && b != num_layers_ - 1) continue;
      const int first = s == 0 ? 0 : std::max(s, first_within_memory(s, b, infinity));
      for (int a = s == 0 ? 0 : b; a >= first; --a) {
        if (s > 0 && !before[a - 1]) continue;
        if (within(cost(s, a, b), infinity)) {
          row[b] = 1;
          break;
        }
      }
    }
    std::swap(before, row);
  }
  return before[num_layers_ - 1] != 0;
}

double SequentialDynamicProgram::send_floor() const {
  const int L = num_layers_;
  if (pp_ < 2) return 0.0;
  LinkClass fastest{"fastest", 0.0, std::numeric_limits<double>::infinity()};
  for (int s = 0; s + 1 < pp_; ++s) {
    const LinkClass& link = request_.links[s][s + 1];
    fastest.bandwidth_bytes_per_s =
        std::max(fastest.bandwidth_bytes_per_s, link.bandwidth_bytes_per_s);
    fastest.latency_s = std::min(fastest.latency_s, link.latency_s);
  }
  const auto send_at = [&](int b) { return b == L - 1 ? 0.0 : forward_send_on(fastest, b); };
  // The layers m tried: 16 evenly spaced, and the one before the cut that sends the most (a
  // stage through it either sends that much or runs on past it). Any m gives a floor.
  int busiest = 0;
  double most = 0;
  for (int b = 0; b < L; ++b) {
    if (const double sent = send_at(b); sent > most) {
      busiest = b;
      most = sent;
    }
  }
  std::vector<int> layers{busiest};
  for (int i = 0; i < 16; ++i) layers.push_back(static_cast<int>(std::int64_t{i} * L / 16));
  double floor = 0;
  for (int m : layers) {
    double least = std::numeric_limits<double>::infinity();
    for (int b = m; b < L; ++b) {
      const double compute = prefix_.compute_in(m, b);
      if (compute >= least) break;  // the load only grows with the compute from here
      least = std::min(least, device_load(compute, send_at(b), request_.overlap_comm));
    }
    floor = std::max(floor, least);
  }
  return floor;
}

// The primary value of one start of stage s at cell b (the start that won cell b - 1, the
// stage now one layer longer), or infinity where that start is not one the cell can take.
// Cell b's best is at most this (a relative 1e-12 per tie of better() aside): taken from
// the walk below, the walk either reaches that start (and keeps it or something better) or
// stops before it, where the stage alone is already over its best. So a start whose
// previous stages alone are over it (by more than those ties) is never the cell's best;
// nor does leaving it out change which start is: while only such starts have been seen,
// the first start under it replaces any of them, and the walk stops no earlier without
// them (it stops on the best so far). From then on the cell's walk is the same.
double SequentialDynamicProgram::upper_value(int s, int b, const Table& table, double bound) const {
  const double none = std::numeric_limits<double>::infinity();
  if (s == 0 || b == s) return none;
  const Cell& last = table.at(s, b - 1);
  const int a = last.start;
  if (a < s) return none;
  const Cell& prev = table.at(s - 1, a - 1);
  if (prev.start < 0) return none;
  const DeviceCost c = cost(s, a, b);
  if (!within(c, bound)) return none;
  return detail::extend(prev.value, c, objective_, request_.memory_capacity).primary;
}

void SequentialDynamicProgram::fill_floors(int s, const Table& table,
                                           const std::vector<double>& back,
                                           const std::vector<std::int64_t>& back_bytes,
                                           EarlierFloors& floors) const {
  const bool time = objective_ == Objective::time;
  floors.reached.assign(num_layers_, -1);
  if (time) {
    floors.primary.assign(num_layers_, std::numeric_limits<double>::infinity());
    floors.bytes.assign(num_layers_, std::numeric_limits<std::int64_t>::max());
  }
  int reached = -1;
  double primary = std::numeric_limits<double>::infinity();
  std::int64_t bytes = std::numeric_limits<std::int64_t>::max();
  // Stage s - 1 ends at x in [s - 1, L - P + s - 1]; stage s then starts at x + 1.
  for (int x = s - 1; x <= num_layers_ - pp_ + s - 1; ++x) {
    const Cell& c = table.at(s - 1, x);
    if (c.start >= 0) {
      reached = x;
      if (time) {
        primary = std::min(primary, std::max(c.value.primary,
                                             device_load(0.0, back[x + 1], request_.overlap_comm)));
        bytes = std::min(bytes, c.value.bytes + back_bytes[x + 1]);
      }
    }
    floors.reached[x] = reached;
    if (time) {
      floors.primary[x] = primary;
      floors.bytes[x] = bytes;
    }
  }
}

std::optional<SequentialDynamicProgram::Found> SequentialDynamicProgram::run(double bound) {
  const bool time = objective_ == Objective::time;
  Table table(pp_, num_layers_);
  int states = 0;
  // back[a]: stage s's backward send when its first layer is a (time objective only).
  std::vector<double> back(num_layers_, 0.0);
  std::vector<std::int64_t> back_bytes(num_layers_, 0);
  EarlierFloors floors;
  for (int s = 0; s < pp_; ++s) {
    if (time) {
      for (int a = s; a <= num_layers_ - pp_ + s; ++a)
        back[a] = backward_send(s, a, &back_bytes[a]);
    }
    if (s > 0) fill_floors(s, table, back, back_bytes, floors);
    // Stage s ends at b in [s, L - P + s]: each later stage needs a layer.
    for (int b = s; b <= num_layers_ - pp_ + s; ++b) {
      if (s == pp_ - 1 && b != num_layers_ - 1) continue;
      Cell best;
      // A stage ending at b pays at least its forward send there: with it, the time bound
      // stops the walk where sends, not compute, fill the stage (load is monotone in both).
      std::int64_t forward_bytes = 0;
      const double forward = time ? forward_send(s, b, &forward_bytes) : 0.0;
      const double skip_above = upper_value(s, b, table, bound) * (1 + 1e-9);
      for (int a = b, first = first_within_memory(s, b, bound); a >= first; --a) {
        const double least = device_load(prefix_.compute_in(a, b), forward, request_.overlap_comm);
        if (time && least > bound) break;
        // Nor can it beat the best start found (its primary is at least `least`, which only
        // grows as the stage does; 2e-12 is past better()'s relative tie).
        if (time && best.start >= 0 && least > best.value.primary * (1 + 2e-12)) break;
        if (s > 0 && floors.reached[a - 1] < 0) break;  // no earlier start takes anything
        if (time && s > 0 && best.start >= 0 &&
            cannot_beat(best.value, least, floors.primary[a - 1],
                        floors.bytes[a - 1] + forward_bytes)) {
          break;
        }
        const Cell* prev = s == 0 ? nullptr : &table.at(s - 1, a - 1);
        if (s == 0 && a != 0) continue;
        // Row s - 1 reaches no layer from floors.reached[a - 1] + 1 to a - 1: those starts
        // take nothing, and the breaks above hold at the next start if they held at any
        // skipped one (their floors only grow as the start moves earlier).
        if (prev && prev->start < 0) {
          a = floors.reached[a - 1] + 2;
          continue;
        }
        // Worse than a start the cell can take, beyond the ties better() allows: never this
        // cell's best, nor in the way of the one that is (upper_value).
        if (prev && prev->value.primary > skip_above) continue;
        if (time) {
          // The stage's load with both its sends, the same sum cost() forms (direct routing
          // only adds to it): over the bound, or past the best start as above, and cost()
          // need not run.
          const double load =
              device_load(prefix_.compute_in(a, b), forward + back[a], request_.overlap_comm);
          if (load > bound) continue;
          if (best.start >= 0 && load > best.value.primary * (1 + 2e-12)) continue;
          // The same floors for this start alone (its own value before stage s, its own
          // backward bytes): exact unless direct routing adds to them.
          if (best.start >= 0 && prev &&
              cannot_beat(best.value, load, prev->value.primary,
                          prev->value.bytes + back_bytes[a] + forward_bytes)) {
            continue;
          }
        }
        const DeviceCost c = cost(s, a, b);
        if (!within(c, bound)) continue;
        const DpValue v =
            detail::extend(prev ? prev->value : DpValue{}, c, objective_, request_.memory_capacity);
        if (best.start < 0 || detail::better(v, best.value)) best = Cell{v, a};
      }
      if (best.start >= 0) ++states;
      table.at(s, b) = best;
    }
  }
  const Cell& last = table.at(pp_ - 1, num_layers_ - 1);
  if (last.start < 0) return std::nullopt;
  Found f;
  f.first_layer.assign(pp_ + 1, 0);
  f.first_layer[pp_] = num_layers_;
  f.devices.resize(pp_);
  int b = num_layers_ - 1;
  for (int s = pp_ - 1; s >= 0; --s) {
    const Cell& cell = table.at(s, b);
    f.first_layer[s] = cell.start;
    f.devices[s] = cost(s, cell.start, b);
    b = cell.start - 1;
  }
  f.value = last.value;
  f.states = states;
  return f;
}

}  // namespace

// The bounds the time DP tries. Where sends outweigh compute (hundreds of stages relaying
// skips), every coarse factor of the compute bound fails, and a run at an infinite bound
// costs O(P L^2) (pp 512 over 2048 layers: minutes). So the ladder goes on by the same
// steps (x1.6) up to the even split's load, then that load, then infinity. Any run that
// finds a partition finds the infinite run's: a device over the bound never belongs to an
// optimum, and each cell keeps its best in the same order. A run's cost grows with its
// bound, so the steps cost at most a few times the one that succeeds.
//
// Runs below the sends' floor (send_floor) cannot find a partition, and are left out: a run
// that finds one finds the same optimum whichever ran before it, so leaving out runs that
// fail changes nothing but the work (4096 layers relaying 2048 nested skips at pp 64: ten
// runs failed in each sequential DP before the one at 17.2 x the compute bound found the
// optimum; from the floor, two).
// The floor is taken a relative 1e-9 lower: it and the DP sum the same terms in other
// orders.
//
// Where a greedy walk (greedy_upper_bound: forward or backward, the lesser load) finds a
// partition, its load bounds the optimum from above, and one run at it finds the optimum:
// every run below it is left out, failing or not (the 4096-layer model at pp 64: chain
// 1.3751 x the compute bound, the optimum itself; relaying the skips 13.31 x against the
// optimum's 12.53, where the ladder failed at 6.72 and 10.75 and found it at 17.2: 0.98 s of
// runs; `--family chain-relayed` there, 6.60 -> 5.53 s in all). At pp 1024 over 2048 layers
// relaying 1024 nested skips, 1F1B's counts in flight fall from stage to stage: the forward
// walk gave the first stages all they could hold and found nothing, and the ladder failed at
// 70 and 113 x the compute bound before 164 found the optimum; the backward walk's 162.5
// finds it at once. A walk costs O(L) cost() calls a bound. Where neither walk finds a
// partition and nothing fits at all (any_fits), no run is made. Infinity stays last, should
// a run at that load fail by the sums' rounding (the walk and the DP add the same terms in
// other orders, and the run's bound is taken a relative 1e-9 higher).
std::vector<double> sequential_factors(const SequentialDynamicProgram& dp, double lower_bound,
                                       double send_floor, double greedy) {
  if (std::isfinite(greedy)) {
    return {greedy / lower_bound * (1 + 1e-9), std::numeric_limits<double>::infinity()};
  }
  std::vector<double> factors = detail::coarse_upper_bound_factors();
  const double infinity = factors.back();
  factors.pop_back();
  const double even = dp.even_split_load() / lower_bound * (1 + 1e-9);
  while (factors.back() * 1.6 < even) factors.push_back(factors.back() * 1.6);
  if (even > factors.back()) factors.push_back(even);
  factors.push_back(infinity);
  const double floor = send_floor * (1 - 1e-9) / lower_bound;
  std::vector<double> kept;
  for (double f : factors) {
    if (f >= floor) kept.push_back(f);
  }
  return kept;
}

bool sequential_partition_exists(const PartitionRequest& request) {
  const LayerGraph& graph = *request.graph;
  if (graph.num_layers() < request.pp) return false;
  const LayerPrefix prefix(graph);
  if (detail::weights_alone_overflow(request, prefix)) return false;
  const SequentialDynamicProgram dp(request, Objective::time);
  if (dp.proven_unfit()) return false;
  return std::isfinite(dp.greedy_load(std::numeric_limits<double>::infinity())) || dp.any_fits();
}

PartitionAnswer partition_sequential(const PartitionRequest& request) {
  PartitionAnswer outcome;
  const LayerGraph& graph = *request.graph;
  const int L = graph.num_layers();
  if (L < request.pp) return outcome;
  const LayerPrefix prefix(graph);
  const double lower_bound = prefix.load_lower_bound(request.pp);

  SequentialDynamicProgram time_dp(request, Objective::time);
  const bool unfit = detail::weights_alone_overflow(request, prefix) || time_dp.proven_unfit();
  const double greedy = unfit ? 0.0 : time_dp.greedy_upper_bound(lower_bound);
  if (unfit || (!std::isfinite(greedy) && !time_dp.any_fits())) {
    // No time DP run can find a partition (partition_dp.hpp); skip to the shortfall.
  } else if (const double floor = time_dp.send_floor();
             auto found = detail::solve_increasing(
                 time_dp, lower_bound, sequential_factors(time_dp, lower_bound, floor, greedy))) {
    PartitionResult& r = outcome.result;
    r.send_floor_s = floor;
    r.greedy_load_s = std::isfinite(greedy) ? greedy : 0.0;
    r.layout = sequential_layout(found->first_layer, request.pp);
    r.method = request.routing == SkipRouting::direct ? "sequential-dp-direct" : "sequential-dp";
    r.objective_s = found->value.primary;
    r.lower_bound_s = lower_bound;
    r.bytes_per_microbatch = found->value.bytes;
    r.exact = request.routing == SkipRouting::forwarded || detail::links_uniform(request.links);
    r.states_explored = found->states;
    bool local = true;
    for (const SkipPair& s : graph.skip_pairs()) {
      local = local && r.layout.stage_of(s.producer) == r.layout.stage_of(s.consumer);
    }
    r.all_skips_local = local;
    detail::record_devices(found->devices, r);
    outcome.status = r.exact ? SolveStatus::optimal : SolveStatus::feasible;
    return outcome;
  }
  if (!request.shortfall) return outcome;
  if ((outcome.shortfall = detail::weights_alone_shortfall(request, prefix))) return outcome;
  SequentialDynamicProgram memory_dp(request, Objective::memory);
  outcome.shortfall = detail::smallest_shortfall(memory_dp, request, prefix);
  return outcome;
}

}  // namespace pulse
