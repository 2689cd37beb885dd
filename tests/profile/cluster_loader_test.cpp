// Cluster profile loader: exact messages for bad inputs (each test changes one thing in a
// small valid profile), the shipped profiles load, and link() finds the right class.
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pulse/base/io.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {
namespace {

using nlohmann::json;

// Two nodes of three devices: 0-1 and 1-2 over "NVL", 0-2 over "PCIE", nodes over "IB".
// Link classes are indexed in sorted name order: IB 0, NVL 1, PCIE 2.
// The device has a spec (pulse.cluster/v2).
const char* const kMinimalCluster = R"({
  "schema": "pulse.cluster/v2",
  "name": "mini",
  "provenance": {"method": "analytic", "source": "unit test"},
  "device": {"type": "GPU", "memory_bytes": 1000000, "reserved_bytes": 1000,
             "spec": {"aliases": ["Test GPU"], "stack": "test stack",
                      "peak_flops": {"fp16": 1e12, "fp8": 2e12},
                      "memory_bytes_per_s": 1e11, "memory_efficiency": 0.5,
                      "layer_floor_s": 1e-05, "source": "unit test"}},
  "devices_per_node": 3,
  "nodes": 2,
  "link_classes": {
    "NVL":  {"bandwidth_bytes_per_s": 4e10, "latency_s": 8e-06},
    "PCIE": {"bandwidth_bytes_per_s": 9e9, "latency_s": 1.2e-05},
    "IB":   {"bandwidth_bytes_per_s": 1e10, "latency_s": 1.5e-05, "description": "EDR"}
  },
  "intra_node": [["X", "NVL", "PCIE"],
                 ["NVL", "X", "NVL"],
                 ["PCIE", "NVL", "X"]],
  "inter_node": "IB",
  "overlap_comm": false
})";

std::string cluster_with(const std::function<void(json&)>& mutate) {
  json j = json::parse(kMinimalCluster);
  mutate(j);
  return j.dump(2);
}

std::string cluster_error(const std::string& text) {
  auto r = parse_cluster_profile(text, "c.json");
  if (r.ok()) return "<loaded without error>";
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  return r.error().message;
}

