// ZB-V's fill loop, restated from the authors' zbv.py (see zbv_fill.hpp for the commit).
//
// Device i runs chunk 0 (stage i, the way down) and chunk 1 (stage 2P-1-i, the way up).
// An op costs the scalar F, B or W, or, given per-stage costs, its own stage's (the only
// change to the authors' loop: their cost lookup made per stage).
// Forwards of chunk 0 and backwards of chunk 1 flow from device i-1 to i; the others the
// other way. Each op ends at max(the device's last end, its input's end + c) + its cost,
// the authors' own timing. The loop:
//   1. one chunk-0 forward everywhere; from the bottom device up, device i runs more
//      chunk-0 forwards (through devices 0..i) while they end before its first chunk-1
//      input arrives and 2 + 2i more would fit, then its first chunk-1 forward; then each
//      device runs forwards until it has as many as the one above and more chunk-1 ones;
//   2. 2M rounds of one backward per device (chunk 1 once its input is there, else
//      chunk 0), then one forward per device (chunk 1 once its input is there, else chunk
//      0), W ops before either while they end before the input arrives, one more when the
//      wait exceeds the device's share of idle time (for forwards and chunk-0 backwards
//      only if that variant allows), and W ops first whenever memory is full;
//   3. the remaining W ops.
// Passes repeat with the previous pass's idle times approved while the largest drops.
// Where the authors' code asserts, the variant raises, and so does their create_schedule:
// here the pass stops there (Filler::raised) and the variant gives no schedule.

#include "zbv_fill.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <optional>

namespace pulse::detail {

namespace {

enum Cat : int { kCatF = 0, kCatB = 1, kCatW = 2 };

struct Variant {
  bool fill_f = true, fill_b = true;
};

class Filler {
 public:
  Filler(const ZbvFillRequest& r, Variant v, std::vector<double> approved)
      : S_(r.num_devices),
        M_(r.num_microbatches),
        c_(r.costs.c),
        max_mem_(r.max_mem),
        v_(v),
        approved_(std::move(approved)) {
    stage_cost_ = r.stage_costs;
    if (stage_cost_.size() != static_cast<std::size_t>(2 * S_)) {
      stage_cost_.assign(static_cast<std::size_t>(2 * S_), {r.costs.f, r.costs.b, r.costs.w});
    }
    count_.assign(S_, std::array<int, 6>{});
    end_.assign(static_cast<std::size_t>(6) * S_ * M_, -1.0);
    cur_.assign(S_, 0.0);
    mem_.assign(S_, 0);
    bubble_.assign(S_, 0.0);
    pending_.assign(S_, {});
    order_.assign(S_, {});
    if (approved_.empty()) approved_.assign(S_, -1.0);
    max_approved_ = *std::max_element(approved_.begin(), approved_.end());
  }

  void run() {
    warm_up();
    for (int round = 0; round < 2 * M_ && !raised_; ++round) {
      backwards();
      forwards();
    }
    for (int i = 0; i < S_; ++i) {
      while (!raised_ && !pending_[i].empty()) put_w(i);
    }
  }

  /// Where the authors' code asserts: the pass stopped there, and its schedule is none.
  bool raised() const { return raised_; }

  double largest(int stage = -1) const {
    double most = 0;
    for (double b : bubble_) most = std::max(most, b);
    if (stage >= 0) most = std::max(most, max_approved_ - approved_[stage]);
    return most;
  }
  double max_approved() const { return max_approved_; }
  const std::vector<double>& bubbles() const { return bubble_; }
  ZbvFill result() const;

 private:
  long id(int cat, int chunk, int stage, int mb) const {
    return static_cast<long>(cat) * 2 * S_ * M_ + static_cast<long>(chunk) * S_ * M_ +
           static_cast<long>(stage) * M_ + mb;
  }
  // Python's indexing: -1 is the last node (W of chunk 1, last device, last microbatch).
  double end_at(long node) const {
    if (node < 0) node += static_cast<long>(end_.size());
    return end_[static_cast<std::size_t>(node)];
  }

