// One building block's schedule (see v_auto_block.hpp), the steps of the authors'
// v_auto_schedule.py (sail-sg/zero-bubble-pipeline-parallelism at commit 39f2c186):
//   1. the block repeated for every microbatch (6 slots apart), the ops before the first
//      and after the last microbatch cleared;
//   2. squeezed (every op as early as its input and its row allow, order kept);
//   3. the warm-up rebuilt (forwards up to the peak, then B W f / B W F triples) and
//      squeezed again;
//   4. with fewer microbatches than 2P (the block is built for 2P), the extra ones removed,
//      W ops of the warm-up pushed to the end where memory allows, squeezed;
//   5. the cool-down rebuilt (B and b at fixed distances from device 0's last f, then the
//      W ops in free slots), squeezed; free slots filled greedily by later ops that keep
//      their inputs and the row's peak; W labels reassigned in the order of their B;
//   6. kept if it is a correct schedule and its peak has not grown.
// Every step follows the authors' code cell for cell, including where it raises (an
// assertion or an index out of range: `BlockSchedule::raised`); negative indices count
// from the row's end, as in Python.

#include "v_auto_block.hpp"

#include <algorithm>
#include <array>
#include <deque>

namespace pulse::detail {

namespace {

constexpr const char* kLetters = "FfBbWw";

// The authors' code raises here.
struct SearchRaised {};

void check_or_raise(bool ok) {
  if (!ok) throw SearchRaised{};
}

// Letter index (0..5) of a cell, -1 for a free one; a lookup table, as the loops below
// read every cell several times per candidate.
struct LetterTable {
  std::array<signed char, 256> index;
  LetterTable() {
    index.fill(-1);
    for (int v = 0; v < kSlots; ++v)
      index[static_cast<unsigned char>(kLetters[v])] = static_cast<signed char>(v);
  }
};
const LetterTable kTable;

int letter_of(char c) {
  return kTable.index[static_cast<unsigned char>(c)];
}

bool upper(char c) {
  return c == 'F' || c == 'B' || c == 'W';
}

// +1 for a forward, -1 for a weight gradient: the slot model's memory.
int held_by(char c) {
  return (c == 'F' || c == 'f') - (c == 'W' || c == 'w');
}

// Python's list indexing: negative counts from the end, out of range raises.
char& at(std::string& row, long j) {
  if (j < 0) j += static_cast<long>(row.size());
  check_or_raise(j >= 0 && j < static_cast<long>(row.size()));
  return row[static_cast<std::size_t>(j)];
}

std::vector<int> row_peaks(const SlotRows& rows) {
  std::vector<int> peaks;
  for (const std::string& row : rows) {
    int held = 0, peak = 0;
    for (char c : row) {
      held += held_by(c);
      peak = std::max(peak, held);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

int peak_of(const SlotRows& rows) {
  const std::vector<int> p = row_peaks(rows);
  return p.empty() ? 0 : *std::max_element(p.begin(), p.end());
}

std::size_t common_length(const SlotRows& rows) {
  std::size_t len = 0;
  for (const std::string& row : rows) {
    check_or_raise(len == 0 || len == row.size());
    len = std::max(len, row.size());
  }
  return len;
}

// Steps 1: the block repeated (4P + M + 1 times), then the ops of microbatches before the
// first and after the M-th cleared, found by one scan along the first block.
SlotRows repeat_block(const std::vector<SlotPattern>& block, int P, int M) {
  SlotRows rows;
  for (int i = 0; i < P; ++i) {
    std::string one(kSlots, ' ');
    for (int v = 0; v < kSlots; ++v) {
      if (block[i][v] >= 0) one[block[i][v]] = kLetters[v];
    }
    std::string row;
    for (int k = 0; k < 4 * P + M + 1; ++k) row += one;
    rows.push_back(std::move(row));
  }
  auto clear = [&](int i, long pos, int step) {
    while (pos >= 0 && pos < static_cast<long>(rows[i].size())) {
      rows[i][pos] = ' ';
      pos += step * kSlots;
    }
  };
  long index = kSlots;
  for (char id : std::string("FfBb")) {
    for (int n = 0; n < P; ++n) {
      const int i = upper(id) ? n : P - 1 - n;
      for (int j = 0; j < kSlots; ++j) {
        if (at(rows[i], index) != id) {
          ++index;
          continue;
        }
        clear(i, index - kSlots, -1);
        clear(i, index + static_cast<long>(kSlots) * M, 1);
        ++index;
        if (id == 'B' || id == 'b') {
          const char wid = id == 'B' ? 'W' : 'w';
          for (int k = 0; k < kSlots; ++k) {
            if (at(rows[i], index + k) == wid) {
              clear(i, index + k - kSlots, -1);
              clear(i, index + k + static_cast<long>(kSlots) * M, 1);
              break;
            }
          }
        }
        break;
      }
    }
  }
  return rows;
}

// Every op as early as its row and its input allow, order kept: columns left to right,
// F B W downwards through the devices, then f b w upwards.
SlotRows squeeze(const SlotRows& rows, int M) {
  const int P = static_cast<int>(rows.size());
  SlotRows out;
  for (const std::string& row : rows) out.emplace_back(row.size(), ' ');
  const std::size_t len = common_length(rows);
  std::vector<int> count(static_cast<std::size_t>(P) * kSlots, 0);
  // placed[(mb * P + row) * 6 + letter]: the column op (letter, mb) of the row went to.
  std::vector<int> placed(static_cast<std::size_t>(P) * M * kSlots, -1);
  std::vector<int> next(P, 0);
  std::vector<int> up;  // rows whose cell in this column is f, b or w, top down
  up.reserve(P);
  auto slot = [&](int mb, int row, int v) -> int& {
    return placed[(static_cast<std::size_t>(mb) * P + row) * kSlots + v];
  };
  auto place = [&](int i, std::size_t j) {
    const char id = rows[i][j];
    const int v = letter_of(id);
    const int cnt = count[i * kSlots + v];
    check_or_raise(cnt < M);
    int index = next[i];
    if (v == kCellW || v == kCellWw || (i == 0 && (v == kCellF || v == kCellB)) ||
        (i == P - 1 && (v == kCellFf || v == kCellBb))) {
      if (i == 0 && v == kCellB) check_or_raise(slot(cnt, i, kCellFf) >= 0);
      if (i == P - 1 && v == kCellFf) check_or_raise(slot(cnt, i, kCellF) >= 0);
      if (i == P - 1 && v == kCellBb) check_or_raise(slot(cnt, i, kCellB) >= 0);
    } else {
      const int input = slot(cnt, upper(id) ? i - 1 : i + 1, v);
      check_or_raise(input >= 0);
      index = std::max(input + 1, next[i]);
    }
    at(out[i], index) = id;
    count[i * kSlots + v] = cnt + 1;
    slot(cnt, i, v) = index;
    next[i] = index + 1;
  };
  for (std::size_t j = 0; j < len; ++j) {
    up.clear();
    for (int i = 0; i < P; ++i) {
      const char id = rows[i][j];
      if (id == ' ') continue;
      if (upper(id)) {
        place(i, j);
      } else {
        up.push_back(i);
      }
    }
    for (auto it = up.rbegin(); it != up.rend(); ++it) place(*it, j);
  }
  const int new_len = *std::max_element(next.begin(), next.end());
  for (std::string& row : out) row.resize(std::min<std::size_t>(row.size(), new_len));
  return out;
}

struct WarmupCounts {
  int f = 0, ff = 0, b = 0, w = 0;
};

// Step 3 for one row: its ops before the first b are cleared and counted, then laid out as
// forwards, F f pairs, and B W (f or F) triples.
void rebuild_warmup_row(std::string& row, int i, int P, int want_f, int want_ff) {
  WarmupCounts c;
  for (std::size_t j = 0; j < row.size(); ++j) {
    const char ch = row[j];
    if (ch == 'b') break;
    if (ch == 'F')
      ++c.f;
    else if (ch == 'f')
      ++c.ff;
    else if (ch == 'B')
      ++c.b;
    else if (ch == 'W')
      ++c.w;
    else
      check_or_raise(ch == ' ');
    row[j] = ' ';
  }
  WarmupCounts u;
  long j = i;
  for (int k = 0; k < 2 * (P - 1 - i); ++k, ++j) {
    if (u.f < want_f && u.f < c.f) at(row, j) = 'F', ++u.f;
  }
  for (int k = 0; k < i + 1; ++k) {
    if (u.f < want_f && u.f < c.f) at(row, j) = 'F', ++u.f;
    ++j;
    if (u.ff < want_ff && u.ff < c.ff) at(row, j) = 'f', ++u.ff;
    ++j;
  }
  while (u.f < c.f || u.ff < c.ff || u.b < c.b || u.w < c.w) {
    if (u.b < c.b) at(row, j) = 'B', ++u.b;
    ++j;
    if (u.w < c.w) at(row, j) = 'W', ++u.w;
    ++j;
    if (u.ff < c.ff) {
      check_or_raise(u.ff < u.f);
      at(row, j) = 'f', ++u.ff;
    } else if (u.f < c.f) {
      at(row, j) = 'F', ++u.f;
    }
    ++j;
  }
}

// `held`: the rows' peak (known already: squeezing keeps each row's order, so its peak).
void rebuild_warmup(SlotRows& rows, int M, int held) {
  const int P = static_cast<int>(rows.size());
  const int peak = std::min(held, 2 * P);
  for (int i = 0; i < P; ++i) {
    const int ff = std::min({i + 1, peak / 2, M});
    rebuild_warmup_row(rows[i], i, P, std::min(peak - ff, M), ff);
  }
}

// Step 4: per row, only the first M ops of each kind stay.
void keep_first(SlotRows& rows, int M) {
  for (std::string& row : rows) {
    std::array<int, 6> count{};
    for (char& c : row) {
      if (c == ' ') continue;
      if (count[letter_of(c)] >= M)
        c = ' ';
      else
        ++count[letter_of(c)];
    }
  }
}

// Step 4, with few microbatches: each row's earliest W ops move to its end (padding every
// row alike) until the row would reach `peak`.
void release_warmup_w(SlotRows& rows, int peak) {
  const std::vector<int> peaks = row_peaks(rows);
  const std::size_t len = common_length(rows);
  const int least = *std::min_element(peaks.begin(), peaks.end());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string pad(static_cast<std::size_t>(std::max(0, peak - least)), ' ');
    int moved = 0;
    for (std::size_t j = 0; j < len; ++j) {
      if (peaks[i] + moved >= peak) break;
      if (rows[i][j] == 'W' || rows[i][j] == 'w') {
        at(pad, moved) = rows[i][j];
        rows[i][j] = ' ';
        ++moved;
      }
    }
    rows[i] += pad;
  }
}

struct CooldownCounts {
  int b = 0, bb = 0, w = 0, ww = 0;
};

// Step 5a for one row: its last B and b ops (as many as the peak allows) and enough W ops
// at its end are lifted; the B and b go back at fixed distances from device 0's last f.
void rebuild_cooldown_row(std::string& row, int i, int P, int peak, int max_b, int max_bb,
                          long& start) {
  CooldownCounts c;
  long last_ff = -1;
  for (long j = static_cast<long>(row.size()) - 1; j >= 0; --j) {
    const char ch = row[j];
    if (ch == 'f' && last_ff == -1) last_ff = j;
    if (ch == 'B' && c.b < i + 1 && c.b < max_b) row[j] = ' ', ++c.b;
    if (ch == 'b' && c.bb < max_bb) row[j] = ' ', ++c.bb;
  }
  for (long j = static_cast<long>(row.size()) - 1; j >= 0; --j) {
    if (c.w >= c.b && c.ww >= c.bb && c.w + c.ww >= peak) break;
    if (row[j] == 'W') row[j] = ' ', ++c.w;
    if (row[j] == 'w') row[j] = ' ', ++c.ww;
  }
  if (i == 0) start = last_ff;
  for (int k = 0; k < c.bb; ++k) {
    char& cell = at(row, start - i + 2 * P - 2 * k);
    check_or_raise(cell == ' ');
    cell = 'b';
  }
  for (int k = 0; k < c.b; ++k) at(row, start + 1 + i - 2 * k) = 'B';
}

// Step 5a, then the lifted W ops into the free slots after the row's last W (those of B
// first), the rest appended; rows padded alike and squeezed. `peak`: the rows' peak.
SlotRows rebuild_cooldown(SlotRows rows, int M, int peak) {
  const int P = static_cast<int>(rows.size());
  check_or_raise(peak <= 2 * P);
  const int max_bb = std::min((peak + 1) / 2, M);
  const int max_b = std::min(peak - max_bb, M);
  long start = -1;
  for (int i = 0; i < P; ++i) rebuild_cooldown_row(rows[i], i, P, peak, max_b, max_bb, start);
  std::size_t len = 0;
  for (std::string& row : rows) {
    long last_w = -1;
    for (long j = static_cast<long>(row.size()) - 1; j >= 0; --j) {
      if (row[j] == 'W' || row[j] == 'w') {
        last_w = j;
        break;
      }
    }
    int w = 0, ww = 0;
    for (long j = 0; j < static_cast<long>(row.size()); ++j) {
      const char ch = row[j];
      w += ch == 'B' ? 1 : ch == 'W' ? -1 : 0;
      ww += ch == 'b' ? 1 : ch == 'w' ? -1 : 0;
      if (ch != ' ' || j <= last_w) continue;
      if (w > 0)
        row[j] = 'W', --w;
      else if (ww > 0)
        row[j] = 'w', --ww;
    }
    row.append(static_cast<std::size_t>(std::max(0, w)), 'W');
    row.append(static_cast<std::size_t>(std::max(0, ww)), 'w');
    len = std::max(len, row.size());
  }
  for (std::string& row : rows) row.resize(len, ' ');
  return squeeze(rows, M);
}

// The columns ops have reached while filling free cells, and how many of each kind each
// row has passed.
struct Progress {
  int P, M;
  std::vector<int> count;   // [row * 6 + letter]
  std::vector<int> placed;  // [(mb * P + row) * 6 + letter]: column, -1 not yet
  std::vector<int> held;    // per row: the slot model's memory so far

  Progress(int p, int m)
      : P(p),
        M(m),
        count(static_cast<std::size_t>(p) * kSlots, 0),
        placed(static_cast<std::size_t>(p) * m * kSlots, -1),
        held(p, 0) {}
  int& column(int mb, int row, int v) {
    const std::size_t k = (static_cast<std::size_t>(mb) * P + row) * kSlots + v;
    check_or_raise(k < placed.size());
    return placed[k];
  }
  int passed(int row, int v) const { return count[row * kSlots + v]; }
  void record(int row, char id, long j) {
    const int v = letter_of(id);
    column(count[row * kSlots + v]++, row, v) = static_cast<int>(j);
    held[row] += held_by(id);
  }
};

// Whether the row's next op of letter v may move to column j: its input is in an earlier
// column (or, on the end rows, its own row's predecessor has passed).
bool may_move(int v, int i, long j, Progress& g) {
  const int cnt = g.passed(i, v);
  if (v == kCellF || v == kCellB) {
    if (i > 0) {
      const int x = g.column(cnt, i - 1, v);
      return x > -1 && x < j;
    }
    return v != kCellB || g.passed(i, kCellFf) > cnt;
  }
  if (v == kCellFf || v == kCellBb) {
    if (i + 1 < g.P) {
      const int x = g.column(cnt, i + 1, v);
      return x > -1 && x < j;
    }
    return g.passed(i, v == kCellFf ? kCellF : kCellB) > cnt;
  }
  return g.passed(i, v == kCellW ? kCellB : kCellBb) > cnt;
}

// Step 5b for the free cell (i, j): the first later op of the row (of each kind, only the
// next) that may move there without raising the row past the peak.
void fill_cell(std::string& row, int i, long j, long len, const std::array<long, 6>& last, int peak,
               Progress& g) {
  std::array<bool, 6> open{};
  int left = 0;
  for (int v = 0; v < kSlots; ++v) left += open[v] = last[v] > j;
  int delta = 0, delta_peak = 0;
  for (long k = j + 1; k < len && left > 0; ++k) {
    const char id = row[k];
    delta += held_by(id);
    const int before = delta_peak;
    delta_peak = std::max(delta_peak, delta);
    const int v = letter_of(id);
    if (v < 0 || !open[v]) continue;
    open[v] = false;
    --left;
    if ((v == kCellF || v == kCellFf) && g.held[i] + before >= peak) continue;
    if (!may_move(v, i, j, g)) continue;
    row[j] = id;
    row[k] = ' ';
    g.record(i, id, j);
    return;
  }
}

// Step 5b: every free cell, left to right.
void fill_free_cells(SlotRows& rows, int M) {
  const int P = static_cast<int>(rows.size());
  const int peak = peak_of(rows);
  const long len = static_cast<long>(common_length(rows));
  std::vector<std::array<long, 6>> last(P, std::array<long, 6>{-1, -1, -1, -1, -1, -1});
  for (int i = 0; i < P; ++i) {
    for (long j = 0; j < len; ++j) {
      if (rows[i][j] != ' ') last[i][letter_of(rows[i][j])] = j;
    }
  }
  Progress g(P, M);
  for (long j = 0; j < len; ++j) {
    for (int i = 0; i < P; ++i) {
      if (rows[i][j] != ' ') {
        g.record(i, rows[i][j], j);
      } else {
        fill_cell(rows[i], i, j, len, last[i], peak, g);
      }
    }
  }
}

// W labels in the order of their B and b; every row must hold M ops of each kind.
void relabel_w(SlotRows& rows, int M) {
  for (std::string& row : rows) {
    std::array<int, 6> count{};
    for (char c : row) {
      if (c != ' ') ++count[letter_of(c)];
    }
    for (int n : count) check_or_raise(n == M);
    std::deque<char> queue;
    for (char& c : row) {
      if (c == 'B') queue.push_back('W');
      if (c == 'b') queue.push_back('w');
      if (c == 'W' || c == 'w') {
        check_or_raise(!queue.empty());
        c = queue.front();
        queue.pop_front();
      }
    }
    check_or_raise(queue.empty());
  }
}

// The authors' `check_correctness`: all ops there, W after its B, inputs in earlier columns.
bool correct(const SlotRows& rows, int M) {
  const int P = static_cast<int>(rows.size());
  std::vector<std::array<long, 6>> col(static_cast<std::size_t>(P) * M,
                                       std::array<long, 6>{-1, -1, -1, -1, -1, -1});
  for (int i = 0; i < P; ++i) {
    std::array<int, 6> count{};
    for (long j = 0; j < static_cast<long>(rows[i].size()); ++j) {
      if (rows[i][j] == ' ') continue;
      const int v = letter_of(rows[i][j]);
      check_or_raise(count[v] < M);
      col[static_cast<std::size_t>(count[v]++) * P + i][v] = j;
    }
    for (int n : count) {
      if (n != M) return false;
    }
  }
  for (int i = 0; i < P; ++i) {
    for (int m = 0; m < M; ++m) {
      const auto& c = col[static_cast<std::size_t>(m) * P + i];
      if (c[kCellB] >= c[kCellW] || c[kCellBb] >= c[kCellWw]) return false;
      // As the authors check: the end rows' inputs from their neighbours are not ordered.
      if (i == 0) {
        if (c[kCellFf] >= c[kCellB]) return false;
      } else if (i == P - 1) {
        if (c[kCellF] >= c[kCellFf] || c[kCellB] >= c[kCellBb]) return false;
      } else {
        const auto& up = col[static_cast<std::size_t>(m) * P + i - 1];
        const auto& down = col[static_cast<std::size_t>(m) * P + i + 1];
        if (up[kCellF] >= c[kCellF] || up[kCellB] >= c[kCellB] || down[kCellFf] >= c[kCellFf] ||
            down[kCellBb] >= c[kCellBb]) {
          return false;
        }
      }
    }
  }
  return true;
}
// The authors' `schedule_by_building_block` for one block (steps 1-6).
BlockSchedule steps_of(const std::vector<SlotPattern>& block, int P, int M, int max_mem) {
  const int rm = std::max(M, 2 * P);
  SlotRows rows = repeat_block(block, P, rm);
  int first_peak = peak_of(rows);
  if ((M == rm && first_peak > max_mem) || first_peak > 2 * P) return {std::nullopt, first_peak};
  rows = squeeze(rows, rm);
  rebuild_warmup(rows, rm, first_peak);
  rows = squeeze(rows, rm);
  int peak = peak_of(rows);
  if (peak > first_peak) return {std::nullopt, first_peak};
  if (M < rm) {
    keep_first(rows, M);
    if (M <= P && 2 * M <= max_mem) release_warmup_w(rows, std::min(2 * P, peak));
    rows = squeeze(rows, M);
    first_peak = peak = peak_of(rows);
    if (peak > max_mem) return {std::nullopt, peak};
  }
  rows = rebuild_cooldown(std::move(rows), M, peak);
  fill_free_cells(rows, M);
  relabel_w(rows, M);
  peak = peak_of(rows);
  if (peak > first_peak) return {std::nullopt, first_peak};
  if (!correct(rows, M)) return {std::nullopt, peak};
  return {std::move(rows), peak};
}

}  // namespace

int slot_letter(char c) {
  return letter_of(c);
}

BlockSchedule schedule_block(const std::vector<SlotPattern>& block, int P, int M, int max_mem) {
  try {
    return steps_of(block, P, M, max_mem);
  } catch (const SearchRaised&) {
    BlockSchedule raised;
    raised.raised = true;
    return raised;
  }
}

}  // namespace pulse::detail
