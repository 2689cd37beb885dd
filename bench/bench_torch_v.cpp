// Pulse's V schedule against PyTorch's own V schedules, on the same per-stage costs.
//
//   build/bench_torch_v [--profiles DIR] [--only MODEL] [--only-p P]   (from the repo root)
//   build/bench_torch_v --self-check     (the restatement checks alone; CTest runs this)
//
// PyTorch ships two schedules with Pulse's placement (stage d and 2P-1-d on rank d),
// ScheduleZBVZeroBubble and ScheduleDualPipeV. Both are fixed orders with no cost input. Their
// order generation is restated below from pytorch/pytorch
// torch/distributed/pipelining/schedules.py at commit 00722e648b740f91d0e71494baa17891749fd291
// (`ScheduleZBVZeroBubble._calculate_single_rank_operations`,
// `ScheduleDualPipeV._calculate_single_rank_operations` with its helpers `add_action`,
// `add_overlap_f_b`, `add_weight_action_if_pending`, and `_validate_schedule`'s counts).
// Nothing is copied; the functions say in their own words what those do.
//
// For every model (SD2 512, SDXL 1024, U-ViT H/2 256, Hunyuan-DiT 1024), pp 4 and 8, with and
// without a split backward, and M = 2P and 4P microbatches of one sample: `pulse-plan plan
// --family v` (the V partition and pulse's own schedule) on a DGX-1 with its memory made
// unbounded (PyTorch's schedules do not bound memory, so neither does pulse here), then each
// PyTorch order replayed by the same simulator on that plan's pipeline model (same stage
// costs, transfers and links). With a split backward, a full backward in DualPipeV's order
// (its OVERLAP_F_B pairs and zero-bubble-less steps) becomes I then W in place, which can only
// help it (its input gradient leaves earlier). Without a split backward, every I becomes a full
// backward in place and the W ops are dropped: what a runtime that cannot split has to run.
// DualPipeV needs M >= 2P (PyTorch raises otherwise). Columns: makespans in ms, pulse's ratio
// to the better of the two, the stage-cost spread (largest over smallest F + B of a stage),
// the verdict. The summary counts rows where pulse is slower (the target: none).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "pulse/compile/compile.hpp"
#include "pulse/profile/profile.hpp"

using namespace pulse;