  // What an op of `cat` and `chunk` costs on `device`: its stage's figure. A forward of
  // chunk 1 and a backward of chunk 0 are stage 2P-1-i's (the way up), the others stage i's.
  double cost(int cat, int chunk, int device) const {
    const bool up = cat == kCatF ? chunk == 1 : chunk == 0;
    return stage_cost_[static_cast<std::size_t>(up ? 2 * S_ - 1 - device : device)][cat];
  }
  // The authors' assertion: false (and the pass stops) where theirs fails.
  bool check(bool ok) {
    raised_ = raised_ || !ok;
    return ok;
  }
  void put(int cat, int chunk, int stage);
  void put_w(int stage) {
    if (!check(!pending_[stage].empty())) return;
    const int chunk = pending_[stage].front();
    pending_[stage].pop_front();
    put(kCatW, chunk, stage);
  }
  // W ops into the wait for the input `node` (-1: none), and one more past the share.
  void fill(int stage, long node, bool one_more_allowed) {
    while (!raised_ && !pending_[stage].empty() && node >= 0 &&
           end_at(node) + c_ >= cur_[stage] + cost(kCatW, pending_[stage].front(), stage)) {
      put_w(stage);
    }
    if (!raised_ && !pending_[stage].empty() &&
        end_at(node) + c_ - cur_[stage] > largest(stage) - bubble_[stage] && one_more_allowed) {
      put_w(stage);
    }
  }
  void warm_up();
  void backwards();
  void forwards();

