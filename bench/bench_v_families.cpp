// Schedules at every memory budget against the published V families.
//
//   build/bench_v_families [--only-p P] [--only-m M] [--only COST] [--only-mem UNITS]
//                          [--only-delay MS]       (UNITS 0: no budget)
//
// Synthetic V pipelines, one layer per stage (2P layers), microbatch size 1, one pipeline,
// a split backward; every stage holds one "stage activation" (A = 100 MB) per microbatch.
// For P in {4, 8}, M in {8, 16, 32, 64}, four cost settings (F, I, W per stage, in ms):
//   uniform     1, 1, 1
//   fbw         1, 1.2, 0.8
//   unet-ramp   g, g, g with g = 2 at the outer devices down to 1 at the bottom of the V
//               (device d: g = 2 - d / (P - 1)): the busiest device does twice the least's
//   v-ramp      g, g, g with g rising along the V (stage s: g = 1 + s / (2P - 1)): every
//               device does the same, but its two stages differ
// an activation budget of P, 3P/2, 2P stage activations per device or none, and links of
// no delay or 0.1 ms of latency (sends overlap compute, so a delay is only a delay):
// `pulse-plan plan` (compile_plan with --pp P --dp 1 --microbatch-size 1 --global-batch M
// --split-backward --activation-budget) beside our ZB-V (at its own 2P), V-Half and V-Min
// on the same pipeline model, each replayed by the simulator.
//
// Columns: pulse's makespan (ms), peak (largest device's activations, in A), lower bound,
// gap = makespan / bound - 1, the method that found it, list / order evaluations (the
// deterministic work counts), the plan's wall time in seconds (noisy: compare within one
// run); each family's makespan and peak; "best fam." the shortest family holding no more
// than pulse's peak; the verdict: ok, or what fails (slower than that family; a family as
// fast holding less; gap over 3% with at least 2P of memory). Summary lines follow.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "pulse/compile/compile.hpp"
#include "pulse/schedule/v_families.hpp"

using namespace pulse;

