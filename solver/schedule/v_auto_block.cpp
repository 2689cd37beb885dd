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
// from the row's end, as in Python. A step that meets such a place returns at once with no
// value (nullopt, false, or a null cell), and so does every step above it.

#include "v_auto_block.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <optional>

namespace pulse::detail {

namespace {

constexpr const char* kLetters = "FfBbWw";

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

// Python's list indexing: negative counts from the end; out of range (where Python raises)
// there is no cell.
char* cell(std::string& row, long j) {
  if (j < 0) j += static_cast<long>(row.size());
  if (j < 0 || j >= static_cast<long>(row.size())) return nullptr;
  return &row[static_cast<std::size_t>(j)];
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

// The rows' one length; none where they differ (the authors' code raises).
std::optional<std::size_t> common_length(const SlotRows& rows) {
  std::size_t len = 0;
  for (const std::string& row : rows) {
    if (len != 0 && len != row.size()) return std::nullopt;
    len = std::max(len, row.size());
  }
  return len;
}

// Steps 1: the block repeated (4P + M + 1 times), then the ops of microbatches before the
// first and after the M-th cleared, found by one scan along the first block.
std::optional<SlotRows> repeat_block(const std::vector<SlotPattern>& block, int P, int M) {
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
        const char* here = cell(rows[i], index);
        if (here == nullptr) return std::nullopt;
        if (*here != id) {
          ++index;
          continue;
        }
        clear(i, index - kSlots, -1);
        clear(i, index + static_cast<long>(kSlots) * M, 1);
        ++index;
        if (id == 'B' || id == 'b') {
          const char wid = id == 'B' ? 'W' : 'w';
          for (int k = 0; k < kSlots; ++k) {
            const char* w = cell(rows[i], index + k);
            if (w == nullptr) return std::nullopt;
            if (*w == wid) {
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
std::optional<SlotRows> squeeze(const SlotRows& rows, int M) {
  const int P = static_cast<int>(rows.size());
  SlotRows out;
  for (const std::string& row : rows) out.emplace_back(row.size(), ' ');
  const std::optional<std::size_t> len = common_length(rows);
  if (!len) return std::nullopt;
  std::vector<int> count(static_cast<std::size_t>(P) * kSlots, 0);
  // placed[(mb * P + row) * 6 + letter]: the column op (letter, mb) of the row went to.
  std::vector<int> placed(static_cast<std::size_t>(P) * M * kSlots, -1);
  std::vector<int> next(P, 0);
  std::vector<int> up;  // rows whose cell in this column is f, b or w, top down
  up.reserve(P);
  auto slot = [&](int mb, int row, int v) -> int& {
    return placed[(static_cast<std::size_t>(mb) * P + row) * kSlots + v];
  };
  // False where the authors' code raises.
  auto place = [&](int i, std::size_t j) {
    const char id = rows[i][j];
    const int v = letter_of(id);
    const int cnt = count[i * kSlots + v];
    if (cnt >= M) return false;
    int index = next[i];
    if (v == kCellW || v == kCellWw || (i == 0 && (v == kCellF || v == kCellB)) ||
        (i == P - 1 && (v == kCellFf || v == kCellBb))) {
      if (i == 0 && v == kCellB && slot(cnt, i, kCellFf) < 0) return false;
      if (i == P - 1 && v == kCellFf && slot(cnt, i, kCellF) < 0) return false;
      if (i == P - 1 && v == kCellBb && slot(cnt, i, kCellB) < 0) return false;
    } else {
      const int input = slot(cnt, upper(id) ? i - 1 : i + 1, v);
      if (input < 0) return false;
      index = std::max(input + 1, next[i]);
    }
    char* target = cell(out[i], index);
    if (target == nullptr) return false;
    *target = id;
    count[i * kSlots + v] = cnt + 1;
    slot(cnt, i, v) = index;
    next[i] = index + 1;
    return true;
  };
  for (std::size_t j = 0; j < *len; ++j) {
    up.clear();
    for (int i = 0; i < P; ++i) {
      const char id = rows[i][j];
      if (id == ' ') continue;
      if (!upper(id)) {
        up.push_back(i);
      } else if (!place(i, j)) {
        return std::nullopt;
      }
    }
    for (auto it = up.rbegin(); it != up.rend(); ++it) {
      if (!place(*it, j)) return std::nullopt;
    }
  }
  const int new_len = *std::max_element(next.begin(), next.end());
  for (std::string& row : out) row.resize(std::min<std::size_t>(row.size(), new_len));
  return out;
}

struct WarmupCounts {
  int f = 0, ff = 0, b = 0, w = 0;
};

// Step 3 for one row: its ops before the first b are cleared and counted, then laid out as
// forwards, F f pairs, and B W (f or F) triples. False where the authors' code raises.
bool rebuild_warmup_row(std::string& row, int i, int P, int want_f, int want_ff) {
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
    else if (ch != ' ')
      return false;
    row[j] = ' ';
  }
  WarmupCounts u;
  long j = i;
  // Writes `letter` at column j and counts it in `n`; false past the row's end.
  auto put = [&](char letter, int& n) {
    char* target = cell(row, j);
    if (target == nullptr) return false;
    *target = letter;
    ++n;
    return true;
  };
  for (int k = 0; k < 2 * (P - 1 - i); ++k, ++j) {
    if (u.f < want_f && u.f < c.f && !put('F', u.f)) return false;
  }
  for (int k = 0; k < i + 1; ++k) {
    if (u.f < want_f && u.f < c.f && !put('F', u.f)) return false;
    ++j;
    if (u.ff < want_ff && u.ff < c.ff && !put('f', u.ff)) return false;
    ++j;
  }
  while (u.f < c.f || u.ff < c.ff || u.b < c.b || u.w < c.w) {
    if (u.b < c.b && !put('B', u.b)) return false;
    ++j;
    if (u.w < c.w && !put('W', u.w)) return false;
    ++j;
    if (u.ff < c.ff) {
      if (u.ff >= u.f || !put('f', u.ff)) return false;
    } else if (u.f < c.f && !put('F', u.f)) {
      return false;
    }
    ++j;
  }
  return true;
}

// `held`: the rows' peak (known already: squeezing keeps each row's order, so its peak).
// False where the authors' code raises.
bool rebuild_warmup(SlotRows& rows, int M, int held) {
  const int P = static_cast<int>(rows.size());
  const int peak = std::min(held, 2 * P);
  for (int i = 0; i < P; ++i) {
    const int ff = std::min({i + 1, peak / 2, M});
    if (!rebuild_warmup_row(rows[i], i, P, std::min(peak - ff, M), ff)) return false;
  }
  return true;
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
// row alike) until the row would reach `peak`. False where the authors' code raises.
bool release_warmup_w(SlotRows& rows, int peak) {
  const std::vector<int> peaks = row_peaks(rows);
  const std::optional<std::size_t> len = common_length(rows);
  if (!len) return false;
  const int least = *std::min_element(peaks.begin(), peaks.end());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string pad(static_cast<std::size_t>(std::max(0, peak - least)), ' ');
    int moved = 0;
    for (std::size_t j = 0; j < *len; ++j) {
      if (peaks[i] + moved >= peak) break;
      if (rows[i][j] == 'W' || rows[i][j] == 'w') {
        char* target = cell(pad, moved);
        if (target == nullptr) return false;
        *target = rows[i][j];
        rows[i][j] = ' ';
        ++moved;
      }
    }
    rows[i] += pad;
  }
  return true;
}

struct CooldownCounts {
  int b = 0, bb = 0, w = 0, ww = 0;
};

// Step 5a for one row: its last B and b ops (as many as the peak allows) and enough W ops
// at its end are lifted; the B and b go back at fixed distances from device 0's last f.
// False where the authors' code raises.
bool rebuild_cooldown_row(std::string& row, int i, int P, int peak, int max_b, int max_bb,
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
    char* target = cell(row, start - i + 2 * P - 2 * k);
    if (target == nullptr || *target != ' ') return false;
    *target = 'b';
  }
  for (int k = 0; k < c.b; ++k) {
    char* target = cell(row, start + 1 + i - 2 * k);
    if (target == nullptr) return false;
    *target = 'B';
  }
  return true;
}

// Step 5a, then the lifted W ops into the free slots after the row's last W (those of B
// first), the rest appended; rows padded alike and squeezed. `peak`: the rows' peak. None
// where the authors' code raises.
std::optional<SlotRows> rebuild_cooldown(SlotRows rows, int M, int peak) {
  const int P = static_cast<int>(rows.size());
  if (peak > 2 * P) return std::nullopt;
  const int max_bb = std::min((peak + 1) / 2, M);
  const int max_b = std::min(peak - max_bb, M);
  long start = -1;
  for (int i = 0; i < P; ++i) {
    if (!rebuild_cooldown_row(rows[i], i, P, peak, max_b, max_bb, start)) return std::nullopt;
  }
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
  /// The column of op (v, mb) of the row; none past the last microbatch (Python raises).
  int* column(int mb, int row, int v) {
    const std::size_t k = (static_cast<std::size_t>(mb) * P + row) * kSlots + v;
    return k < placed.size() ? &placed[k] : nullptr;
  }
  int passed(int row, int v) const { return count[row * kSlots + v]; }
  /// False where the authors' code raises.
  bool record(int row, char id, long j) {
    const int v = letter_of(id);
    int* at = column(count[row * kSlots + v]++, row, v);
    if (at == nullptr) return false;
    *at = static_cast<int>(j);
    held[row] += held_by(id);
    return true;
  }
};

// Whether the row's next op of letter v may move to column j: its input is in an earlier
// column (or, on the end rows, its own row's predecessor has passed). None where the
// authors' code raises.
std::optional<bool> may_move(int v, int i, long j, Progress& g) {
  const int cnt = g.passed(i, v);
  if (v == kCellF || v == kCellB) {
    if (i > 0) {
      const int* x = g.column(cnt, i - 1, v);
      if (x == nullptr) return std::nullopt;
      return *x > -1 && *x < j;
    }
    return v != kCellB || g.passed(i, kCellFf) > cnt;
  }
  if (v == kCellFf || v == kCellBb) {
    if (i + 1 < g.P) {
      const int* x = g.column(cnt, i + 1, v);
      if (x == nullptr) return std::nullopt;
      return *x > -1 && *x < j;
    }
    return g.passed(i, v == kCellFf ? kCellF : kCellB) > cnt;
  }
  return g.passed(i, v == kCellW ? kCellB : kCellBb) > cnt;
}

// Step 5b for the free cell (i, j): the first later op of the row (of each kind, only the
// next) that may move there without raising the row past the peak. False where the
// authors' code raises.
bool fill_cell(std::string& row, int i, long j, long len, const std::array<long, 6>& last, int peak,
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
    const std::optional<bool> may = may_move(v, i, j, g);
    if (!may) return false;
    if (!*may) continue;
    row[j] = id;
    row[k] = ' ';
    return g.record(i, id, j);
  }
  return true;
}

// Step 5b: every free cell, left to right. False where the authors' code raises.
bool fill_free_cells(SlotRows& rows, int M) {
  const int P = static_cast<int>(rows.size());
  const int peak = peak_of(rows);
  const std::optional<std::size_t> common = common_length(rows);
  if (!common) return false;
  const long len = static_cast<long>(*common);
  std::vector<std::array<long, 6>> last(P, std::array<long, 6>{-1, -1, -1, -1, -1, -1});
  for (int i = 0; i < P; ++i) {
    for (long j = 0; j < len; ++j) {
      if (rows[i][j] != ' ') last[i][letter_of(rows[i][j])] = j;
    }
  }
  Progress g(P, M);
  for (long j = 0; j < len; ++j) {
    for (int i = 0; i < P; ++i) {
      const bool ok = rows[i][j] != ' ' ? g.record(i, rows[i][j], j)
                                        : fill_cell(rows[i], i, j, len, last[i], peak, g);
      if (!ok) return false;
    }
  }
  return true;
}

// W labels in the order of their B and b; every row must hold M ops of each kind. False
// where the authors' code raises.
bool relabel_w(SlotRows& rows, int M) {
  for (std::string& row : rows) {
    std::array<int, 6> count{};
    for (char c : row) {
      if (c != ' ') ++count[letter_of(c)];
    }
    for (int n : count) {
      if (n != M) return false;
    }
    std::deque<char> queue;
    for (char& c : row) {
      if (c == 'B') queue.push_back('W');
      if (c == 'b') queue.push_back('w');
      if (c == 'W' || c == 'w') {
        if (queue.empty()) return false;
        c = queue.front();
        queue.pop_front();
      }
    }
    if (!queue.empty()) return false;
  }
  return true;
}

// The authors' `check_correctness`: all ops there, W after its B, inputs in earlier columns.
// None where their check raises.
std::optional<bool> correct(const SlotRows& rows, int M) {
  const int P = static_cast<int>(rows.size());
  std::vector<std::array<long, 6>> col(static_cast<std::size_t>(P) * M,
                                       std::array<long, 6>{-1, -1, -1, -1, -1, -1});
  for (int i = 0; i < P; ++i) {
    std::array<int, 6> count{};
    for (long j = 0; j < static_cast<long>(rows[i].size()); ++j) {
      if (rows[i][j] == ' ') continue;
      const int v = letter_of(rows[i][j]);
      if (count[v] >= M) return std::nullopt;
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
// Where the authors' code raises: their whole search ends there.
BlockSchedule raised() {
  BlockSchedule out;
  out.raised = true;
  return out;
}

// Steps 1-3: the block repeated for `rm` microbatches, squeezed, its warm-up rebuilt and
// squeezed again; `first_peak` is the repeated block's peak. None where the authors' code
// raises.
std::optional<SlotRows> warm_up(const SlotRows& rows, int rm, int first_peak) {
  std::optional<SlotRows> out = squeeze(rows, rm);
  if (!out || !rebuild_warmup(*out, rm, first_peak)) return std::nullopt;
  return squeeze(*out, rm);
}

}  // namespace

int slot_letter(char c) {
  return letter_of(c);
}

// The authors' `schedule_by_building_block` for one block (steps 1-6).
BlockSchedule schedule_block(const std::vector<SlotPattern>& block, int P, int M, int max_mem) {
  const int rm = std::max(M, 2 * P);
  std::optional<SlotRows> rows = repeat_block(block, P, rm);
  if (!rows) return raised();
  int first_peak = peak_of(*rows);
  if ((M == rm && first_peak > max_mem) || first_peak > 2 * P) return {std::nullopt, first_peak};
  rows = warm_up(*rows, rm, first_peak);
  if (!rows) return raised();
  int peak = peak_of(*rows);
  if (peak > first_peak) return {std::nullopt, first_peak};
  if (M < rm) {
    keep_first(*rows, M);
    if (M <= P && 2 * M <= max_mem && !release_warmup_w(*rows, std::min(2 * P, peak))) {
      return raised();
    }
    rows = squeeze(*rows, M);
    if (!rows) return raised();
    first_peak = peak = peak_of(*rows);
    if (peak > max_mem) return {std::nullopt, peak};
  }
  rows = rebuild_cooldown(std::move(*rows), M, peak);
  if (!rows || !fill_free_cells(*rows, M) || !relabel_w(*rows, M)) return raised();
  peak = peak_of(*rows);
  if (peak > first_peak) return {std::nullopt, first_peak};
  const std::optional<bool> ok = correct(*rows, M);
  if (!ok) return raised();
  if (!*ok) return {std::nullopt, peak};
  return {std::move(*rows), peak};
}

}  // namespace pulse::detail
