#include "v_peers.hpp"

#include <fstream>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pulse/graph/layer_graph.hpp"

namespace pulse::test {

namespace {

constexpr double kMs = 1e-3;

PeerRun read_run(const nlohmann::json& j) {
  PeerRun r;
  r.family = j.at("family").get<std::string>();
  r.max_mem = j.value("max_mem", 0);
  r.ok = j.at("ok").get<bool>();
  if (r.ok) {
    r.own_ms = j.at("own_ms").get<double>();
    r.makespan_ms = j.at("makespan_ms").get<double>();
    r.peak_bytes = j.at("peak_bytes").get<std::int64_t>();
    r.order_hash = j.at("order_fnv1a").get<std::string>();
  }
  return r;
}

PeerInstance read_instance(const nlohmann::json& j) {
  PeerInstance in;
  in.name = j.at("name").get<std::string>();
  in.group = j.at("group").get<std::string>();
  in.num_devices = j.at("P").get<int>();
  in.num_microbatches = j.at("M").get<int>();
  in.delay_ms = j.at("delay_ms").get<double>();
  const auto& scalar = j.at("scalar_costs_ms");
  in.f_ms = scalar.at(0).get<double>();
  in.b_ms = scalar.at(1).get<double>();
  in.w_ms = scalar.at(2).get<double>();
  for (const auto& s : j.at("stages")) {
    in.stages.push_back({s.at(0).get<double>(), s.at(1).get<double>(), s.at(2).get<double>(),
                         s.at(3).get<std::int64_t>()});
  }
  for (const auto& r : j.at("runs")) in.runs.push_back(read_run(r));
  return in;
}

}  // namespace

Result<std::vector<PeerInstance>> load_peer_fixture(const std::string& source_dir) {
  const std::string path = source_dir + "/tests/schedule/fixtures/zero_bubble_peers.json";
  std::ifstream file(path);
  if (!file) return input_error(fmt::format("{}: cannot open", path));
  try {
    const nlohmann::json j = nlohmann::json::parse(file);
    std::vector<PeerInstance> out;
    for (const auto& in : j.at("instances")) out.push_back(read_instance(in));
    return out;
  } catch (const nlohmann::json::exception& e) {
    return input_error(fmt::format("{}: {}", path, e.what()));
  }
}

ModelProfile peer_model_profile(const PeerInstance& in) {
  ModelProfile m;
  m.name = "v-" + in.name;
  m.microbatch_sizes = {1};
  m.device_types = {"T"};
  for (std::size_t s = 0; s < in.stages.size(); ++s) {
    const PeerStage& st = in.stages[s];
    Layer l;
    l.name = fmt::format("stage{}", s);
    l.params = 1000;
    l.forward_s = {{st.forward_ms * kMs}};
    l.backward_s = {{(st.input_grad_ms + st.weight_grad_ms) * kMs}};
    l.backward_weight_fraction = st.weight_grad_ms / (st.input_grad_ms + st.weight_grad_ms);
    l.activation_bytes_per_sample = st.activation_bytes;
    l.output_bytes_per_sample = 1000;
    m.layers.push_back(l);
  }
  return m;
}

ClusterProfile peer_cluster(const PeerInstance& in) {
  const int P = in.num_devices;
  ClusterProfile c;
  c.name = std::string("synthetic");
  c.device_type = std::string("T");
  c.memory_bytes = std::int64_t{1} << 40;
  c.devices_per_node = P;
  c.link_classes = {LinkClass{"L", 1e18, in.delay_ms * kMs}};
  c.intra_node.assign(P, std::vector<int>(P, 0));
  for (int i = 0; i < P; ++i) c.intra_node[i][i] = -1;
  c.overlap_comm = true;
  return c;
}

PipelineModel peer_pipeline_model(const PeerInstance& in) {
  const ModelProfile model = peer_model_profile(in);
  const ClusterProfile cluster = peer_cluster(in);
  const int P = in.num_devices;
  std::vector<LayerId> first(2 * P + 1);
  std::iota(first.begin(), first.end(), 0);
  std::vector<RankId> ranks(P);
  std::iota(ranks.begin(), ranks.end(), 0);
  const LayerGraph graph = LayerGraph::build(model, 0, 1);
  PipelineModel pm = build_pipeline_model(graph, v_layout(first, P), SkipRouting::direct,
                                          pipeline_links(cluster, ranks), cluster.overlap_comm);
  round_to_quantum(pm);
  return pm;
}

std::string order_hash(const Schedule& schedule) {
  std::uint64_t h = 1469598103934665603ULL;
  auto feed = [&h](const std::string& text) {
    for (unsigned char c : text) {
      h ^= c;
      h *= 1099511628211ULL;
    }
  };
  for (std::size_t d = 0; d < schedule.device_ops.size(); ++d) {
    if (d > 0) feed("|");
    for (const Op& op : schedule.device_ops[d]) {
      feed(fmt::format("{}{}.{} ", op_letter(op.kind), op.stage, op.mb));
    }
  }
  return fmt::format("{:016x}", h);
}

}  // namespace pulse::test