std::string mutated_cluster_error(const std::function<void(json&)>& mutate) {
  return cluster_error(cluster_with(mutate));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kRoot = PULSE_SOURCE_DIR;

// --- The baseline ---------------------------------------------------------------------

TEST(ClusterLoader, MinimalProfileLoads) {
  auto r = parse_cluster_profile(kMinimalCluster, "some/dir/c.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ClusterProfile& c = *r;
  EXPECT_EQ(c.name, "mini");
  EXPECT_EQ(c.file.name, "c.json");
  EXPECT_EQ(c.file.path, "some/dir/c.json");
  EXPECT_EQ(c.file.sha256, sha256_hex(kMinimalCluster));
  EXPECT_EQ(c.device_type, "GPU");
  EXPECT_EQ(c.memory_bytes, 1000000);
  EXPECT_EQ(c.reserved_bytes, 1000);
  EXPECT_EQ(c.usable_memory(), 999000);
  EXPECT_EQ(c.schema, "pulse.cluster/v2");
  ASSERT_TRUE(c.device_spec.has_value());
  const DeviceSpec& spec = *c.device_spec;
  EXPECT_EQ(spec.name, "GPU");
  EXPECT_EQ(spec.aliases, (std::vector<std::string>{"Test GPU"}));
  EXPECT_EQ(spec.stack, "test stack");
  EXPECT_EQ(spec.peak_flops, (std::map<std::string, double>{{"fp16", 1e12}, {"fp8", 2e12}}));
  EXPECT_EQ(spec.peak("fp16"), 1e12);
  EXPECT_EQ(spec.peak("bf16"), std::nullopt);
  EXPECT_EQ(spec.memory_bytes_per_s, 1e11);
  EXPECT_EQ(spec.achieved_bytes_per_s(), 5e10);
  EXPECT_EQ(spec.layer_floor_s, 1e-5);
  EXPECT_EQ(spec.source, "unit test");
  EXPECT_EQ(spec.where, "c.json $.device.spec");  // the file's name, not its directories
  EXPECT_TRUE(spec.names("Test GPU"));
  EXPECT_FALSE(c.v1_peak_fp16_flops.has_value());
  EXPECT_EQ(c.devices_per_node, 3);
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.num_devices(), 6);
  ASSERT_EQ(c.link_classes.size(), 3u);
  EXPECT_EQ(c.link_classes[0].name, "IB");
  EXPECT_EQ(c.link_classes[1].name, "NVL");
  EXPECT_EQ(c.link_classes[2].name, "PCIE");
  EXPECT_EQ(c.intra_node, (std::vector<std::vector<int>>{{-1, 1, 2}, {1, -1, 1}, {2, 1, -1}}));
  EXPECT_EQ(c.inter_node, 0);
  EXPECT_FALSE(c.overlap_comm);
  // Rank 4 is local device 1 of node 1.
  EXPECT_EQ(c.node_of(4), 1);
  EXPECT_EQ(c.local_of(4), 1);
  EXPECT_EQ(c.link(0, 2).name, "PCIE");
  EXPECT_EQ(c.link(3, 4).name, "NVL");
  EXPECT_EQ(c.link(2, 3).name, "IB");
}

TEST(ClusterLoader, OneNodeNeedsNoInterNodeAndDefaultsApply) {
  auto r = parse_cluster_profile(cluster_with([](json& j) {
                                   j["nodes"] = 1;
                                   j.erase("inter_node");
                                   j.erase("overlap_comm");
                                   j["device"].erase("reserved_bytes");
                                 }),
                                 "c.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->inter_node, -1);
  EXPECT_EQ(r->reserved_bytes, 0);
  EXPECT_FALSE(r->overlap_comm);
}

// --- Shape and types --------------------------------------------------------------------

TEST(ClusterLoader, MalformedJsonGivesLineAndColumn) {
  // Line 3 has a trailing comma before '}' on line 4, column 1.
  EXPECT_EQ(cluster_error("{\n  \"schema\": \"pulse.cluster/v1\",\n  \"name\": \"x\",\n}"),
            "c.json:4:1: malformed JSON: syntax error while parsing object key - unexpected "
            "'}'; expected string literal");
}

TEST(ClusterLoader, WrongSchemaTag) {
  // A model profile here most likely means --model and --cluster were swapped.
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["schema"] = "pulse.model/v1"; }),
            "c.json: $.schema: this is a model profile (\"pulse.model/v1\"), expected "
            "\"pulse.cluster/v2\"; pass it with --model");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["schema"] = "pulse.cluster/v3"; }),
            "c.json: $.schema: expected \"pulse.cluster/v2\" or \"pulse.cluster/v1\" (the "
            "versions this pulse-plan reads), got a string \"pulse.cluster/v3\"");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["schema"] = 1; }),
            "c.json: $.schema: expected \"pulse.cluster/v2\" or \"pulse.cluster/v1\" (the "
            "versions this pulse-plan reads), got 1");
}

TEST(ClusterLoader, MissingRequiredKeys) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j.erase("device"); }),
            "c.json: $: missing required key \"device\"");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"].erase("memory_bytes"); }),
            "c.json: $.device: missing required key \"memory_bytes\"");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["link_classes"]["IB"].erase("latency_s"); }),
            "c.json: $.link_classes.IB: missing required key \"latency_s\"");
}

TEST(ClusterLoader, WrongTypes) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["devices_per_node"] = "8"; }),
            "c.json: $.devices_per_node: expected an integer >= 1, got a string \"8\"");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["overlap_comm"] = 0; }),
            "c.json: $.overlap_comm: expected true or false, got 0");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"]["memory_bytes"] = 1.5e6 + 0.5; }),
            "c.json: $.device.memory_bytes: expected an integer >= 1, got 1500000.5");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["link_classes"] = json::array(); }),
            // References to the missing classes are not reported again.
            "c.json: $.link_classes: expected an object of link class name -> "
            "{bandwidth_bytes_per_s, latency_s}, got an array of 0");
}

TEST(ClusterLoader, UnknownKeyWithDidYouMean) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"]["memory_byte"] = 5; }),
            "c.json: $.device.memory_byte: unknown key; did you mean \"memory_bytes\"?");
  // Too far from any allowed key for a suggestion: the allowed keys are listed instead.
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"]["memory"] = 5; }),
            "c.json: $.device.memory: unknown key (allowed here: type, memory_bytes, "
            "reserved_bytes, spec)");
  EXPECT_EQ(mutated_cluster_error([](json& j) {
              j["node"] = j["nodes"];
              j.erase("nodes");
            }),
            "c.json: $.node: unknown key; did you mean \"nodes\"?\n"
            "c.json: $: missing required key \"nodes\"");
}

