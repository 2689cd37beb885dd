// pulse-plan against the published V schedules, at their own memory.
//
//   build/bench_v_families [--group G] [--only TEXT] [--jobs N]
//
// The peers are the zero-bubble authors' own generators (ZB-V, V-Half, V-Min and V-auto,
// sail-sg/zero-bubble-pipeline-parallelism), run once offline on every instance: their
// op orders replayed by pulse-plan's simulator, with the peak memory under pulse-plan's
// memory rule, are recorded in tests/schedule/fixtures/zero_bubble_peers.json (its
// "source" block says how), and DeepSeek's DualPipeV order (the registry's dualpipev,
// include/pulse/schedule/published.hpp) and ZB-V's fill loop given each stage's own costs
// (zb-v-stages, solver/schedule/zbv_fill.hpp, budgets P to 3P) are replayed here. An instance is a
// V of 2P one-layer stages with given F, I, W times and activation bytes, links of one latency
// (sends overlap compute), M microbatches of size 1, a split backward. Groups: "synthetic" (P 4 and
// 8, M 8 to 64, uniform, F/I/W = 1/1.2/0.8, a UNet-like ramp over the devices, a ramp along the V;
// delays 0 and 0.1 ms), "p16" (P 16), "delay" (delays of half and one forward time) and "real" (the
// stages of pulse-plan's SD2, SDXL, U-ViT and Hunyuan-DiT plans at pp 4 and 8). The peers ran at
// budgets from P to 3P stage activations (ZB-V, V-auto).
//
// Each memory level of an instance (every peer schedule's peak, then no budget) is one
// `compile_plan` (plan --pp P --dp 1 --microbatch-size 1 --global-batch M --split-backward
// --activation-budget LEVEL), in a child process of its own so every plan starts cold, as
// `pulse-plan plan` does; its CPU time is measured in the child. Columns: the instance, the
// level (in stage activations A where every stage holds the same, else GiB), pulse's
// makespan (ms), peak, lower bound, gap, the method that found it, the plan's CPU seconds,
// the peers whose peak is this level (family@budget makespan), the best published
// schedule of no more memory, the verdict: ok, or "behind" (slower than a peer at equal
// memory or than the best published of no more memory) or "slower with more memory".

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "pulse/compile/compile.hpp"
#include "pulse/schedule/published.hpp"
#include "pulse/simulate/simulate.hpp"
#include "support/v_peers.hpp"
#include "v_seeds.hpp"
#include "zbv_fill.hpp"

using namespace pulse;

namespace {

constexpr double kMs = 1e-3;

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

// What a child sends back about its plan (plain data through a pipe).
struct PlanFigures {
  bool ok = false;
  double makespan_ms = 0, bound_ms = 0, cpu_s = 0;
  std::int64_t peak_bytes = 0;
  char method[24] = {};
  char error[160] = {};
};

PlanFigures plan_here(const test::PeerInstance& in, std::int64_t budget) {
  PlanOptions o;
  o.pp = in.num_devices;
  o.dp = 1;
  o.microbatch_size = 1;
  o.global_batch = in.num_microbatches;
  o.split_backward = true;
  if (budget > 0) o.activation_budget_bytes = budget;
  const ModelProfile model = test::peer_model_profile(in);
  const ClusterProfile cluster = test::peer_cluster(in);
  PlanFigures f;
  const double t0 = cpu_seconds();
  auto plan = compile_plan(model, cluster, o);
  f.cpu_s = cpu_seconds() - t0;
  if (!plan) {
    std::snprintf(f.error, sizeof f.error, "%s", plan.error().message.c_str());
    return f;
  }
  f.ok = true;
  f.makespan_ms = plan->solver.makespan_s / kMs;
  f.bound_ms = plan->solver.lower_bound_s / kMs;
  f.peak_bytes = plan->solver.peak_activation_bytes;
  std::snprintf(f.method, sizeof f.method, "%s", plan->solver.method.c_str());
  return f;
}

// Plans every budget, `jobs` children at a time; each child plans one budget.
std::vector<PlanFigures> plan_all(const test::PeerInstance& in,
                                  const std::vector<std::int64_t>& budgets, int jobs) {
  std::vector<PlanFigures> out(budgets.size());
  std::map<pid_t, std::pair<std::size_t, int>> running;  // pid -> (budget index, read end)
  auto collect = [&] {
    int status = 0;
    const pid_t pid = wait(&status);
    const auto [k, fd] = running.at(pid);
    PlanFigures f;
    if (read(fd, &f, sizeof f) != static_cast<ssize_t>(sizeof f)) {
      std::snprintf(f.error, sizeof f.error, "the planning process died (status %d)", status);
    }
    close(fd);
    out[k] = f;
    running.erase(pid);
  };
  for (std::size_t k = 0; k < budgets.size(); ++k) {
    if (static_cast<int>(running.size()) >= jobs) collect();
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const PlanFigures f = plan_here(in, budgets[k]);
      const ssize_t n = write(fds[1], &f, sizeof f);
      _exit(n == static_cast<ssize_t>(sizeof f) ? 0 : 1);
    }
    close(fds[1]);
    running[pid] = {k, fds[0]};
  }
  while (!running.empty()) collect();
  return out;
}

