// Helpers for building small problems in tests, and brute-force references to check the
// optimisers against.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "pulse/compile/compile.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/graph/layer_graph.hpp"
#include "pulse/partition/partition.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse::test {

/// Whether the suite runs under ASan + UBSan (tests/CMakeLists.txt defines
/// PULSE_SANITIZED_BUILD there): about seven times slower, so the largest sweeps take a
/// stated part of their cases, each test saying which.
#ifdef PULSE_SANITIZED_BUILD
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif

/// The plan's JSON as `pulse-plan plan` writes it.
std::string plan_text(const CompiledPlan& plan, const ModelProfile& model,
                      const ClusterProfile& cluster);

/// The repository root (for shipped profiles).
std::string source_dir();
std::string profile_path(const std::string& relative);

/// A synthetic layer: forward time (seconds, backward is twice), params, bytes per sample.
struct LayerSpec {
  double forward_s = 0.001;
  std::int64_t params = 1000;
  std::int64_t activation_bytes = 1000;
  std::int64_t output_bytes = 100;
};

/// A one-device-type ("T"), one-microbatch-size profile built in memory.
ModelProfile make_model(const std::vector<LayerSpec>& layers,
                        const std::vector<std::pair<int, int>>& skips,
                        std::int64_t skip_bytes = 100);

/// pp x pp links of one class.
PipelineLinks uniform_links(int pp, double bandwidth, double latency);
/// Links that cost nothing (infinite bandwidth, no latency).
PipelineLinks free_links(int pp);

/// A cluster of `nodes` x `per_node` devices of type "T", one intra-node class "L" and an
/// inter-node class "N".
ClusterProfile make_cluster(int per_node, int nodes, std::int64_t memory_bytes,
                            double bandwidth = 1e10, double latency = 1e-5);

/// Random nested (LIFO) skips over layers [0, n): pairs (p, c) that never cross.
std::vector<std::pair<int, int>> random_nested_skips(int n, std::mt19937& rng);
/// Random skips that may cross.
std::vector<std::pair<int, int>> random_skips(int n, std::mt19937& rng);

/// A shipped model and cluster profile, loaded (a failure fails the test).
struct Inputs {
  ModelProfile model;
  ClusterProfile cluster;
};
Inputs shipped(const std::string& model, const std::string& cluster);
/// compile_plan that must succeed (a failure fails the test with the planner's message).
CompiledPlan compile_ok(const Inputs& in, const PlanOptions& options);
/// The text of a small plan: tiny-unet on one DGX-1 (32 GB), the V at pp 2 (stages 0..3 on
/// devices 0 1 1 0), dp 4, 4 microbatches of 1 sample.
std::string tiny_v_plan_text();

/// Expects two replays of one schedule to agree to the bit: the makespan, and on every
/// device each op and its start, end and the end of its blocking sends, the compute, send
/// and idle times, each part of the peak, the in-flight count and the resident peak. The
/// sends themselves aside: a replay keeps them only when asked (Sends::recorded).
void expect_same_timeline(const Timeline& a, const Timeline& b, const std::string& what);

/// The best objective found by trying every V partition (brute force), or -1 if none fits.
struct BruteForce {
  double objective = -1;
  std::vector<LayerId> first_layer;
  std::int64_t min_peak_memory = -1;  ///< Smallest largest-device memory bound over all.
};
BruteForce brute_force_v(const PartitionRequest& request, bool local_only);
/// Sequential layouts, skips routed as request.routing says.
BruteForce brute_force_sequential(const PartitionRequest& request);

/// The memory bound the partitioners use, recomputed from a pipeline model.
std::vector<std::int64_t> memory_bound(const PipelineModel& model, const PartitionRequest& r);

}  // namespace pulse::test