// --- The device spec (pulse.cluster/v2) and the old format ------------------------------

std::string spec_error(const std::function<void(json&)>& mutate) {
  return mutated_cluster_error([&](json& j) { mutate(j["device"]["spec"]); });
}

TEST(ClusterLoader, DeviceSpecMissingKeys) {
  for (const char* key : {"stack", "peak_flops", "memory_bytes_per_s", "memory_efficiency",
                          "layer_floor_s", "source"}) {
    EXPECT_EQ(spec_error([&](json& s) { s.erase(key); }),
              fmt::format("c.json: $.device.spec: missing required key \"{}\"", key));
  }
  // Aliases are optional.
  auto r = parse_cluster_profile(
      cluster_with([](json& j) { j["device"]["spec"].erase("aliases"); }), "c.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->device_spec->aliases.empty());
}

TEST(ClusterLoader, DeviceSpecNegativeFigures) {
  EXPECT_EQ(spec_error([](json& s) { s["memory_bytes_per_s"] = -1; }),
            "c.json: $.device.spec.memory_bytes_per_s: expected a finite number > 0, got -1");
  EXPECT_EQ(spec_error([](json& s) { s["memory_efficiency"] = 0; }),
            "c.json: $.device.spec.memory_efficiency: expected a finite number > 0, got 0");
  EXPECT_EQ(spec_error([](json& s) { s["memory_efficiency"] = 1.5; }),
            "c.json: $.device.spec.memory_efficiency: expected the fraction of "
            "memory_bytes_per_s achieved, at most 1, got 1.5");
  EXPECT_EQ(spec_error([](json& s) { s["layer_floor_s"] = -1e-6; }),
            "c.json: $.device.spec.layer_floor_s: expected a finite number >= 0, got -1e-06");
  EXPECT_EQ(spec_error([](json& s) { s["peak_flops"]["fp8"] = -2e12; }),
            "c.json: $.device.spec.peak_flops.fp8: expected a finite number > 0, got "
            "-2000000000000.0");
  // A floor of 0 is allowed: a device whose host never holds it back.
  auto r = parse_cluster_profile(
      cluster_with([](json& j) { j["device"]["spec"]["layer_floor_s"] = 0; }), "c.json");
  EXPECT_TRUE(r.ok()) << r.error().message;
}

TEST(ClusterLoader, DeviceSpecIllTyped) {
  EXPECT_EQ(spec_error([](json& s) { s["peak_flops"] = 1e12; }),
            "c.json: $.device.spec.peak_flops: expected an object of precision -> dense FLOP/s, "
            "e.g. {\"fp16\": 9.894e14}, got 1000000000000.0");
  EXPECT_EQ(spec_error([](json& s) { s["peak_flops"] = json::object(); }),
            "c.json: $.device.spec.peak_flops: expected an object of precision -> dense FLOP/s, "
            "e.g. {\"fp16\": 9.894e14}, got an object");
  EXPECT_EQ(spec_error([](json& s) { s["peak_flops"]["bf16"] = "1e12"; }),
            "c.json: $.device.spec.peak_flops.bf16: expected a finite number > 0, got a string "
            "\"1e12\"");
  EXPECT_EQ(spec_error([](json& s) { s["stack"] = 3; }),
            "c.json: $.device.spec.stack: expected a non-empty string, got 3");
  EXPECT_EQ(spec_error([](json& s) { s["source"] = ""; }),
            "c.json: $.device.spec.source: expected a non-empty string, got a string \"\"");
  EXPECT_EQ(spec_error([](json& s) {
              s["aliases"] = json::array({"NVIDIA X", 7});
            }),
            "c.json: $.device.spec.aliases[1]: expected a non-empty string, got 7");
  EXPECT_EQ(spec_error([](json& s) { s["memory_bandwidth"] = 1; }),
            "c.json: $.device.spec.memory_bandwidth: unknown key (allowed here: aliases, stack, "
            "peak_flops, memory_bytes_per_s, memory_efficiency, layer_floor_s, source)");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"]["spec"] = json::array(); }),
            "c.json: $.device.spec: expected an object, got an array of 0");
}