// A peer schedule at one memory level.
struct Peer {
  std::string label;   // "zb-v@16", "v-half", "dualpipev"
  std::string family;  // "zb-v", "v-half", "v-min", "v-auto", "dualpipev", "zb-v-stages"
  double makespan_ms = 0;
  std::int64_t peak_bytes = 0;
};

std::vector<Peer> peers_of(const test::PeerInstance& in) {
  std::vector<Peer> out;
  for (const test::PeerRun& r : in.runs) {
    if (!r.ok) continue;
    const std::string label = r.max_mem > 0 ? fmt::format("{}@{}", r.family, r.max_mem) : r.family;
    out.push_back({label, r.family, r.makespan_ms, r.peak_bytes});
  }
  // DualPipeV, restated (published.hpp), replayed on the same pipeline model.
  const PipelineModel pm = test::peer_pipeline_model(in);
  const std::vector<MemoryBreakdown> none(in.num_devices);
  auto replay = [&](const Schedule& s, const std::string& label, const std::string& family) {
    if (auto t = simulate(pm, s, in.num_microbatches, none)) {
      std::int64_t peak = 0;
      for (const DeviceTimeline& d : t->devices) peak = std::max(peak, d.resident_peak);
      out.push_back({label, family, t->makespan_s / kMs, peak});
    }
  };
  if (auto s = published_schedule(PublishedSchedule::dualpipev, {&pm, in.num_microbatches})) {
    replay(*s, "dualpipev", "dualpipev");
  }
  // ZB-V's fill loop given each stage's own F, I, W (the authors' loop with its cost lookup
  // made per stage, zbv_fill.hpp) at every budget from P to 3P: a peer the scalar fixture
  // does not have, which sees uneven stages. Its costs are the pipeline model's, to the
  // nanosecond, as the planner's pool gives them (the loop compares sums of them, so a
  // figure rounded otherwise can tip a decision either way), its link time the authors'.
  const std::vector<std::array<double, 3>> own = detail::stage_costs_of(pm);
  const detail::ScalarCosts scalar = detail::authors_costs(pm);
  for (int k = in.num_devices; k <= 3 * in.num_devices; ++k) {
    if (auto z = detail::zbv_fill_pick({in.num_devices, in.num_microbatches, scalar, k, own})) {
      replay(z->schedule, fmt::format("zb-v-stages@{}", k), "zb-v-stages");
    }
  }
  return out;
}

// The unit levels are printed in: A where every stage holds the same, else GiB.
struct Unit {
  double bytes = 1 << 30;
  const char* name = "GiB";
};

Unit unit_of(const test::PeerInstance& in) {
  for (const test::PeerStage& s : in.stages) {
    if (s.activation_bytes != in.stages[0].activation_bytes) return {};
  }
  return {static_cast<double>(in.stages[0].activation_bytes), "A"};
}

struct FamilyTally {
  int rows = 0, behind = 0;
  double worst = 0;
  std::string worst_row;
};

struct Tally {
  int instances = 0, levels = 0, behind_best = 0, slower_with_more = 0, errors = 0, proven = 0;
  std::map<std::string, FamilyTally> family;
  double worst_best = 0, worst_more = 0, slowest_cpu = 0, largest_gap_rich = 0;
  std::string worst_best_row, worst_more_row, slowest_row;
  int own_same = 0, own_other = 0;
};

std::string level_text(std::int64_t level, const Unit& u) {
  if (level == 0) return "none";
  const double x = static_cast<double>(level) / u.bytes;
  return x == std::floor(x) ? fmt::format("{:.0f} {}", x, u.name)
                            : fmt::format("{:.2f} {}", x, u.name);
}

// The verdict of one level; tallies what it finds.
std::string judge(const std::string& row, const PlanFigures& f, std::int64_t level,
                  const std::vector<Peer>& peers, std::optional<double> best, Tally& t) {
  std::string out;
  for (const Peer& p : peers) {
    if (p.peak_bytes != level) continue;
    FamilyTally& ft = t.family[p.family];
    ++ft.rows;
    const double ratio = f.makespan_ms / p.makespan_ms;
    if (ratio > 1 + 1e-9) {
      ++ft.behind;
      out += fmt::format("behind {}; ", p.label);
    }
    if (ratio > ft.worst) ft.worst = ratio, ft.worst_row = row;
  }
  if (best && f.makespan_ms > *best * (1 + 1e-9)) {
    ++t.behind_best;
    if (out.empty()) out += "behind the best of no more memory; ";
  }
  if (best && f.makespan_ms / *best > t.worst_best) {
    t.worst_best = f.makespan_ms / *best;
    t.worst_best_row = row;
  }
  return out;
}