namespace {

/// One action of PyTorch's schedule IR: stage, kind ('F', 'B', 'I', 'W'), microbatch.
struct Action {
  int stage = 0;
  char kind = 'F';
  int mb = 0;
  bool operator==(const Action&) const = default;
};
using RankActions = std::vector<std::vector<Action>>;  // per rank, in order

// --- ScheduleZBVZeroBubble ----------------------------------------------------------------

/// The ZB-V order of one rank: F of its first chunk for the warm-up, then pairs, then F/I/W of
/// its second chunk; a steady phase of F0 I0 W0 F1 I1 W1; a cool-down of I's and the W's left.
/// Microbatches are padded to 2P-1 and the padding dropped afterwards, as PyTorch does.
/// `warmup_shift` (0 in PyTorch) exists only for the negative control.
std::vector<Action> zbv_rank(int P, int M, int rank, int warmup_shift = 0) {
  const int n_micro = std::max(2 * P - 1, M);
  const int c0 = rank, c1 = 2 * P - 1 - rank;
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  std::vector<Action> ops;
  auto add = [&](int stage, char kind, int& counter) { ops.push_back({stage, kind, counter++}); };
  for (int i = 0; i < 2 * (P - rank) - 1 + warmup_shift; ++i) add(c0, 'F', f0);
  for (int i = 0; i < rank; ++i) {
    add(c1, 'F', f1);
    add(c0, 'F', f0);
  }
  for (int i = 0; i < P - rank; ++i) {
    add(c1, 'F', f1);
    ops.push_back({c1, 'I', b1});
    add(c1, 'W', b1);
  }
  while (f1 < f0 || f0 < n_micro) {
    if (f0 < n_micro) add(c0, 'F', f0);
    ops.push_back({c0, 'I', b0});
    add(c0, 'W', b0);
    add(c1, 'F', f1);
    ops.push_back({c1, 'I', b1});
    add(c1, 'W', b1);
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < rank; ++i) {
    add(c0, 'I', b0);
    add(c1, 'I', b1);
  }
  for (int i = 0; i < P - rank; ++i) {
    add(c0, 'I', b0);
    add(c0, 'W', w0);
  }
  while (w1 < b1) add(c1, 'W', w1);
  while (w0 < b0) add(c0, 'W', w0);
  std::erase_if(ops, [M](const Action& a) { return a.mb >= M; });
  return ops;
}

RankActions zbv(int P, int M, int warmup_shift = 0) {
  RankActions out;
  for (int r = 0; r < P; ++r) out.push_back(zbv_rank(P, M, r, warmup_shift));
  return out;
}

// --- ScheduleDualPipeV --------------------------------------------------------------------

/// DualPipeV's eight steps for one rank. Counters per (stage, kind) give each action its
/// microbatch; a full backward advances the I and W counters together; an I queues its W,
/// which a later "W if pending" step takes oldest first. An OVERLAP_F_B pair is emitted as its
/// two sub-actions in order (PyTorch's runtime runs them one after the other).
std::vector<Action> dualpipev_rank(int P, int M, int rank) {
  const int s0 = rank, s1 = 2 * P - 1 - rank;
  std::vector<int> fwd(2 * P, 0), inp(2 * P, 0);
  std::vector<Action> ops, weights;  // weights: queued W's
  auto action = [&](int stage, char kind) {
    if (kind == 'F') {
      ops.push_back({stage, 'F', fwd[stage]++});
    } else if (kind == 'B') {
      ops.push_back({stage, 'B', inp[stage]++});
    } else {  // 'I'
      ops.push_back({stage, 'I', inp[stage]});
      weights.push_back({stage, 'W', inp[stage]++});
    }
  };
  auto pending_weight = [&] {
    if (weights.empty()) return;
    ops.push_back(weights.front());
    weights.erase(weights.begin());
  };
  auto overlap = [&](int forward_stage, int backward_stage) {
    action(forward_stage, 'F');
    action(backward_stage, 'B');
  };
  for (int i = 0; i < (P - rank - 1) * 2; ++i) action(s0, 'F');
  for (int i = 0; i < rank + 1; ++i) {
    action(s0, 'F');
    action(s1, 'F');
  }
  for (int i = 0; i < P - rank - 1; ++i) {
    action(s1, 'I');
    pending_weight();
    action(s1, 'F');
  }
  for (int i = 0; i < M - 2 * P + rank + 1; ++i) {
    if (i == 0 && rank == P - 1) {
      action(s0, 'F');
      action(s1, 'B');
    } else {
      overlap(s0, s1);
    }
    overlap(s1, s0);
  }
  for (int i = 0; i < P - rank - 1; ++i) {
    action(s1, 'B');
    overlap(s1, s0);
  }
  bool zero_bubble = false;
  const int step6 = rank + 1;
  for (int i = 0; i < step6; ++i) {
    if (i == step6 / 2 && rank % 2 == 1) zero_bubble = true;
    action(s1, zero_bubble ? 'I' : 'B');
    if (i == step6 / 2 && rank % 2 == 0) zero_bubble = true;
    action(s0, zero_bubble ? 'I' : 'B');
  }
  for (int i = 0; i < P - rank - 1; ++i) {
    pending_weight();
    action(s0, zero_bubble ? 'I' : 'B');
  }
  for (int i = 0; i < rank + 1; ++i) pending_weight();
  return ops;
}

/// PyTorch raises for fewer microbatches than stages.
std::optional<RankActions> dualpipev(int P, int M) {
  if (M < 2 * P) return std::nullopt;
  RankActions out;
  for (int r = 0; r < P; ++r) out.push_back(dualpipev_rank(P, M, r));
  return out;
}

// --- checks and conversion ------------------------------------------------------------------

/// `_validate_schedule`'s rules: per stage M forwards, as many I's as W's, B + (I + W)/2 = M;
/// a B or I only after its F, a W only after its I; each stage on one rank. Empty: valid.
std::string validate(const RankActions& ranks, int P, int M) {
  const int S = 2 * P;
  std::vector<std::vector<std::vector<bool>>> seen(
      S, std::vector<std::vector<bool>>(4, std::vector<bool>(M, false)));
  std::vector<int> owner(S, -1);
  const std::string kinds = "FBIW";
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    for (const Action& a : ranks[r]) {
      if (a.stage < 0 || a.stage >= S || a.mb < 0 || a.mb >= M) return "action out of range";
      if (owner[a.stage] != -1 && owner[a.stage] != r) return "a stage on two ranks";
      owner[a.stage] = r;
      const auto k = kinds.find(a.kind);
      if ((a.kind == 'B' || a.kind == 'I') && !seen[a.stage][0][a.mb]) return "backward before F";
      if (a.kind == 'W' && !seen[a.stage][2][a.mb]) return "W before its I";
      seen[a.stage][k][a.mb] = true;
    }
  }
  for (int s = 0; s < S; ++s) {
    int count[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; ++k)
      for (int m = 0; m < M; ++m) count[k] += seen[s][k][m];
    if (count[0] != M || count[2] != count[3] || count[1] + (count[2] + count[3]) / 2 != M)
      return "stage " + std::to_string(s) + ": wrong op counts";
  }
  return {};
}