TEST(ClusterLoader, AFileOfTheOldFormatIsStillRead) {
  // pulse.cluster/v1: no spec; the informational peak is read, for the message that asks for
  // a spec (derive_test.cpp).
  auto r = parse_cluster_profile(cluster_with([](json& j) {
                                   j["schema"] = "pulse.cluster/v1";
                                   j["device"].erase("spec");
                                   j["device"]["peak_fp16_flops"] = 1e12;
                                 }),
                                 "c.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->schema, "pulse.cluster/v1");
  EXPECT_FALSE(r->device_spec.has_value());
  EXPECT_EQ(r->v1_peak_fp16_flops, 1e12);
  EXPECT_EQ(r->device_type, "GPU");
  EXPECT_EQ(r->usable_memory(), 999000);
  // Without the peak as well: v1 never required it.
  EXPECT_TRUE(parse_cluster_profile(cluster_with([](json& j) {
                                      j["schema"] = "pulse.cluster/v1";
                                      j["device"].erase("spec");
                                    }),
                                    "c.json")
                  .ok());
  // A v2 file without a spec is read too: its device's times are not derived.
  auto v2 =
      parse_cluster_profile(cluster_with([](json& j) { j["device"].erase("spec"); }), "c.json");
  ASSERT_TRUE(v2.ok());
  EXPECT_FALSE(v2->device_spec.has_value());
}

TEST(ClusterLoader, EachVersionNamesTheOthersDeviceKey) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"]["peak_fp16_flops"] = 1e12; }),
            "c.json: $.device.peak_fp16_flops: not a key of pulse.cluster/v2: the peak is "
            "$.device.spec.peak_flops.fp16");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["schema"] = "pulse.cluster/v1"; }),
            "c.json: $.device.spec: a device spec needs \"schema\": \"pulse.cluster/v2\" (this "
            "file is pulse.cluster/v1)");
}

TEST(ClusterLoader, ShapeLimits) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["nodes"] = 0; }),
            "c.json: $.nodes: expected an integer >= 1, got 0");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["devices_per_node"] = 5000; }),
            "c.json: $.devices_per_node: expected at most 4096");
}

// --- Device -----------------------------------------------------------------------------

TEST(ClusterLoader, ReservedBytesMustBeBelowMemory) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"]["reserved_bytes"] = 1000000; }),
            "c.json: $.device.reserved_bytes: expected less than memory_bytes (1000000), got "
            "1000000");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"]["reserved_bytes"] = 2000000; }),
            "c.json: $.device.reserved_bytes: expected less than memory_bytes (1000000), got "
            "2000000");
}

TEST(ClusterLoader, MemoryMustBePositive) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"]["memory_bytes"] = 0; }),
            "c.json: $.device.memory_bytes: expected an integer >= 1, got 0");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"]["reserved_bytes"] = -1; }),
            "c.json: $.device.reserved_bytes: expected an integer >= 0, got -1");
}

// --- Link classes -----------------------------------------------------------------------

TEST(ClusterLoader, BandwidthMustBePositive) {
  EXPECT_EQ(
      mutated_cluster_error([](json& j) { j["link_classes"]["NVL"]["bandwidth_bytes_per_s"] = 0; }),
      "c.json: $.link_classes.NVL.bandwidth_bytes_per_s: expected a finite number >= 1, "
      "got 0");
  EXPECT_EQ(mutated_cluster_error(
                [](json& j) { j["link_classes"]["NVL"]["bandwidth_bytes_per_s"] = -4e10; }),
            "c.json: $.link_classes.NVL.bandwidth_bytes_per_s: expected a finite number >= 1, "
            "got -40000000000.0");
}

// Beyond the limits (pulse/base/limits.hpp) a transfer time could be infinite or a memory
// sum overflow: refused with the path. 5e-324 B/s once gave "iteration inf s".
TEST(ClusterLoader, LinksAndMemoryWithinLimits) {
  EXPECT_EQ(mutated_cluster_error(
                [](json& j) { j["link_classes"]["NVL"]["bandwidth_bytes_per_s"] = 5e-324; }),
            "c.json: $.link_classes.NVL.bandwidth_bytes_per_s: expected a finite number >= 1, "
            "got 5e-324");
  EXPECT_EQ(mutated_cluster_error(
                [](json& j) { j["link_classes"]["NVL"]["bandwidth_bytes_per_s"] = 1e16; }),
            "c.json: $.link_classes.NVL.bandwidth_bytes_per_s: expected a number <= "
            "1000000000000000 (pulse-plan's limit), got 1e+16");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["link_classes"]["NVL"]["latency_s"] = 61; }),
            "c.json: $.link_classes.NVL.latency_s: expected a number <= 60 (pulse-plan's limit), "
            "got 61");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["device"]["memory_bytes"] = 1LL << 51; }),
            "c.json: $.device.memory_bytes: expected an integer <= 1125899906842624 (pulse-plan's "
            "limit), got 2251799813685248");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["nodes"] = 21846; }),
            "c.json: $.nodes: expected at most 65536 devices in all (pulse-plan's limit), got "
            "21846 nodes x 3 devices per node");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["nodes"] = 21845; }), "<loaded without error>");
}

