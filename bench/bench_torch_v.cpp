// Pulse's V schedule against PyTorch's own V schedules, on the same per-stage costs.
//
//   build/bench_torch_v [--profiles DIR] [--only MODEL] [--only-p P]   (from the repo root)
//   build/bench_torch_v --self-check     (the restatement checks alone; CTest runs this)
//
// PyTorch ships two schedules with Pulse's placement (stage d and 2P-1-d on rank d),
// ScheduleZBVZeroBubble and ScheduleDualPipeV. Both are fixed orders with no cost input. Both
// come from the registry of published schedules (include/pulse/schedule/published.hpp):
// "zbv-zero-bubble" restates pytorch/pytorch torch/distributed/pipelining/schedules.py at
// commit 00722e648b740f91d0e71494baa17891749fd291
// (`ScheduleZBVZeroBubble._calculate_single_rank_operations`, solver/schedule/torch_zbv.cpp),
// and "dualpipev" restates DeepSeek's DualPipeV, whose order PyTorch's
// `ScheduleDualPipeV._calculate_single_rank_operations` (with `add_action`,
// `add_overlap_f_b`, `add_weight_action_if_pending`) gives too: the self-check holds both to
// orders worked through PyTorch's functions by hand, and to `_validate_schedule`'s counts.
//
// For every model (SD2 512, SDXL 1024, U-ViT H/2 256, Hunyuan-DiT 1024), pp 4 and 8, with and
// without a split backward, and M = 2P and 4P microbatches of one sample: `pulse-plan plan
// --family v` (the V partition and pulse's own schedule) on a DGX-1 with its memory made
// unbounded (PyTorch's schedules do not bound memory, so neither does pulse here), then each
// PyTorch order replayed by the same simulator on that plan's pipeline model (same stage
// costs, transfers and links). With a split backward, a full backward in DualPipeV's order
// (its OVERLAP_F_B pairs and zero-bubble-less steps) is I then W in place, which can only
// help it (its input gradient leaves earlier). Without a split backward, every I becomes a full
// backward in place and the W ops are dropped: what a runtime that cannot split has to run
// (the registry's rule for a V schedule asked without a split backward).
// DualPipeV needs M >= 2P (PyTorch raises otherwise). Columns: makespans in ms, pulse's ratio
// to the better of the two, the stage-cost spread (largest over smallest F + B of a stage),
// the verdict. The summary counts rows where pulse is slower (the target: none).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pulse/compile/compile.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/schedule/published.hpp"

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

/// The V of 2P stages on P devices, stage d and 2P-1-d on device d: all PyTorch's orders
/// need of a pipeline (they take no costs).
PipelineModel v_of(int P) {
  std::vector<LayerId> first;
  for (int k = 0; k <= 2 * P; ++k) first.push_back(k);
  PipelineModel m;
  m.layout = v_layout(first, P);
  return m;
}

/// PyTorch's order `name` on P ranks for M microbatches, as actions: each op of the
/// registry's schedule (split backward) with its letter.
std::optional<RankActions> torch_order(const char* name, int P, int M) {
  const PipelineModel v = v_of(P);
  const auto schedule = published_schedule_named(name);
  const auto s =
      schedule ? published_schedule(*schedule, {&v, M}) : Result<Schedule>(schedule.error());
  if (!s) return std::nullopt;
  RankActions out;
  for (const auto& ops : s->device_ops) {
    out.emplace_back();
    for (const Op& op : ops) out.back().push_back({op.stage, op_letter(op.kind), op.mb});
  }
  return out;
}

// --- checks ---------------------------------------------------------------------------------

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

std::string text(const std::vector<Action>& ops) {
  std::string s;
  for (const Action& a : ops) s += std::to_string(a.stage) + a.kind + std::to_string(a.mb) + " ";
  if (!s.empty()) s.pop_back();
  return s;
}

/// A hand-worked order with its full backwards run as I then W ("3B1" -> "3I1 3W1"): what a
/// split backward makes of them.
std::string split_form(const std::string& order) {
  std::string out, word;
  std::istringstream in(order);
  while (in >> word) {
    const std::size_t b = word.find('B');
    if (!out.empty()) out += ' ';
    if (b == std::string::npos) {
      out += word;
    } else {
      out += word.substr(0, b) + "I" + word.substr(b + 1) + " " + word.substr(0, b) + "W" +
             word.substr(b + 1);
    }
  }
  return out;
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

/// 0 when the registry's orders match the hand-worked ones, pass PyTorch's own checks for
/// every P and M used, and the negative controls are rejected; otherwise 1, with what failed
/// on stderr.
int self_check() {
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::fprintf(stderr, "self-check failed: %s\n", what.c_str());
      ++failures;
    }
  };
  const auto z = torch_order("zbv-zero-bubble", 2, 4);
  const auto d = torch_order("dualpipev", 2, 4);
  for (int r = 0; r < 2; ++r) {
    expect(z && text((*z)[r]) == kZbv[r],
           "ZB-V P 2 M 4 rank " + std::to_string(r) + ": " + (z ? text((*z)[r]) : ""));
    expect(d && text((*d)[r]) == split_form(kDualPipeV[r]),
           "DualPipeV P 2 M 4 rank " + std::to_string(r) + ": " + (d ? text((*d)[r]) : ""));
  }
  for (int P : {2, 4, 8}) {
    for (int M : {P, 2 * P, 4 * P, 4 * P + 3}) {
      const std::string at = " P " + std::to_string(P) + " M " + std::to_string(M);
      const auto zp = torch_order("zbv-zero-bubble", P, M);
      expect(zp && validate(*zp, P, M).empty(), "ZB-V invalid" + at);
      const auto dp = torch_order("dualpipev", P, M);
      expect(M < 2 * P ? !dp : dp && validate(*dp, P, M).empty(), "DualPipeV" + at);
    }
  }
  // Negative controls: a ZB-V with its third warm-up forward after its first forward of the
  // second stage is a valid schedule but not PyTorch's order, and the hand-worked orders
  // reject it; an order with a W before its I, or a forward missing, is rejected by
  // PyTorch's own rules.
  RankActions shifted = *z;
  std::swap(shifted[0][2], shifted[0][3]);  // 0F2 3F0 -> 3F0 0F2
  expect(validate(shifted, 2, 4).empty() && text(shifted[0]) != kZbv[0],
         "negative control: a shifted warm-up not detected");
  RankActions swapped = *z;
  std::swap(swapped[0][4], swapped[0][5]);  // 3I0 3W0 -> 3W0 3I0
  expect(validate(swapped, 2, 4) == "W before its I", "negative control: W before I");
  RankActions missing = *z;
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
  const PublishedRequest torch{&plan->model, M, split};
  const auto zs = published_schedule(PublishedSchedule::zbv_zero_bubble, torch);
  const double z = zs ? makespan_ms(*plan, *zs) : NAN;
  const auto dp = published_schedule(PublishedSchedule::dualpipev, torch);
  const double d = dp ? makespan_ms(*plan, *dp) : NAN;
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