/// The order as a pulse Schedule (header comment: how B, I and W are mapped).
Schedule to_schedule(const RankActions& ranks, bool split, const char* name) {
  Schedule out;
  out.policy = name;
  out.split_backward = split;
  for (const auto& rank : ranks) {
    std::vector<Op> ops;
    for (const Action& a : rank) {
      if (a.kind == 'F') {
        ops.push_back({OpKind::forward, a.stage, a.mb});
      } else if (split && a.kind == 'B') {
        ops.push_back({OpKind::backward_input, a.stage, a.mb});
        ops.push_back({OpKind::backward_weight, a.stage, a.mb});
      } else if (split) {
        ops.push_back(
            {a.kind == 'I' ? OpKind::backward_input : OpKind::backward_weight, a.stage, a.mb});
      } else if (a.kind != 'W') {
        ops.push_back({OpKind::backward, a.stage, a.mb});
      }
    }
    out.device_ops.push_back(ops);
  }
  return out;
}

std::string text(const std::vector<Action>& ops) {
  std::string s;
  for (const Action& a : ops) s += std::to_string(a.stage) + a.kind + std::to_string(a.mb) + " ";
  if (!s.empty()) s.pop_back();
  return s;
}

// --- the restatement checked by hand ---------------------------------------------------------

// P = 2, M = 4, worked through the two PyTorch functions by hand (rank 0 holds stages 0 and 3,
// rank 1 stages 1 and 2).
constexpr const char* kZbv[] = {
    "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 0I2 0W2 "
    "0I3 0W3",
    "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 2I3 1I3 1W2 "
    "2W3 1W3"};
constexpr const char* kDualPipeV[] = {
    "0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 3B3 0I2 0W2 0I3 0W3",
    "1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 1F3 2B1 2F3 1B1 2B2 1B2 2I3 1I3 2W3 1W3"};

/// 0 when the restatement matches the hand-worked orders, passes PyTorch's own checks for
/// every P and M used, and the negative control (ZB-V with one warm-up forward too many) is
/// rejected; otherwise 1, with what failed on stderr.
int self_check() {
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::fprintf(stderr, "self-check failed: %s\n", what.c_str());
      ++failures;
    }
  };
  const RankActions z = zbv(2, 4);
  const auto d = dualpipev(2, 4);
  for (int r = 0; r < 2; ++r) {
    expect(text(z[r]) == kZbv[r], "ZB-V P 2 M 4 rank " + std::to_string(r) + ": " + text(z[r]));
    expect(d && text((*d)[r]) == kDualPipeV[r],
           "DualPipeV P 2 M 4 rank " + std::to_string(r) + ": " + (d ? text((*d)[r]) : ""));
  }
  for (int P : {2, 4, 8}) {
    for (int M : {P, 2 * P, 4 * P, 4 * P + 3}) {
      const std::string at = " P " + std::to_string(P) + " M " + std::to_string(M);
      expect(validate(zbv(P, M), P, M).empty(), "ZB-V invalid" + at);
      const auto dp = dualpipev(P, M);
      expect(M < 2 * P ? !dp : dp && validate(*dp, P, M).empty(), "DualPipeV" + at);
    }
  }
  // Negative controls: a ZB-V with one more warm-up forward is a valid schedule but not
  // PyTorch's order, and the hand-worked orders reject it; an order with a W before its I,
  // or a forward missing, is rejected by PyTorch's own rules.
  expect(text(zbv(2, 4, 1)[0]) != kZbv[0], "negative control: shifted warm-up not detected");
  RankActions swapped = zbv(2, 4);
  std::swap(swapped[0][4], swapped[0][5]);  // 3I0 3W0 -> 3W0 3I0
  expect(validate(swapped, 2, 4) == "W before its I", "negative control: W before I");
  RankActions missing = zbv(2, 4);
  missing[1].erase(missing[1].begin());  // drop 1F0 (and so 1I0 runs before any F)
  expect(!validate(missing, 2, 4).empty(), "negative control: a missing forward");
  if (failures == 0) std::printf("self-check: restated ZB-V and DualPipeV orders ok\n");
  return failures ? 1 : 0;
}

// --- the table --------------------------------------------------------------------------------

struct Row {
  const char* model;
  const char* file;
};

double makespan_ms(const CompiledPlan& plan, const Schedule& s) {
  const auto t =
      simulate(plan.model, s, plan.num_microbatches, plan.static_bytes, Peaks::rule_only);
  if (!t) {
    std::fprintf(stderr, "%s: %s\n", s.policy.c_str(), t.error().message.c_str());
    return NAN;
  }
  return t->makespan_s * 1e3;
}

