// libFuzzer target: a whole plan of a small mutated model, end to end. The input is read as
// a model profile; one the loader accepts is compiled (compile_plan) on a small fixed
// cluster at fixed degrees, and the plan the CLI would write is read back (parse_plan) and
// checked by validate_plan against the same profiles. What must hold:
//   - compile_plan returns a plan or an input/usage/infeasible error, never an internal one
//     (the passes' "this cannot happen" answers: a schedule that does not replay, ...);
//   - the written plan reads back, with every index in range, and writes the same bytes;
//   - validate, the planner's independent checker, finds nothing wrong with it.
// One execution stays fast: the model is capped at kMaxLayers layers, the degrees are fixed
// (pp 2 x dp 2, microbatch 1, 2 microbatches per replica), and the schedule search has a
// small node limit. The plan still weighs sharded data parallelism (pp 1 over the 4
// devices, ZeRO-2 and ZeRO-3, each tuned), which is most of the work: the slowest seeds
// (the SD2 and SDXL UNets) take about 4 s in this build, run alone (twice, for the leak
// check), against fuzz.sh's 30 s limit. Seeds: profiles/models and the golden cases' model files
// (scripts/fuzz_corpus.py).
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/profile/profile.hpp"
#include "pulse/tools/validate.hpp"

namespace {

using namespace pulse;

// The shipped models have 10 to 61 layers; a mutation that makes hundreds only slows the
// run down without reaching anything new.
constexpr std::size_t kMaxLayers = 64;

// Two nodes of two devices: a fast link inside a node, a slow one between nodes, so the
// placement, the all-reduce and the rank map have something to choose. The device type is
// filled in from the model (its first), so every model the loader accepts can be planned.
constexpr const char* kCluster = R"({
  "schema": "pulse.cluster/v1",
  "name": "fuzz-2x2",
  "provenance": {"method": "hand-written", "source": "tests/fuzz/plan_roundtrip_fuzz.cpp"},
  "device": {"type": "", "memory_bytes": 34359738368, "reserved_bytes": 1073741824},
  "devices_per_node": 2,
  "nodes": 2,
  "link_classes": {
    "fast": {"bandwidth_bytes_per_s": 25e9, "latency_s": 5e-6},
    "slow": {"bandwidth_bytes_per_s": 10e9, "latency_s": 2e-5}
  },
  "intra_node": [["X", "fast"], ["fast", "X"]],
  "inter_node": "slow"
})";

ClusterProfile cluster_for(const ModelProfile& model) {
  nlohmann::json text = nlohmann::json::parse(kCluster);
  text["device"]["type"] = model.device_types.front();
  auto cluster = parse_cluster_profile(text.dump(), "fuzz-2x2.cluster.json");
  fuzz::require(cluster.ok(), cluster ? "" : "the fixed cluster loads: " + cluster.error().message);
  return *cluster;
}

PlanOptions fixed_options() {
  PlanOptions o;
  o.pp = 2;
  o.dp = 2;
  o.microbatch_size = 1;
  o.global_batch = 4;
  o.solver_max_nodes = 20;
  o.solver_max_seconds = 0.5;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto model = parse_model_profile(fuzz::as_text(data, size), "fuzz.model.json");
  if (!model || model->layers.size() > kMaxLayers) return 0;
  const ClusterProfile cluster = cluster_for(*model);

  const auto compiled = compile_plan(*model, cluster, fixed_options());
  if (!compiled) {
    fuzz::require(compiled.error().kind != ErrorKind::internal,
                  "compile_plan: internal error: " + compiled.error().message);
    return 0;
  }
  const std::string written = write_plan(build_plan(*compiled, *model, cluster));
  const auto plan = parse_plan(written, "fuzz.plan.json");
  fuzz::require(plan.ok(), plan ? "" : "the written plan reads back:\n" + plan.error().message);
  fuzz::require_indices_in_range(*plan);
  fuzz::require(write_plan(*plan) == written, "read and written again, the same bytes");

  const ValidateResult check = validate_plan({&*plan, &*model, &cluster});
  std::string violations;
  for (const Violation& v : check.violations) violations += "\n" + v.check + ": " + v.message;
  fuzz::require(check.ok(), "validate finds the planner's plan valid:" + violations);
  return 0;
}
