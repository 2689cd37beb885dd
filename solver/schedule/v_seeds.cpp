// The V seeds (see v_seeds.hpp). The pool:
//   zb-v       the authors' fill loop (zbv_fill.cpp) at every budget K from P to 3P stage
//              activations, each the authors' pick among their variants: given their
//              scalar costs, and again given each stage's own (stage_costs_of);
//   v-auto     every candidate of the authors' building-block search (v_auto.cpp), with its
//              warm-up W release (applied by the authors only with few microbatches and
//              room for 2M) and without, so the candidates at every budget are there;
//   v-half, v-min  the repeating patterns (slot_pattern.cpp);
//   dualpipev  DeepSeek's order (dualpipev.cpp), from M = 2P.
// The authors' generators see scalar costs (authors_costs), ZB-V's fill per-stage costs as
// well (on uneven stages its scalar answer can hold less than the budget allows, and
// slower); every member is then timed on
// the pipeline's own stage and link times and its memory counted from its order
// (staircase.hpp), and the staircase of the pool is returned.

#include "v_seeds.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "answer_memo.hpp"
#include "dualpipev.hpp"
#include "pulse/cost/memory.hpp"
#include "pulse/schedule/v_families.hpp"
#include "slot_pattern.hpp"
#include "zbv_fill.hpp"

namespace pulse::detail {

namespace {

// Deterministic work limits (the pool must not depend on the budget, so neither may
// these). V-auto tries up to about a thousand blocks, each a few passes over P rows of
// 6(4P + M + 1) slots: beyond this many block-slots (P = 16 and M = 64 is 12.4 million) the
// search is left out. ZB-V's fill loop places 6PM ops a few times per budget: past this
// many ops in all, fewer budgets between P and 3P.
constexpr long kVAutoBlockSlots = 13'000'000;
constexpr long kFillOps = 4'000'000;

double upper_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Seconds to milliseconds at the nanosecond, as a person would type them.
double to_ms(double seconds) {
  return std::round(seconds * 1e9) / 1e6;
}

// V-auto's candidates depend on P, M and the budget alone, and one plan synthesizes the
// same V several times (the families v, v-released and v-naive): the job's memo keeps them.
std::shared_ptr<const VAutoSearch> pool_of(int P, int M, int budget, ScheduleMemo* memo) {
  const VAutoKey key{P, M, budget};
  if (memo) {
    if (auto kept = memo->tables().v_auto_pools.recall(key)) return *kept;
  }
  auto found = std::make_shared<const VAutoSearch>(v_auto_pool(P, M, budget));
  if (memo) memo->tables().v_auto_pools.keep(key, found);
  return found;
}

// The most stage activations a V-auto candidate may hold and still fit some device: its
// fullest device holds that many, each at least the smallest hold of any stage. (The
// candidates' peaks are known before their costlier steps, so fewer fit, less work.)
int v_auto_budget(const PipelineModel& m, const std::vector<std::int64_t>& room,
                  const std::vector<std::int64_t>& hold) {
  const int P = m.num_devices();
  const std::int64_t least = std::max<std::int64_t>(1, *std::min_element(hold.begin(), hold.end()));
  const std::int64_t most = *std::max_element(room.begin(), room.end());
  return static_cast<int>(std::min<std::int64_t>(2 * P, most / least));
}

void add_v_auto(Staircase& pool, int P, int M, int budget, ScheduleMemo* memo) {
  std::vector<int> budgets{budget};
  // Below room for 2M the authors do not release warm-up W ops (few microbatches).
  if (M <= P && budget >= 2 * M) budgets.push_back(2 * M - 1);
  for (int b : budgets) {
    const std::shared_ptr<const VAutoSearch> found = pool_of(P, M, b, memo);  // alive in the loop
    for (const VAutoCandidate& c : found->candidates) {
      pool.add(slot_rows_schedule(c.rows), "v-auto");
    }
  }
}

}  // namespace

std::vector<std::array<double, 3>> stage_costs_of(const PipelineModel& m) {
  std::vector<std::array<double, 3>> out;
  for (const StageCost& s : m.stages) {
    out.push_back({to_ms(s.forward_s), to_ms(op_compute_s(s, OpKind::backward_input)),
                   to_ms(s.backward_weight_s)});
  }
  return out;
}

ScalarCosts authors_costs(const PipelineModel& m) {
  const int P = m.num_devices();
  std::vector<double> f, b, w, c;
  for (DeviceId d = 0; d < P; ++d) {
    const StageCost& down = m.stages[d];
    const StageCost& up = m.stages[2 * P - 1 - d];
    f.push_back((to_ms(down.forward_s) + to_ms(up.forward_s)) / 2);
    b.push_back((to_ms(op_compute_s(down, OpKind::backward_input)) +
                 to_ms(op_compute_s(up, OpKind::backward_input))) /
                2);
    w.push_back((to_ms(down.backward_weight_s) + to_ms(up.backward_weight_s)) / 2);
  }
  for (const Transfer& t : m.transfers) {
    if (t.main_path) c.push_back(to_ms(t.forward_s));
  }
  return {upper_median(f), upper_median(b), upper_median(w), upper_median(c)};
}

namespace {

std::vector<StairMember> pool_of(const VSeedRequest& r) {
  const PipelineModel& m = *r.model;
  const int P = m.num_devices(), M = r.num_microbatches;
  Staircase pool(m, M, r.room);
  const ScalarCosts costs = authors_costs(m);
  const std::vector<std::array<double, 3>> own = stage_costs_of(m);
  const long ops = 6L * P * M;
  const int step = static_cast<int>(std::max(1L, (2L * P + 1) * ops / kFillOps));
  for (int budget = P; budget <= 3 * P; budget += step) {
    if (auto z = zbv_fill_pick({P, M, costs, budget, {}})) pool.add(std::move(z->schedule), "zb-v");
    if (auto z = zbv_fill_pick({P, M, costs, budget, own}))
      pool.add(std::move(z->schedule), "zb-v");
  }
  if (1000L * P * 6 * (4L * P + M + 1) <= kVAutoBlockSlots) {
    add_v_auto(pool, P, M, v_auto_budget(m, r.room, pool.holds().per_stage()), r.memo);
  }
  for (VFamily f : {VFamily::v_half, VFamily::v_min}) {
    pool.add(slot_pattern_schedule(m, M, f), v_family_name(f));
  }
  if (auto s = dualpipev_schedule(P, M)) pool.add(std::move(*s), "dualpipev");
  return pool.members();
}

}  // namespace

std::vector<StairMember> v_seeds(const VSeedRequest& r) {
  if (r.model == nullptr || !is_two_stage_v(r.model->layout)) return {};
  if (!r.memo) return pool_of(r);
  // Every schedule of the pool splits the backward (I and W ops).
  const RoomKey key{*r.model, true, r.num_microbatches, r.room};
  if (auto kept = r.memo->tables().seeds.recall(key)) return **kept;
  auto found = std::make_shared<const std::vector<StairMember>>(pool_of(r));
  r.memo->tables().seeds.keep(key, found);
  return *found;
}

}  // namespace pulse::detail
