// Schedule synthesizer benchmark: heuristic vs synthesized makespan against the lower bound.
//
//   build/bench_schedule [--seconds S] [--nodes N] [--evaluations N] [--exact-ops N]
//                        [--only NAME]
//
// Cases: the shipped SD2 (512 px) profile on V100 DGX-1 nodes, Hunyuan-DiT-g/2 (1024 px) on
// Ascend 910A servers (memory-bound: few microbatches fit in flight), and generated
// UNet-shaped models with unequal layer costs; P in {2, 4, 8, 16}, M in {P, 2P, 4P, 8P} up to
// 64, microbatch size 1, one pipeline. "heuristic" is the V 1F1B list schedule; "gap" is
// synthesized / lower bound - 1; "gain" is heuristic / synthesized - 1; "s" is the solve
// time of this run (wall clock, so noisy: compare within one run).

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "pulse/base/defaults.hpp"
#include "pulse/compile/compile.hpp"
#include "pulse/schedule/synthesize.hpp"

using namespace pulse;

namespace {

std::string root() {
  const char* r = std::getenv("PULSE_SOURCE_DIR");
  return r ? r : ".";
}

// UNet-shaped, 96 layers, costs varying with "resolution" and a random factor.
ModelProfile generated(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  ModelProfile m;
  m.name = std::string("generated-unet-96");
  m.microbatch_sizes = {1};
  m.device_types = {"T"};
  const int L = 96;
  for (int i = 0; i < L; ++i) {
    const int depth = std::min(i, L - 1 - i);
    const double outer = 1.0 - static_cast<double>(depth) / (L / 2.0 + 1);
    Layer l;
    l.name = "layer" + std::to_string(i);
    l.params = static_cast<std::int64_t>(2e6 * (1.5 - outer));
    const double f = 1e-3 * (0.5 + 2 * outer) * jitter(rng);
    l.forward_s = {{f}};
    l.backward_s = {{2 * f}};
    l.activation_bytes_per_sample = static_cast<std::int64_t>(50e6 * (0.2 + outer));
    l.output_bytes_per_sample = static_cast<std::int64_t>(2e6 * (0.2 + outer));
    m.layers.push_back(l);
  }
  for (int p = 0; p < L * 45 / 100; p += 2) {
    m.skips.push_back(Skip{"", p, L - 1 - p, m.layers[p].output_bytes_per_sample});
  }
  return m;
}

ClusterProfile synthetic_cluster(int devices) {
  ClusterProfile c;
  c.name = std::string("synthetic");
  c.device_type = std::string("T");  // not a literal: GCC 12 -Wrestrict false positive
  c.memory_bytes = std::int64_t{16} << 30;
  c.devices_per_node = devices;
  c.nodes = 1;
  c.link_classes = {LinkClass{"L", 2e10, 1e-5}};
  c.intra_node.assign(devices, std::vector<int>(devices, 0));
  for (int i = 0; i < devices; ++i) c.intra_node[i][i] = -1;
  return c;
}

struct Case {
  std::string name;
  ModelProfile model;
  std::string cluster_prefix;  // shipped cluster, "-1n"/"-2n" appended; empty: synthetic
};

int g_evaluations = 400, g_exact_ops = 72;

void run_case(const Case& k, int P, int M, double seconds, int nodes) {
  ClusterProfile cluster;
  if (k.cluster_prefix.empty()) {
    cluster = synthetic_cluster(16);
  } else {
    const std::string file =
        root() + "/profiles/clusters/" + k.cluster_prefix + (P <= 8 ? "-1n.json" : "-2n.json");
    cluster = load_cluster_profile(file).value();
  }
  PlanOptions o;
  o.pp = P;
  o.dp = 1;
  o.global_batch = M;
  o.solver_max_seconds = 0;  // only the partition and the heuristic here
  auto plan = compile_plan(k.model, cluster, o);
  if (!plan) {
    std::printf("| %-10s | %2d | %2d | does not fit: %s |\n", k.name.c_str(), P, M,
                plan.error().message.substr(0, 60).c_str());
    return;
  }
  ScheduleRequest r;
  r.model = &plan->model;
  r.num_microbatches = M;
  r.static_bytes = plan->static_bytes;
  r.memory_capacity = cluster.usable_memory();
  r.max_seconds = seconds;
  r.max_nodes = nodes;
  r.max_evaluations = g_evaluations;
  r.exact_max_ops = g_exact_ops;
  const auto t0 = std::chrono::steady_clock::now();
  auto a = synthesize_schedule(r);
  const double solve_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a) {
    std::printf("| %-10s | %2d | %2d | error: %s |\n", k.name.c_str(), P, M,
                a.error().message.c_str());
    return;
  }
  std::printf(
      "| %-10s | %2d | %2d | %9.4f | %9.4f | %9.4f | %6.2f%% | %6.2f%% | %-11s | %-10s | %4d | %2d "
      "| %5.2f |\n",
      k.name.c_str(), P, M, a->heuristic_makespan_s, a->makespan_s, a->lower_bound_s, 100 * a->gap,
      100 * (a->heuristic_makespan_s / a->makespan_s - 1), a->method.c_str(),
      solve_status_name(a->status), a->list_evaluations, a->milp_solves, solve_s);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = kDefaultSolverSeconds;
  int nodes = kDefaultSolverNodes;
  std::string only;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--nodes")) nodes = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    if (!std::strcmp(argv[i], "--evaluations")) g_evaluations = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--exact-ops")) g_exact_ops = std::atoi(argv[i + 1]);
  }
  std::vector<Case> cases;
  cases.push_back({"sd2-512",
                   load_model_profile(root() + "/profiles/models/sd2-unet-512.json").value(),
                   "dgx1-v100-32gb"});
  cases.push_back({"hunyuan",
                   load_model_profile(root() + "/profiles/models/hunyuan-dit-g2-1024.json").value(),
                   "atlas800-910a"});
  cases.push_back({"gen-a", generated(1), ""});
  cases.push_back({"gen-b", generated(2), ""});
  std::printf(
      "| case       |  P |  M | heuristic |  synth.   |  bound    |   gap   |  gain   | method     "
      " | status     | evals| ILP|   s   |\n");
  std::printf(
      "|------------|---:|---:|----------:|----------:|----------:|--------:|--------:|------------"
      "-|------------|-----:|---:|------:|\n");
  for (const Case& k : cases) {
    if (!only.empty() && k.name != only) continue;
    for (int P : {2, 4, 8, 16}) {
      for (int M : {P, 2 * P, 4 * P, 8 * P}) {
        if (M <= 64) run_case(k, P, M, seconds, nodes);
      }
    }
  }
  return 0;
}
