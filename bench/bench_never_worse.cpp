// Never-worse benchmark: pulse against the baselines it prints beside it, on many seeded
// random UNet-like models (tests/support/random_unet.hpp: 20 to 200 layers, nested skips of
// random sizes, uneven costs, a one-node cluster of 2 to 8 devices with fast and slow links).
//
//   PULSE_SOURCE_DIR=$PWD build/bench_never_worse [--models N] [--first SEED] [--max-layers L]
//
// Each model is planned once with strategy pulse at its fixed degrees (pp from the model,
// dp 1, microbatch 1); the plan records every baseline's own answer (the never-worse test
// checks those records against standalone plans). Printed: the distribution of pulse's
// throughput over the best feasible baseline's (min, 5th percentile, median, max), how many
// models pulse ties or wins, which family won how often, and pulse's P2P bytes against
// 1f1b's (the skip traffic it cuts). A minimum below 1.000 is a bug.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "pulse/compile/compile.hpp"
#include "support/random_unet.hpp"

using namespace pulse;

namespace {

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  int models = 1000, max_layers = 200;
  std::uint64_t first = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--models"))
      models = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--first"))
      first = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--max-layers"))
      max_layers = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--models N] [--first SEED] [--max-layers L]\n", argv[0]);
      return 2;
    }
  }
  std::vector<double> ratios, traffic;
  std::map<std::string, int> wins_by_family;
  int ties = 0, wins = 0, no_baseline = 0, failed = 0;
  double worst = 1e300;
  std::uint64_t worst_seed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t seed = first; seed < first + static_cast<std::uint64_t>(models); ++seed) {
    const test::RandomUnet r = test::random_unet(seed, max_layers);
    PlanOptions o;
    o.pp = r.pp;
    o.dp = 1;
    o.microbatch_size = 1;
    o.global_batch = r.global_batch;
    o.solver_max_seconds = 600;  // work limits only: the run is reproducible
    o.solver_max_nodes = 200;
    const auto plan = compile_plan(r.model, r.cluster, o);
    if (!plan) {
      ++failed;
      std::printf("seed %llu: pulse failed: %s\n", static_cast<unsigned long long>(seed),
                  plan.error().message.c_str());
      continue;
    }
    double best = 0;
    std::int64_t one_f_one_b_bytes = -1;
    for (const BaselineAnswer& b : plan->baselines) {
      if (!b.feasible) continue;
      best = std::max(best, *b.samples_per_s);
      if (b.strategy == "1f1b") one_f_one_b_bytes = *b.p2p_bytes_per_iteration;
    }
    if (best <= 0) {
      ++no_baseline;
      continue;
    }
    const double ratio = plan->evaluation.samples_per_s / best;
    ratios.push_back(ratio);
    if (ratio < worst) worst = ratio, worst_seed = seed;
    if (ratio > 1 + 1e-9) {
      ++wins;
      ++wins_by_family[plan->family->name];
    } else {
      ++ties;
    }
    if (one_f_one_b_bytes > 0) {
      const auto mine = std::find_if(plan->families.begin(), plan->families.end(),
                                     [](const FamilyOutcome& f) { return f.chosen; });
      if (mine != plan->families.end()) {
        traffic.push_back(static_cast<double>(*mine->p2p_bytes_per_iteration) /
                          static_cast<double>(one_f_one_b_bytes));
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "models %d (seeds %llu..%llu, up to %d layers); planned %zu, pulse failed %d, "
      "no feasible baseline %d; %.1f s\n\n",
      models, static_cast<unsigned long long>(first),
      static_cast<unsigned long long>(first + models - 1), max_layers, ratios.size(), failed,
      no_baseline, seconds);
  if (ratios.empty()) return 1;
  std::printf("| pulse / best baseline | min | p5 | median | max |\n|---|---:|---:|---:|---:|\n");
  std::printf("| samples/s | %.4f | %.4f | %.4f | %.4f |\n", worst, percentile(ratios, 0.05),
              percentile(ratios, 0.5), percentile(ratios, 1.0));
  if (!traffic.empty()) {
    std::printf("| P2P bytes vs 1f1b | %.3f | %.3f | %.3f | %.3f |\n", percentile(traffic, 0.0),
                percentile(traffic, 0.05), percentile(traffic, 0.5), percentile(traffic, 1.0));
  }
  std::printf("\nworst: seed %llu at %.4f; pulse ahead on %d models, tied on %d\n",
              static_cast<unsigned long long>(worst_seed), worst, wins, ties);
  std::printf("\n| family (when pulse is ahead) | models |\n|---|---:|\n");
  for (const auto& [name, n] : wins_by_family) std::printf("| %s | %d |\n", name.c_str(), n);
  return worst < 1 - 1e-12 ? 1 : 0;
}