namespace {

constexpr std::int64_t kStageActivation = 100'000'000;
constexpr double kMs = 1e-3;

struct Setting {
  const char* name;
  double f, i, w;  // relative op times
  int ramp;        // 0 none, 1 unet-like (by device), 2 along the V (by stage)
};

double ramp_factor(const Setting& c, int P, int stage) {
  const int device = std::min(stage, 2 * P - 1 - stage);
  if (c.ramp == 1) return P > 1 ? 2.0 - static_cast<double>(device) / (P - 1) : 1.0;
  if (c.ramp == 2) return 1.0 + static_cast<double>(stage) / (2 * P - 1);
  return 1.0;
}

ModelProfile v_model(const Setting& c, int P) {
  ModelProfile m;
  m.name = std::string("v-") + c.name;
  m.microbatch_sizes = {1};
  m.device_types = {"T"};
  for (int s = 0; s < 2 * P; ++s) {
    const double g = ramp_factor(c, P, s) * kMs;
    Layer l;
    l.name = "stage" + std::to_string(s);
    l.params = 1000;
    l.forward_s = {{c.f * g}};
    l.backward_s = {{(c.i + c.w) * g}};
    l.backward_weight_fraction = c.w / (c.i + c.w);
    l.activation_bytes_per_sample = kStageActivation;
    l.output_bytes_per_sample = 1000;
    m.layers.push_back(l);
  }
  return m;
}

ClusterProfile cluster(int devices, double delay_s) {
  ClusterProfile c;
  c.name = std::string("synthetic");
  c.device_type = std::string("T");
  c.memory_bytes = std::int64_t{1} << 40;
  c.devices_per_node = devices;
  c.link_classes = {LinkClass{"L", 1e18, delay_s}};
  c.intra_node.assign(devices, std::vector<int>(devices, 0));
  for (int i = 0; i < devices; ++i) c.intra_node[i][i] = -1;
  c.overlap_comm = true;
  return c;
}

struct Figures {
  bool ok = false;
  double makespan = 0;
  double peak = 0;  // in stage activations
};

Figures family(const CompiledPlan& plan, VFamily f) {
  const auto s = v_family_schedule({&plan.model, plan.num_microbatches, f, {}});
  if (!s) return {};
  const auto t = simulate(plan.model, *s, plan.num_microbatches, plan.static_bytes);
  if (!t) return {};
  std::int64_t peak = 0;
  for (const DeviceTimeline& d : t->devices) peak = std::max(peak, d.resident_peak);
  return {true, t->makespan_s / kMs, static_cast<double>(peak) / kStageActivation};
}

struct Tally {
  int rows = 0, slower = 0, memory = 0, gap = 0;
  double worst_gap_rich = 0, worst_ratio = 0, slowest_plan_s = 0;
  std::string worst_gap_row, worst_ratio_row;
};

std::string verdict(const Figures& pulse, double bound, int units, int P,
                    const std::vector<Figures>& fams, Tally& tally, const std::string& row) {
  std::string out;
  std::optional<double> best;
  for (const Figures& f : fams) {
    if (!f.ok) continue;
    if (f.peak <= pulse.peak + 1e-9 && (!best || f.makespan < *best)) best = f.makespan;
    if (f.makespan <= pulse.makespan * (1 + 1e-9) && f.peak < pulse.peak - 1e-9) {
      out += "family as fast with less memory; ";
      ++tally.memory;
    }
  }
  if (best && pulse.makespan > *best * (1 + 1e-9)) {
    out += "slower than a family; ";
    ++tally.slower;
  }
  if (best && pulse.makespan / *best > tally.worst_ratio) {
    tally.worst_ratio = pulse.makespan / *best;
    tally.worst_ratio_row = row;
  }
  const double gap = pulse.makespan / bound - 1;
  if (units == 0 || units >= 2 * P) {
    if (gap > 0.03) {
      out += "gap over 3%; ";
      ++tally.gap;
    }
    if (gap > tally.worst_gap_rich) {
      tally.worst_gap_rich = gap;
      tally.worst_gap_row = row;
    }
  }
  return out.empty() ? "ok" : out;
}

std::string fam_cell(const Figures& f) {
  char buf[32];
  if (!f.ok) return "      -       ";
  std::snprintf(buf, sizeof buf, "%8.2f %5.1f", f.makespan, f.peak);
  return buf;
}

void run_row(const Setting& c, int P, int M, int units, double delay_s, Tally& tally) {
  const ModelProfile model = v_model(c, P);
  const ClusterProfile cl = cluster(P, delay_s);
  PlanOptions o;
  o.pp = P;
  o.dp = 1;
  o.microbatch_size = 1;
  o.global_batch = M;
  o.split_backward = true;
  if (units > 0) o.activation_budget_bytes = units * kStageActivation;
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = compile_plan(model, cl, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string mem = units > 0 ? std::to_string(units) : "inf";
  char row[96];
  std::snprintf(row, sizeof row, "P %d M %d %s mem %s delay %.1f", P, M, c.name, mem.c_str(),
                delay_s / kMs);
  if (!plan) {
    std::printf("| %d | %2d | %-9s | %3s | %.1f | error: %s |\n", P, M, c.name, mem.c_str(),
                delay_s / kMs, plan.error().message.c_str());
    return;
  }
  const ScheduleAnswer& a = plan->solver;
  const Figures pulse{true, a.makespan_s / kMs,
                      static_cast<double>(a.peak_activation_bytes) / kStageActivation};
  const std::vector<Figures> fams{family(*plan, VFamily::zb_v), family(*plan, VFamily::v_half),
                                  family(*plan, VFamily::v_min)};
  std::optional<double> best;
  for (const Figures& f : fams) {
    if (f.ok && f.peak <= pulse.peak + 1e-9 && (!best || f.makespan < *best)) best = f.makespan;
  }
  ++tally.rows;
  tally.slowest_plan_s = std::max(tally.slowest_plan_s, wall);
  const std::string v = verdict(pulse, a.lower_bound_s / kMs, units, P, fams, tally, row);
  std::printf(
      "| %d | %2d | %-9s | %3s | %.1f | %8.2f | %5.1f | %8.2f | %5.2f%% | %-12s | %3d | %4d | "
      "%5.2f | %s | %s | %s | %8s | %s |\n",
      P, M, c.name, mem.c_str(), delay_s / kMs, pulse.makespan, pulse.peak, a.lower_bound_s / kMs,
      100 * a.gap, a.method.c_str(), a.list_evaluations, a.order_evaluations, wall,
      fam_cell(fams[0]).c_str(), fam_cell(fams[1]).c_str(), fam_cell(fams[2]).c_str(),
      best ? std::to_string(*best).substr(0, 8).c_str() : "-", v.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int only_p = 0, only_m = 0, only_mem = -1;
  double only_delay = -1;
  std::string only;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--only-p")) only_p = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--only-m")) only_m = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    if (!std::strcmp(argv[i], "--only-mem")) only_mem = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--only-delay")) only_delay = std::atof(argv[i + 1]) * kMs;
  }
  const Setting settings[] = {{"uniform", 1, 1, 1, 0},
                              {"fbw", 1, 1.2, 0.8, 0},
                              {"unet-ramp", 1, 1, 1, 1},
                              {"v-ramp", 1, 1, 1, 2}};
  std::printf(
      "| P | M | cost | mem | delay | pulse | peak | bound | gap | method | list | order | s | "
      "ZB-V ms, peak | V-Half ms, peak | V-Min ms, peak | best fam. | verdict |\n");
  std::printf("|--:|--:|---|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|---|\n");
  Tally tally;
  for (int P : {4, 8}) {
    for (int M : {8, 16, 32, 64}) {
      for (const Setting& c : settings) {
        for (int units : {P, 3 * P / 2, 2 * P, 0}) {
          for (double delay : {0.0, 0.1 * kMs}) {
            if ((only_p && P != only_p) || (only_m && M != only_m) ||
                (!only.empty() && only != c.name) || (only_mem >= 0 && only_mem != units) ||
                (only_delay >= 0 && std::abs(only_delay - delay) > 1e-12)) {
              continue;
            }
            run_row(c, P, M, units, delay, tally);
          }
        }
      }
    }
  }
  std::printf(
      "\n%d rows: %d slower than the best family of no more memory, %d where a family is as "
      "fast with less memory, %d over 3%% from the bound with at least 2P of memory.\n",
      tally.rows, tally.slower, tally.memory, tally.gap);
  std::printf("worst makespan / best family: %.4f (%s)\n", tally.worst_ratio,
              tally.worst_ratio_row.c_str());
  std::printf("worst gap with at least 2P of memory: %.2f%% (%s)\n", 100 * tally.worst_gap_rich,
              tally.worst_gap_row.c_str());
  std::printf("slowest plan: %.2f s\n", tally.slowest_plan_s);
  return 0;
}
