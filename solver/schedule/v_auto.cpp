// V-auto's building-block search, restated (see v_auto.hpp for the source and commit).
//
// A building block gives each device the slots (mod 6) of its six ops for one microbatch;
// device 0's block is one of 60 starting patterns, each next device's block shifts F and B
// by an offset k (1..5) and f and b by -1 (two offsets, the first for the first len_0
// devices), W and w taking the first free slot after their B and b. Each block becomes a
// schedule as the authors make it (v_auto_block.cpp); the search keeps the candidate whose
// `v_auto_span` is least (the first of equals). Where a block's steps raise, the authors'
// whole search raises, and so does ours (`VAutoSearch::raised`).

#include "v_auto.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "v_auto_block.hpp"

namespace pulse::detail {

namespace {

// W and w in the first free slot at or after their B and b (cyclically).
SlotPattern fill_w(SlotPattern p) {
  std::array<bool, kSlots> used{};
  for (int v : p) {
    if (v >= 0) used[v] = true;
  }
  // (B and b always have their slots here; the authors assert it.)
  for (auto [from, to] : {std::pair{kCellB, kCellW}, std::pair{kCellBb, kCellWw}}) {
    for (int j = 0; j < kSlots; ++j) {
      const int pos = (p[from] + j) % kSlots;
      if (!used[pos]) {
        p[to] = pos;
        used[pos] = true;
        break;
      }
    }
  }
  return p;
}

using Offsets = std::array<int, 4>;  // shifts of F, f, B, b from one device to the next

std::optional<std::vector<SlotPattern>> building_block(const SlotPattern& first, const Offsets& a,
                                                       const Offsets& b, int len_a, int P) {
  std::vector<SlotPattern> block{first};
  for (int i = 0; i + 1 < P; ++i) {
    const Offsets& shift = i < len_a ? a : b;
    SlotPattern next{-1, -1, -1, -1, -1, -1};
    std::array<bool, kSlots> used{};
    for (int v = 0; v < 4; ++v) {
      const int pos = (block[i][v] + shift[v] + kSlots) % kSlots;
      if (used[pos]) return std::nullopt;
      used[pos] = true;
      next[v] = pos;
    }
    block.push_back(fill_w(next));
  }
  return block;
}
std::vector<SlotPattern> starting_patterns() {
  std::vector<SlotPattern> out;
  for (int ff = 1; ff < kSlots; ++ff) {
    for (int b = 1; b < kSlots; ++b) {
      for (int bb = 1; bb < kSlots; ++bb) {
        if (ff == b || ff == bb || b == bb) continue;
        out.push_back(fill_w({0, ff, b, bb, -1, -1}));
      }
    }
  }
  return out;
}

}  // namespace

namespace {

// The search's loop over blocks. With `breaks`, as the authors wrote it: a block whose
// peak is over the budget ends the loop over len_0. Without, every block is tried (a
// superset of what the loop gives at any smaller budget).
VAutoSearch search(int P, int M, int max_mem, bool breaks) {
  VAutoSearch out;
  const int cap = std::min(2 * P, max_mem);
  // A block met again gives what it gave before (only its peak matters then: it may end
  // the loop), and a schedule met again cannot be the first of least span: both are
  // skipped, which changes nothing the authors' search returns.
  std::map<std::vector<SlotPattern>, int> peak_of_block;
  std::set<SlotRows> seen;
  // One block: its peak, its schedule kept if new; false where the authors' code raises.
  auto visit = [&](const std::vector<SlotPattern>& block, int& peak) {
    if (const auto known = peak_of_block.find(block); known != peak_of_block.end()) {
      peak = known->second;
      return true;
    }
    BlockSchedule r = schedule_block(block, P, M, cap);
    if (r.raised) return false;
    peak = peak_of_block[block] = r.peak;
    if (r.rows && r.peak <= cap && seen.insert(*r.rows).second) {
      out.candidates.push_back({std::move(*r.rows), r.peak});
    }
    return true;
  };
  for (const SlotPattern& first : starting_patterns()) {
    for (int a = 0; a < 5; ++a) {
      for (int b = 0; b <= a; ++b) {
        const Offsets shift_a{a + 1, -1, a + 1, -1}, shift_b{b + 1, -1, b + 1, -1};
        for (int len_a = 1; len_a < P; ++len_a) {
          const auto block = building_block(first, shift_a, shift_b, len_a, P);
          if (!block) continue;
          int peak = 0;
          if (!visit(*block, peak)) {
            out.raised = true;
            return out;
          }
          if (breaks && peak > cap) break;
        }
      }
    }
  }
  return out;
}

}  // namespace

VAutoSearch v_auto_candidates(int P, int M, int max_mem) {
  return search(P, M, max_mem, true);
}

VAutoSearch v_auto_pool(int P, int M, int max_mem) {
  return search(P, M, max_mem, false);
}

std::optional<double> v_auto_span(const SlotRows& rows, const ScalarCosts& k) {
  const int P = static_cast<int>(rows.size());
  const double cost[6] = {k.f, k.f, k.b, k.b, k.w, k.w};
  // end[row][letter][mb]. The authors' correctness check does not order the end rows'
  // inputs by column, so the rows advance together: each op once its input has ended.
  std::vector<std::array<std::vector<double>, 6>> end(P);
  std::vector<std::size_t> next(P, 0);
  std::vector<double> row_end(P, 0.0);
  std::vector<bool> started(P, false);
  auto input = [&](int i, char id, int v, std::size_t mb, double& t) {
    const int from = (id == 'F' || id == 'B') ? i - 1 : (id == 'f' || id == 'b') ? i + 1 : -1;
    if (from < 0 || from >= P) return true;
    if (end[from][v].size() <= mb) return false;
    t = std::max(t, end[from][v][mb] + k.c);
    return true;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int i = 0; i < P; ++i) {
      for (; next[i] < rows[i].size(); ++next[i]) {
        const char id = rows[i][next[i]];
        if (id == ' ') continue;
        const int v = slot_letter(id);
        double t = started[i] ? row_end[i] : 0.0;
        if (!input(i, id, v, end[i][v].size(), t)) break;
        end[i][v].push_back(t + cost[v]);
        row_end[i] = t + cost[v];
        started[i] = moved = true;
      }
    }
  }
  double span = 0;
  for (int i = 0; i < P; ++i) {
    if (next[i] != rows[i].size()) return std::nullopt;  // a cycle: their recursion raises
    const double first = end[i][kCellF].front();
    span = std::max(end[i][kCellW].back() - first + k.f, span);
    span = std::max(end[i][kCellWw].back() - first + k.f, span);
  }
  return span;
}