TEST(ClusterLoader, LatencyMustNotBeNegative) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["link_classes"]["IB"]["latency_s"] = -1e-6; }),
            "c.json: $.link_classes.IB.latency_s: expected a finite number >= 0, got -1e-06");
  // Zero latency is allowed.
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["link_classes"]["IB"]["latency_s"] = 0; }),
            "<loaded without error>");
}

TEST(ClusterLoader, LinkClassNamedXIsReserved) {
  EXPECT_EQ(mutated_cluster_error([](json& j) {
              j["link_classes"]["X"] = {{"bandwidth_bytes_per_s", 1e9}, {"latency_s", 0}};
            }),
            "c.json: $.link_classes.X: the class name \"X\" is reserved for the intra_node "
            "diagonal");
}

TEST(ClusterLoader, LinkClassNameThatIsNotAnIdentifierIsQuotedInThePath) {
  EXPECT_EQ(mutated_cluster_error([](json& j) {
              j["link_classes"]["NV-2"] = {{"bandwidth_bytes_per_s", 1e9}};
            }),
            "c.json: $.link_classes[\"NV-2\"]: missing required key \"latency_s\"");
}

// --- intra_node and inter_node -----------------------------------------------------------

TEST(ClusterLoader, IntraNodeWrongNumberOfRows) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["intra_node"].erase(2); }),
            "c.json: $.intra_node: expected 3 rows (devices_per_node), got 2");
}

TEST(ClusterLoader, IntraNodeRowOfTheWrongLength) {
  EXPECT_EQ(mutated_cluster_error([](json& j) {
              j["intra_node"][1] = {"NVL", "X"};
            }),
            "c.json: $.intra_node[1]: expected a row of 3 link class names, got an array of 2");
}

TEST(ClusterLoader, IntraNodeNotSymmetric) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["intra_node"][0][1] = "PCIE"; }),
            "c.json: $.intra_node[1][0]: matrix must be symmetric: [0][1] is \"PCIE\" but "
            "[1][0] is \"NVL\"");
}

TEST(ClusterLoader, IntraNodeDiagonalMustBeX) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["intra_node"][1][1] = "NVL"; }),
            "c.json: $.intra_node[1][1]: expected \"X\" on the diagonal, got a string \"NVL\"");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["intra_node"][2][2] = nullptr; }),
            "c.json: $.intra_node[2][2]: expected \"X\" on the diagonal, got null");
}

TEST(ClusterLoader, UnknownLinkClassWithDidYouMean) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["intra_node"][0][2] = "PCI"; }),
            "c.json: $.intra_node[0][2]: unknown link class \"PCI\"; did you mean \"PCIE\"?");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["inter_node"] = "RoCE-100G"; }),
            "c.json: $.inter_node: unknown link class \"RoCE-100G\" (not in $.link_classes)");
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["intra_node"][1][2] = 7; }),
            "c.json: $.intra_node[1][2]: expected a link class name, got 7");
}

TEST(ClusterLoader, XOffTheDiagonal) {
  // "X" is the diagonal marker; off the diagonal it gets its own message, not a guess.
  EXPECT_EQ(mutated_cluster_error([](json& j) { j["intra_node"][0][1] = "X"; }),
            "c.json: $.intra_node[0][1]: \"X\" marks the diagonal only; expected a link class "
            "name");
}

TEST(ClusterLoader, InterNodeRequiredWithSeveralNodes) {
  EXPECT_EQ(mutated_cluster_error([](json& j) { j.erase("inter_node"); }),
            "c.json: $: missing key \"inter_node\", required because the cluster has 2 nodes");
}