void run_instance(const test::PeerInstance& in, int jobs, Tally& t) {
  const std::vector<Peer> peers = peers_of(in);
  std::vector<std::int64_t> levels;
  for (const Peer& p : peers) levels.push_back(p.peak_bytes);
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  levels.push_back(0);  // no budget
  const std::vector<PlanFigures> plans = plan_all(in, levels, jobs);
  const Unit unit = unit_of(in);
  ++t.instances;
  std::optional<double> previous;
  for (std::size_t k = 0; k < levels.size(); ++k) {
    const PlanFigures& f = plans[k];
    const std::string row = fmt::format("{} at {}", in.name, level_text(levels[k], unit));
    ++t.levels;
    if (!f.ok) {
      ++t.errors;
      fmt::print("| {} | {} | error: {} |\n", in.name, level_text(levels[k], unit), f.error);
      continue;
    }
    std::string here;
    std::optional<double> best;
    for (const Peer& p : peers) {
      if (p.peak_bytes == levels[k]) here += fmt::format("{} {:.2f}, ", p.label, p.makespan_ms);
      if ((levels[k] == 0 || p.peak_bytes <= levels[k]) && (!best || p.makespan_ms < *best)) {
        best = p.makespan_ms;
      }
    }
    std::string verdict = judge(row, f, levels[k], peers, best, t);
    if (previous && f.makespan_ms > *previous * (1 + 1e-9)) {
      ++t.slower_with_more;
      verdict += "slower with more memory; ";
      if (f.makespan_ms / *previous > t.worst_more) {
        t.worst_more = f.makespan_ms / *previous;
        t.worst_more_row = row;
      }
    }
    previous = previous ? std::min(*previous, f.makespan_ms) : f.makespan_ms;
    if (f.cpu_s > t.slowest_cpu) t.slowest_cpu = f.cpu_s, t.slowest_row = row;
    const double gap = f.makespan_ms / f.bound_ms - 1;
    if (gap <= 1e-9) ++t.proven;
    fmt::print("| {} | {} | {:.3f} | {} | {:.3f} | {:.2f}% | {} | {:.2f} | {}| {} | {} |\n",
               in.name, level_text(levels[k], unit), f.makespan_ms, level_text(f.peak_bytes, unit),
               f.bound_ms, 100 * gap, f.method, f.cpu_s, here,
               best ? fmt::format("{:.3f}", *best) : "-", verdict.empty() ? "ok" : verdict);
  }
  for (const test::PeerRun& r : in.runs) {
    if (!r.ok) continue;
    (std::abs(r.own_ms - r.makespan_ms) <= 1e-9 * r.makespan_ms ? t.own_same : t.own_other)++;
  }
  std::fflush(stdout);
}

void summary(const Tally& t) {
  fmt::print("\n{} instances, {} memory levels planned ({} errors).\n", t.instances, t.levels,
             t.errors);
  for (const auto& [name, ft] : t.family) {
    fmt::print("{}: {} rows at equal memory, {} behind; worst pulse / peer {:.4f} ({})\n", name,
               ft.rows, ft.behind, ft.worst, ft.worst_row);
  }
  fmt::print("behind the best published schedule of no more memory: {} levels; worst {:.4f} ({})\n",
             t.behind_best, t.worst_best, t.worst_best_row);
  fmt::print("slower with more memory: {} levels; worst {:.4f} ({})\n", t.slower_with_more,
             t.worst_more, t.worst_more_row);
  fmt::print("proven optimal (the makespan meets the lower bound): {} levels\n", t.proven);
  fmt::print("slowest plan: {:.2f} s of CPU ({})\n", t.slowest_cpu, t.slowest_row);
  fmt::print("the authors' own timing of their schedules equals the simulator's in {} of {} runs\n",
             t.own_same, t.own_same + t.own_other);
}

std::string source_dir() {
  if (const char* env = std::getenv("PULSE_SOURCE_DIR")) return env;
  return PULSE_SOURCE_DIR;
}

}  // namespace

int main(int argc, char** argv) {
  std::string group, only;
  int jobs = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--group"))
      group = argv[i + 1];
    else if (!std::strcmp(argv[i], "--only"))
      only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--jobs"))
      jobs = std::max(1, std::atoi(argv[i + 1]));
  }
  auto fixture = test::load_peer_fixture(source_dir());
  if (!fixture) {
    std::fprintf(stderr, "bench_v_families: %s\n", fixture.error().message.c_str());
    return 2;
  }
  fmt::print(
      "| instance | level | pulse ms | peak | bound | gap | method | CPU s | peers at this level | "
      "best of no more memory | verdict |\n");
  fmt::print("|---|--:|--:|--:|--:|--:|---|--:|---|--:|---|\n");
  Tally t;
  for (const test::PeerInstance& in : *fixture) {
    if ((!group.empty() && in.group != group) ||
        (!only.empty() && in.name.find(only) == std::string::npos)) {
      continue;
    }
    run_instance(in, jobs, t);
  }
  summary(t);
  return 0;
}