  const int S_, M_;
  const double c_;
  const int max_mem_;
  const Variant v_;
  std::vector<double> approved_;
  double max_approved_ = -1;
  bool raised_ = false;
  std::vector<std::array<double, 3>> stage_cost_;  // [stage along the V][cat]
  static constexpr int kMem[3] = {1, 0, -1};
  std::vector<std::array<int, 6>> count_;  // [stage][cat * 2 + chunk]
  std::vector<double> end_;
  std::vector<double> cur_;
  std::vector<int> mem_;
  std::vector<double> bubble_;
  std::vector<std::deque<int>> pending_;                // chunks of backwards whose W has not run
  std::vector<std::vector<std::array<int, 3>>> order_;  // (cat, chunk, mb) per device
};

void Filler::put(int cat, int chunk, int stage) {
  if (raised_) return;
  const double own = cost(cat, chunk, stage);
  const double no_bubble = cur_[stage] + own;
  double end = no_bubble;
  const int n = count_[stage][cat * 2 + chunk];
  if (!check(n < M_) || !check(mem_[stage] + kMem[cat] <= max_mem_)) return;
  if (cat > 0 || chunk > 0) {
    const int last = cat * 2 + chunk - 1;
    const long before = cat < 2 ? id(last / 2, last % 2, stage, n) : id(kCatB, chunk, stage, n);
    if (!check(end_at(before) >= 0)) return;
  }
  if (cat < 2 && ((chunk == 1 && stage < S_ - 1) || (chunk == 0 && stage > 0))) {
    const long input = id(cat, chunk, chunk == 1 ? stage + 1 : stage - 1, n);
    if (!check(end_at(input) >= 0)) return;
    end = std::max(end, end_at(input) + c_ + own);
  }
  if (count_[stage][0] > 0) bubble_[stage] += end - no_bubble;
  end_[static_cast<std::size_t>(id(cat, chunk, stage, n))] = end;
  cur_[stage] = end;
  mem_[stage] += kMem[cat];
  order_[stage].push_back({cat, chunk, n});
  if (cat == kCatB) pending_[stage].push_back(chunk);
  ++count_[stage][cat * 2 + chunk];
}

void Filler::warm_up() {
  for (int i = 0; i < S_; ++i) put(kCatF, 0, i);
  for (int i = S_ - 1; i >= 0; --i) {
    if (i == S_ - 1) {
      put(kCatF, 1, i);
      continue;
    }
    const double arrival = end_at(id(kCatF, 1, i + 1, 0)) + c_;
    while (!raised_ && mem_[i] + kMem[kCatF] * (2 + i * 2) <= max_mem_ &&
           cur_[i] + cost(kCatF, 0, i) <= arrival && count_[i][0] < M_) {
      for (int j = 0; j <= i; ++j) put(kCatF, 0, j);
    }
    put(kCatF, 1, i);
  }
  int chunk = 0;
  for (int i = 1; i < S_; ++i) {
    auto behind = [&] {
      const auto &mine = count_[i], &above = count_[i - 1];
      return mine[0] + mine[1] < above[0] + above[1] || (mine[1] <= above[1] && above[1] < M_);
    };
    while (!raised_ && behind()) {
      for (int j = S_ - 1; j >= i; --j) {
        if (count_[j][chunk] < M_) put(kCatF, chunk, j);
      }
      chunk = 1 - chunk;
    }
  }
}

void Filler::backwards() {
  for (int i = 0; i < S_; ++i) {
    while (!raised_ && mem_[i] + kMem[kCatB] > max_mem_) put_w(i);
  }
  if (raised_) return;
  std::vector<int> chunk0, chunk1;
  for (int i = 0; i < S_; ++i) {
    if (count_[i][3] >= count_[i][2]) {
      chunk0.push_back(i);
    } else if (i == S_ - 1 || end_at(id(kCatB, 1, i + 1, count_[i][3])) >= 0 ||
               count_[i][2] >= M_) {
      chunk1.push_back(i);
    } else {
      chunk0.push_back(i);
    }
  }
  std::vector<std::pair<int, int>> turns;
  for (auto it = chunk1.rbegin(); it != chunk1.rend(); ++it) turns.push_back({*it, 1});
  for (int i : chunk0) turns.push_back({i, 0});
  for (const auto& [i, chunk] : turns) {
    if (raised_) return;
    long input = -1;
    if (chunk == 1 && i < S_ - 1) input = id(kCatB, 1, i + 1, count_[i][3]);
    if (chunk == 0 && i > 0) input = id(kCatB, 0, i - 1, count_[i][2]);
    fill(i, input, chunk == 1 || v_.fill_b);
    put(kCatB, chunk, i);
  }
}

void Filler::forwards() {
  for (int i = 0; i < S_ && !raised_; ++i) {
    if (count_[i][1] >= M_) continue;
    int chunk = -1;
    if (count_[i][1] >= count_[i][0]) {
      chunk = 0;
    } else if (i == S_ - 1) {
      chunk = 1;
    } else if (end_at(id(kCatF, 1, i + 1, count_[i][1])) >= 0) {
      chunk = 1;
    } else if (count_[i][0] < M_ && (i == 0 || end_at(id(kCatF, 0, i - 1, count_[i][0])) >= 0)) {
      chunk = 0;
    }
    if (chunk < 0) continue;
    while (!raised_ && mem_[i] + kMem[kCatF] > max_mem_) put_w(i);
    long input = -1;
    if (chunk == 0 && i > 0) input = id(kCatF, 0, i - 1, count_[i][0]);
    if (chunk == 1 && i < S_ - 1) input = id(kCatF, 1, i + 1, count_[i][1]);
    fill(i, input, v_.fill_f);
    put(kCatF, chunk, i);
  }
}

ZbvFill Filler::result() const {
  ZbvFill out;
  out.schedule.split_backward = true;
  for (int i = 0; i < S_; ++i) {
    std::vector<Op> ops;
    for (const auto& [cat, chunk, mb] : order_[i]) {
      // As the authors map chunks to stages: a forward of chunk 1 and a backward of chunk
      // 0 are stage 2P-1-i's (the way up), the others stage i's.
      const bool up = cat == kCatF ? chunk == 1 : chunk == 0;
      const OpKind kind = cat == kCatF   ? OpKind::forward
                          : cat == kCatB ? OpKind::backward_input
                                         : OpKind::backward_weight;
      ops.push_back(Op{kind, up ? 2 * S_ - 1 - i : i, mb});
    }
    out.schedule.device_ops.push_back(std::move(ops));
  }
  out.makespan = *std::max_element(end_.begin(), end_.end());
  out.largest_bubble = largest();
  return out;
}

// One variant: a pass, then passes with its idle times approved while the largest drops
// (the authors' recursion). None where a pass raises, as their recursion then raises.
std::optional<ZbvFill> refine(const ZbvFillRequest& r, Variant v, std::vector<double> approved) {
  Filler pass(r, v, std::move(approved));
  pass.run();
  if (pass.raised()) return std::nullopt;
  ZbvFill mine = pass.result();
  if (pass.max_approved() < 0 || mine.largest_bubble < pass.max_approved()) {
    std::optional<ZbvFill> deeper = refine(r, v, pass.bubbles());
    if (!deeper) return std::nullopt;
    if (deeper->largest_bubble < mine.largest_bubble) return deeper;
  }
  return mine;
}

}  // namespace

std::vector<ZbvFill> zbv_fill_variants(const ZbvFillRequest& r) {
  std::vector<ZbvFill> out;
  if (r.num_devices < 1 || r.num_microbatches < 1) return out;
  for (bool fill_b : {true, false}) {
    for (bool fill_f : {true, false}) {
      if (auto variant = refine(r, Variant{fill_f, fill_b}, {})) out.push_back(std::move(*variant));
    }
  }
  return out;
}

std::optional<ZbvFill> zbv_fill_pick(const ZbvFillRequest& r) {
  std::vector<ZbvFill> all = zbv_fill_variants(r);
  if (all.size() != 4) return std::nullopt;  // the authors' create_schedule raises
  std::size_t best = 0;
  for (std::size_t k = 1; k < all.size(); ++k) {
    if (all[k].largest_bubble < all[best].largest_bubble) best = k;
  }
  return std::move(all[best]);
}

}  // namespace pulse::detail
