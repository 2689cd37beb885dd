// Tuner benchmark: the tuner's choice against an exhaustive sweep, and its cost.
//
//   PULSE_SOURCE_DIR=$PWD build/bench_tune [--no-sweep] [--only MODEL]
//
// For SD2 (512 px), U-ViT-H/2 and Hunyuan-DiT (1024 px) on V100 DGX-1 and Ascend 910A
// clusters of 8, 32 and 64 devices (and Hunyuan on 256: the 8-node profile with 32 nodes),
// default global batch (8 per device), strategy pulse: the tuner's configuration and
// throughput; the exhaustive sweep's (every candidate gets the full schedule synthesis);
// the ratio; and the tuner's wall time and the process's peak resident memory so far.

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "pulse/compile/compile.hpp"

using namespace pulse;

namespace {

std::string root() {
  const char* r = std::getenv("PULSE_SOURCE_DIR");
  return r ? r : ".";
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

struct Outcome {
  bool ok = false;
  std::string config, error;
  double samples_per_s = 0, seconds = 0;
};

Outcome run(const ModelProfile& m, const ClusterProfile& c, int top_k) {
  PlanOptions o;
  o.tuner_top_k = top_k;
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = compile_plan(m, c, o);
  Outcome out;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!plan) {
    out.error = plan.error().message.substr(0, 70);
    return out;
  }
  out.ok = true;
  out.samples_per_s = plan->evaluation.samples_per_s;
  out.config = "pp " + std::to_string(plan->pp) + " dp " + std::to_string(plan->dp) + " mb " +
               std::to_string(plan->microbatch_size);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool sweep = true;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-sweep")) sweep = false;
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[i + 1];
  }
  const std::pair<const char*, const char*> models[] = {
      {"sd2", "sd2-unet-512"}, {"uvit-h", "uvit-h2-256"}, {"hunyuan", "hunyuan-dit-g2-1024"}};
  const char* families[] = {"dgx1-v100-32gb", "atlas800-910a"};
  std::printf(
      "| model   | cluster        | dev | tuner choice        | samples/s | tuner s | "
      "sweep choice        | samples/s | sweep s | tuner/sweep | peak RSS MiB |\n");
  std::printf(
      "|---------|----------------|----:|---------------------|----------:|--------:|"
      "---------------------|----------:|--------:|------------:|-------------:|\n");
  for (const auto& [short_name, file] : models) {
    if (!only.empty() && only != short_name) continue;
    const auto loaded = load_model_profile(root() + "/profiles/models/" + file + ".json");
    if (!loaded) {
      std::fprintf(stderr, "bench_tune: %s\n", loaded.error().message.c_str());
      return 2;
    }
    const ModelProfile& model = loaded.value();
    for (const char* family : families) {
      for (int devices : {8, 32, 64, 256}) {
        if (devices == 256 && std::string(short_name) != "hunyuan") continue;
        const int nodes = devices / 8;
        const std::string base = root() + "/profiles/clusters/" + family + "-" +
                                 std::to_string(std::min(nodes, 8)) + "n.json";
        auto read = load_cluster_profile(base);
        if (!read) {
          std::fprintf(stderr, "bench_tune: %s\n", read.error().message.c_str());
          return 2;
        }
        ClusterProfile cluster = read.value();
        cluster.nodes = nodes;  // 256 devices: the 8-node profile, 32 nodes
        const Outcome tuned = run(model, cluster, 3);
        Outcome swept;
        if (sweep && devices <= 64) swept = run(model, cluster, 0);
        std::printf(
            "| %-7s | %-14s | %3d | %-19s | %9.2f | %7.2f | %-19s | %9.2f | %7.2f | %11s | %12.0f "
            "|\n",
            short_name, family, devices, tuned.ok ? tuned.config.c_str() : tuned.error.c_str(),
            tuned.samples_per_s, tuned.seconds, swept.ok ? swept.config.c_str() : "-",
            swept.samples_per_s, swept.seconds,
            swept.ok
                ? std::to_string(tuned.samples_per_s / swept.samples_per_s).substr(0, 6).c_str()
                : "-",
            peak_rss_mib());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