std::optional<SlotRows> v_auto_pick(int P, int M, const ScalarCosts& costs, int max_mem) {
  VAutoSearch s = v_auto_candidates(P, M, max_mem);
  if (s.raised || s.candidates.empty()) return std::nullopt;
  std::optional<std::size_t> best;
  double best_span = 0;
  for (std::size_t c = 0; c < s.candidates.size(); ++c) {
    const std::optional<double> span = v_auto_span(s.candidates[c].rows, costs);
    if (!span) return std::nullopt;
    if (!best || *span < best_span) best = c, best_span = *span;
  }
  return std::move(s.candidates[*best].rows);
}

Schedule slot_rows_schedule(const SlotRows& rows) {
  const int P = static_cast<int>(rows.size());
  Schedule s;
  s.split_backward = true;
  for (int d = 0; d < P; ++d) {
    const StageId down = d, up = 2 * P - 1 - d;
    std::array<int, 6> count{};
    std::vector<Op> ops;
    for (char c : rows[d]) {
      if (c == ' ') continue;
      const int v = slot_letter(c);
      static constexpr OpKind kind[6] = {OpKind::forward,         OpKind::forward,
                                         OpKind::backward_input,  OpKind::backward_input,
                                         OpKind::backward_weight, OpKind::backward_weight};
      const bool on_up = v == kCellFf || v == kCellB || v == kCellW;
      ops.push_back(Op{kind[v], on_up ? up : down, count[v]++});
    }
    s.device_ops.push_back(std::move(ops));
  }
  return s;
}

}  // namespace pulse::detail