TEST(ClusterLoader, SeveralErrorsReportedTogether) {
  EXPECT_EQ(mutated_cluster_error([](json& j) {
              j["device"]["reserved_bytes"] = 1000000;
              j["link_classes"]["PCIE"]["bandwidth_bytes_per_s"] = 0;
              j["intra_node"][0][0] = "NVL";
              j["intra_node"][2][1] = "NVLL";
              j["inter_node"] = "IBB";
            }),
            "c.json: $.device.reserved_bytes: expected less than memory_bytes (1000000), got "
            "1000000\n"
            "c.json: $.link_classes.PCIE.bandwidth_bytes_per_s: expected a finite number >= 1, "
            "got 0\n"
            "c.json: $.intra_node[0][0]: expected \"X\" on the diagonal, got a string \"NVL\"\n"
            "c.json: $.intra_node[2][1]: unknown link class \"NVLL\"; did you mean \"NVL\"?\n"
            "c.json: $.inter_node: unknown link class \"IBB\"; did you mean \"IB\"?");
}

TEST(ClusterLoader, NonexistentFile) {
  auto r = load_cluster_profile("no-such-cluster.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  EXPECT_EQ(r.error().message,
            "no-such-cluster.json: cannot open file for reading: No such file or directory");
}

// --- Shipped profiles -------------------------------------------------------------------

TEST(ClusterLoader, EveryShippedClusterProfileLoads) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kRoot + "/profiles/clusters")) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    auto r = load_cluster_profile(entry.path().string());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->file.name, entry.path().filename().string());
    EXPECT_EQ(r->file.sha256, sha256_hex(read_file(entry.path())));
    EXPECT_GT(r->usable_memory(), 0) << entry.path();
    if (r->nodes > 1) {
      EXPECT_GE(r->inter_node, 0) << entry.path();
    }
    // Every distinct pair of ranks has a link.
    for (RankId a = 0; a < r->num_devices(); ++a) {
      for (RankId b = 0; b < r->num_devices(); ++b) {
        if (a != b) {
          EXPECT_GT(r->link(a, b).bandwidth_bytes_per_s, 0);
        }
      }
    }
  }
  EXPECT_GE(count, 2);
}

TEST(ClusterLoader, Dgx1TwoNodesLinks) {
  // The DGX-1 hybrid cube-mesh as `nvidia-smi topo -m` prints it: GPU0 has one NVLink to
  // GPU1 and GPU2, two to GPU3 and GPU4, none to GPU5-7; nodes are joined by InfiniBand.
  auto r = load_cluster_profile(kRoot + "/profiles/clusters/dgx1-v100-16gb-2n.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ClusterProfile& c = *r;
  EXPECT_EQ(c.device_type, "V100-SXM2");
  EXPECT_EQ(c.devices_per_node, 8);
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.num_devices(), 16);
  EXPECT_EQ(c.memory_bytes, 17179869184);  // 16 GiB
  EXPECT_EQ(c.usable_memory(), c.memory_bytes - c.reserved_bytes);

  // Same node.
  EXPECT_EQ(c.link(0, 1).name, "NV1");
  EXPECT_EQ(c.link(0, 3).name, "NV2");
  EXPECT_EQ(c.link(3, 0).name, "NV2");
  EXPECT_EQ(c.link(0, 5).name, "SYS");
  EXPECT_EQ(c.link(3, 7).name, "NV1");
  // Same local pair on node 1 (ranks 8-15) gives the same classes.
  EXPECT_EQ(c.link(8, 11).name, "NV2");
  EXPECT_EQ(c.link(12, 15).name, "NV2");
  EXPECT_EQ(c.link(9, 12).name, "SYS");
  // Across nodes, whatever the local indices.
  EXPECT_EQ(c.link(0, 8).name, "IB");
  EXPECT_EQ(c.link(7, 9).name, "IB");
  EXPECT_DOUBLE_EQ(c.link(0, 8).bandwidth_bytes_per_s, 1.125e10);
  EXPECT_DOUBLE_EQ(c.link(0, 1).bandwidth_bytes_per_s, 2.0e10);
  EXPECT_DOUBLE_EQ(c.link(0, 1).latency_s, 8e-06);
}

TEST(ClusterLoader, Dgx1OneNodeHasNoInterNode) {
  auto r = load_cluster_profile(kRoot + "/profiles/clusters/dgx1-v100-32gb-1n.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->nodes, 1);
  EXPECT_EQ(r->num_devices(), 8);
  EXPECT_EQ(r->memory_bytes, 34359738368);  // 32 GiB
  EXPECT_EQ(r->link(4, 7).name, "NV2");
  EXPECT_EQ(r->link(1, 2).name, "NV2");
  EXPECT_EQ(r->link(2, 6).name, "NV1");
}

}  // namespace
}  // namespace pulse
