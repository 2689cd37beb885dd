// The recorded outputs of the zero-bubble authors' own schedule generators (ZB-V, V-Half,
// V-Min, V-auto; sail-sg/zero-bubble-pipeline-parallelism at the commit the fixture names),
// run once, offline, on two-stage V pipelines, and the pipelines themselves: read by
// tests/schedule/v_peers_test.cpp (our restatements must agree with them) and by
// bench/bench_v_families.cpp (pulse-plan at the peers' memory). The fixture is
// tests/schedule/fixtures/zero_bubble_peers.json; its "source" block says how it was made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pulse/base/result.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse::test {

/// One stage of a synthetic V pipeline: times in milliseconds, one layer.
struct PeerStage {
  double forward_ms = 1, input_grad_ms = 1, weight_grad_ms = 1;
  std::int64_t activation_bytes = 0;  ///< Held per microbatch from F's start to W's end.
};

/// One run of an authors' generator on an instance.
struct PeerRun {
  std::string family;      ///< "zb-v", "v-half", "v-min", "v-auto".
  int max_mem = 0;         ///< The generator's budget in stage activations (zb-v, v-auto); else 0.
  bool ok = false;         ///< Whether their code produced a schedule (it may raise).
  double own_ms = 0;       ///< The makespan their own code computes for it.
  double makespan_ms = 0;  ///< Its order replayed by pulse-plan's simulator.
  std::int64_t peak_bytes = 0;  ///< The fullest device under pulse-plan's memory rule.
  std::string order_hash;       ///< order_hash() of their op order.
};

struct PeerInstance {
  std::string name;   ///< e.g. "fbw P8 M16 d0.1"
  std::string group;  ///< "synthetic", "p16", "delay" or "real"
  int num_devices = 0;
  int num_microbatches = 0;
  double delay_ms = 0;                  ///< Latency of every link (sends overlap compute).
  std::vector<PeerStage> stages;        ///< 2P, along the V.
  double f_ms = 1, b_ms = 1, w_ms = 1;  ///< The scalar costs the generators were given.
  std::vector<PeerRun> runs;
};

/// Reads the fixture (tests/schedule/fixtures/zero_bubble_peers.json under `source_dir`).
Result<std::vector<PeerInstance>> load_peer_fixture(const std::string& source_dir);

/// The instance as a model profile of 2P one-layer stages and a cluster of P devices whose
/// links add `delay_ms` (what `pulse-plan plan` is given).
ModelProfile peer_model_profile(const PeerInstance& instance);
ClusterProfile peer_cluster(const PeerInstance& instance);

/// The pipeline model of the instance's V, built as the planner builds a plan's.
PipelineModel peer_pipeline_model(const PeerInstance& instance);

/// FNV-1a (64 bit, hex) of the op order: per device "F3.0 I4.0 ..." , devices apart by '|'.
std::string order_hash(const Schedule& schedule);

}  // namespace pulse::test