/// Largest over smallest per-stage F + B of the plan's pipeline model.
double spread(const PipelineModel& m) {
  double lo = INFINITY, hi = 0;
  for (const StageCost& c : m.stages) {
    lo = std::min(lo, c.forward_s + c.backward_s);
    hi = std::max(hi, c.forward_s + c.backward_s);
  }
  return hi / lo;
}

struct Tally {
  int rows = 0, slower = 0, not_faster_unequal = 0;
  double worst = 0;
  std::string worst_row;
};

void run_row(const Row& row, const ModelProfile& model, const ClusterProfile& cluster, int P, int M,
             bool split, Tally& tally) {
  PlanOptions o;
  o.pp = P;
  o.dp = 1;
  o.microbatch_size = 1;
  o.global_batch = M;
  o.split_backward = split;
  o.family = std::string("v");
  const auto plan = compile_plan(model, cluster, o);
  if (!plan) {
    std::printf("| %s | %d | %d | %s | error: %s |\n", row.model, P, M, split ? "yes" : "no",
                plan.error().message.c_str());
    return;
  }
  const double pulse = makespan_ms(*plan, plan->schedule);
  const double z = makespan_ms(*plan, to_schedule(zbv(P, M), split, "torch-zbv"));
  const auto dp = dualpipev(P, M);
  const double d = dp ? makespan_ms(*plan, to_schedule(*dp, split, "torch-dualpipev")) : NAN;
  const double best = std::isnan(d) ? z : std::min(z, d);
  const double ratio = pulse / best, sp = spread(plan->model);
  std::string verdict = "ok";
  if (ratio > 1 + 1e-9) {
    verdict = "SLOWER";
    ++tally.slower;
  } else if (sp > 1 + 1e-9 && ratio > 1 - 1e-9) {
    verdict = "not faster";
    ++tally.not_faster_unequal;
  }
  ++tally.rows;
  char name[96];
  std::snprintf(name, sizeof name, "%s pp %d M %d split %s", row.model, P, M, split ? "yes" : "no");
  if (ratio > tally.worst) tally.worst = ratio, tally.worst_row = name;
  char dcell[32] = "-";
  if (!std::isnan(d)) std::snprintf(dcell, sizeof dcell, "%.2f", d);
  std::printf("| %s | %d | %d | %s | %.2f | %.2f | %.2f | %s | %.3f | %.2f | %s |\n", row.model, P,
              M, split ? "yes" : "no", sp, pulse, z, dcell, ratio, 100 * (1 - ratio),
              verdict.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "profiles", only;
  int only_p = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--self-check")) return self_check();
    if (i + 1 < argc && !std::strcmp(argv[i], "--profiles"))
      dir = argv[++i];
    else if (i + 1 < argc && !std::strcmp(argv[i], "--only"))
      only = argv[++i];
    else if (i + 1 < argc && !std::strcmp(argv[i], "--only-p"))
      only_p = std::atoi(argv[++i]);
  }
  if (self_check() != 0) return 1;
  auto cluster = load_cluster_profile(dir + "/clusters/dgx1-v100-32gb-1n.json");
  if (!cluster) {
    std::fprintf(stderr, "%s\n", cluster.error().message.c_str());
    return 2;
  }
  cluster->memory_bytes = std::int64_t{1} << 50;  // unbounded, as PyTorch's schedules are
  const Row rows[] = {{"SD2 512", "sd2-unet-512.json"},
                      {"SDXL 1024", "sdxl-unet-1024.json"},
                      {"U-ViT H/2 256", "uvit-h2-256.json"},
                      {"Hunyuan-DiT 1024", "hunyuan-dit-g2-1024.json"}};
  std::printf(
      "\n| model | pp | M | split | stage spread | pulse ms | ZB-V ms | DualPipeV ms | "
      "pulse / best | pulse faster by %% | verdict |\n");
  std::printf("|---|--:|--:|---|--:|--:|--:|--:|--:|--:|---|\n");
  Tally tally;
  for (const Row& row : rows) {
    if (!only.empty() && only != row.file && only != row.model) continue;
    auto model = load_model_profile(dir + "/models/" + row.file);
    if (!model) {
      std::fprintf(stderr, "%s\n", model.error().message.c_str());
      return 2;
    }
    for (int P : {4, 8}) {
      if (only_p && P != only_p) continue;
      for (bool split : {false, true})
        for (int M : {2 * P, 4 * P}) run_row(row, *model, *cluster, P, M, split, tally);
    }
  }
  std::printf(
      "\n%d rows: %d where pulse is slower than the better PyTorch V schedule, %d with "
      "unequal stage costs where it is not strictly faster.\n",
      tally.rows, tally.slower, tally.not_faster_unequal);
  std::printf("largest pulse / best: %.4f (%s)\n", tally.worst, tally.worst_row.c_str());
  return 0;
}
