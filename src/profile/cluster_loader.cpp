#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "loader_common.hpp"
#include "pulse/base/json_check.hpp"
#include "pulse/base/limits.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

namespace {

// The version this pulse-plan writes, then the ones it still reads. v2 moved
// device.peak_fp16_flops into the device spec (device.spec.peak_flops.fp16).
constexpr const char* kClusterSchema = "pulse.cluster/v2";
constexpr const char* kClusterSchemaV1 = "pulse.cluster/v1";
// The diagonal marker of the intra_node matrix, as `nvidia-smi topo -m` prints it.
constexpr const char* kSelf = "X";

// The keys of the device object in each version; the other version's key is named with
// where it belongs.
bool check_device_keys(JsonChecker& check, const json& dev, const JsonPath& path, bool v1) {
  if (!dev.is_object()) return check.object(dev, path, {});
  const char* other = v1 ? "spec" : "peak_fp16_flops";
  json rest = dev;
  if (rest.erase(other) > 0) {
    check.fail(path.key(other),
               v1 ? fmt::format("a device spec needs \"schema\": \"{}\" (this file is {})",
                                kClusterSchema, kClusterSchemaV1)
                  : fmt::format("not a key of {}: the peak is $.device.spec.peak_flops.fp16",
                                kClusterSchema));
  }
  return check.object(rest, path,
                      {"type", "memory_bytes", "reserved_bytes", v1 ? "peak_fp16_flops" : "spec"});
}

void read_device(JsonChecker& check, const json& root, ClusterProfile& c) {
  const JsonPath path = JsonPath{}.key("device");
  const json* dev = check.member(root, JsonPath{}, "device", true);
  const bool v1 = c.schema == kClusterSchemaV1;
  if (!dev || !check_device_keys(check, *dev, path, v1)) return;
  c.device_type = check.string(*dev, path, "type").value_or("");
  c.memory_bytes = check.integer(*dev, path, "memory_bytes", 1, true, kMaxDeviceMemory).value_or(0);
  c.reserved_bytes =
      check.integer(*dev, path, "reserved_bytes", 0, false, kMaxDeviceMemory).value_or(0);
  if (v1 && dev->contains("peak_fp16_flops")) {
    c.v1_peak_fp16_flops = check.number(*dev, path, "peak_fp16_flops", 0.0, true, false);
  }
  if (!v1 && dev->contains("spec")) {
    c.device_spec = read_device_spec(check, dev->at("spec"), path.key("spec"), c.device_type);
  }
  if (c.memory_bytes > 0 && c.reserved_bytes >= c.memory_bytes) {
    check.fail(path.key("reserved_bytes"),
               fmt::format("expected less than memory_bytes ({}), got {}", c.memory_bytes,
                           c.reserved_bytes));
  }
}

// Returns whether the section lists class names at all (references can be checked); a class
// with a bad number is still a known name.
bool read_link_classes(JsonChecker& check, const json& root, ClusterProfile& c) {
  const JsonPath path = JsonPath{}.key("link_classes");
  const json* classes = check.member(root, JsonPath{}, "link_classes", true);
  if (!classes) return false;
  if (!classes->is_object() || classes->empty()) {
    check.fail(path, fmt::format("expected an object of link class name -> "
                                 "{{bandwidth_bytes_per_s, latency_s}}, got {}",
                                 describe(*classes)));
    return false;
  }
  // nlohmann iterates object keys in sorted order, so class indices are deterministic.
  for (const auto& [name, value] : classes->items()) {
    const JsonPath lp = path.key(name);
    if (name == kSelf) {
      check.fail(lp, "the class name \"X\" is reserved for the intra_node diagonal");
      continue;
    }
    if (!check.object(value, lp, {"bandwidth_bytes_per_s", "latency_s", "description"})) continue;
    LinkClass link;
    link.name = name;
    link.bandwidth_bytes_per_s = check
                                     .number(value, lp, "bandwidth_bytes_per_s", kMinLinkBandwidth,
                                             false, true, kMaxLinkBandwidth)
                                     .value_or(1.0);
    link.latency_s =
        check.number(value, lp, "latency_s", 0.0, false, true, kMaxLinkLatency).value_or(0.0);
    if (value.contains("description")) check.string(value, lp, "description");
    c.link_classes.push_back(std::move(link));
  }
  return true;
}

// The link classes by name, built once: every cell of the intra_node matrix names one (a
// node of 4096 devices has 16 million cells).
struct ClassIndex {
  std::unordered_map<std::string, int> index;
  std::vector<std::string> names;
  bool valid = false;  ///< $.link_classes lists names at all (else references are not checked)
};

ClassIndex index_classes(const ClusterProfile& c, bool valid) {
  ClassIndex out;
  out.valid = valid;
  for (std::size_t i = 0; i < c.link_classes.size(); ++i) {
    out.index.emplace(c.link_classes[i].name, static_cast<int>(i));
    out.names.push_back(c.link_classes[i].name);
  }
  return out;
}

// A link class reference; unknown names get a did-you-mean. With a broken link_classes
// section unknown names are not reported again.
int resolve_class(JsonChecker& check, const json& value, const JsonPath& path,
                  const ClassIndex& classes) {
  if (value == kSelf) {
    check.fail(path, "\"X\" marks the diagonal only; expected a link class name");
    return -1;
  }
  if (!value.is_string()) {
    check.fail(path, fmt::format("expected a link class name, got {}", describe(value)));
    return -1;
  }
  const std::string& name = value.get_ref<const std::string&>();
  const auto it = classes.index.find(name);
  if (it != classes.index.end()) return it->second;
  if (!classes.valid) return -1;
  const std::string guess = check.full() ? "" : closest_match(name, classes.names);
  check.fail(path,
             guess.empty()
                 ? fmt::format("unknown link class \"{}\" (not in $.link_classes)", name)
                 : fmt::format("unknown link class \"{}\"; did you mean \"{}\"?", name, guess));
  return -1;
}

void read_intra_node(JsonChecker& check, const json& root, ClusterProfile& c,
                     const ClassIndex& classes) {
  const JsonPath path = JsonPath{}.key("intra_node");
  const json* matrix = check.array(root, JsonPath{}, "intra_node", true);
  if (!matrix) return;
  const std::size_t n = static_cast<std::size_t>(c.devices_per_node);
  if (matrix->size() != n) {
    check.fail(path, fmt::format("expected {} rows (devices_per_node), got {}", n, matrix->size()));
    return;
  }
  c.intra_node.assign(n, std::vector<int>(n, -1));
  for (std::size_t a = 0; a < n; ++a) {
    const json& row = (*matrix)[a];
    if (!row.is_array() || row.size() != n) {
      check.fail(path.at(a),
                 fmt::format("expected a row of {} link class names, got {}", n, describe(row)));
      continue;
    }
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) {
        if (row[b] != kSelf) {
          check.fail(path.at(a).at(b),
                     fmt::format("expected \"X\" on the diagonal, got {}", describe(row[b])));
        }
        continue;
      }
      // The path of a cell only for a message: most cells name a known class.
      const auto known = row[b].is_string()
                             ? classes.index.find(row[b].get_ref<const std::string&>())
                             : classes.index.end();
      c.intra_node[a][b] = known != classes.index.end()
                               ? known->second
                               : resolve_class(check, row[b], path.at(a).at(b), classes);
    }
  }
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      const int ab = c.intra_node[a][b], ba = c.intra_node[b][a];
      if (ab >= 0 && ba >= 0 && ab != ba) {
        check.fail(path.at(b).at(a),
                   fmt::format("matrix must be symmetric: [{}][{}] is \"{}\" but [{}][{}] is "
                               "\"{}\"",
                               a, b, c.link_classes[ab].name, b, a, c.link_classes[ba].name));
      }
    }
  }
}

}  // namespace

Result<ClusterProfile> parse_cluster_profile(std::string_view text, const std::string& file) {
  auto root = parse_json(text, file, kProfileJsonLimits);
  if (!root) return root.error();
  JsonChecker check(file);
  ClusterProfile c;
  // The tag first: a profile of the other kind (swapped --model and --cluster) gets one
  // line saying so rather than a list of unknown keys.
  if (root->is_object() && !check_schema_tag(check, *root, {kClusterSchema, kClusterSchemaV1})) {
    return check.error();
  }
  if (root->is_object() && root->contains("schema") && (*root)["schema"].is_string()) {
    c.schema = (*root)["schema"].get<std::string>();
  }
  if (!check.object(
          *root, JsonPath{},
          {"schema", "name", "description", "provenance", "device", "devices_per_node", "nodes",
           "link_classes", "intra_node", "inter_node", "overlap_comm", "allreduce"})) {
    return check.error();
  }
  c.name = check.string(*root, JsonPath{}, "name").value_or("");
  if (root->contains("description")) {
    c.description = check.string(*root, JsonPath{}, "description").value_or("");
  }
  c.provenance = read_provenance(check, *root, JsonPath{});
  read_device(check, *root, c);
  const auto per_node = check.integer(*root, JsonPath{}, "devices_per_node", 1);
  const auto nodes = check.integer(*root, JsonPath{}, "nodes", 1);
  if (per_node && *per_node > 4096) {
    check.fail(JsonPath{}.key("devices_per_node"), "expected at most 4096");
  }
  if (nodes && *nodes > 65536) check.fail(JsonPath{}.key("nodes"), "expected at most 65536");
  if (per_node && nodes && *per_node <= 4096 && *nodes <= 65536 &&
      *per_node * *nodes > kMaxDevices) {
    check.fail(JsonPath{}.key("nodes"),
               fmt::format("expected at most {} devices in all (pulse-plan's limit), got {} nodes "
                           "x {} devices per node",
                           kMaxDevices, *nodes, *per_node));
  }
  c.devices_per_node = static_cast<int>(std::clamp<std::int64_t>(per_node.value_or(0), 0, 4096));
  c.nodes = static_cast<int>(std::clamp<std::int64_t>(nodes.value_or(0), 0, 65536));
  const ClassIndex classes = index_classes(c, read_link_classes(check, *root, c));
  if (per_node && *per_node <= 4096) read_intra_node(check, *root, c, classes);
  if (const json* inter = check.member(*root, JsonPath{}, "inter_node", false)) {
    c.inter_node = resolve_class(check, *inter, JsonPath{}.key("inter_node"), classes);
  } else if (c.nodes > 1) {
    check.fail(JsonPath{}, fmt::format("missing key \"inter_node\", required because the cluster "
                                       "has {} nodes",
                                       c.nodes));
  }
  c.overlap_comm = check.boolean(*root, JsonPath{}, "overlap_comm", false).value_or(false);
  if (root->contains("allreduce")) {
    c.allreduce = check.string(*root, JsonPath{}, "allreduce").value_or("ring");
    if (c.allreduce != "ring" && c.allreduce != "hierarchical") {
      check.fail(JsonPath{}.key("allreduce"),
                 fmt::format("expected \"ring\" or \"hierarchical\", got \"{}\"", c.allreduce));
    }
  }
  if (!check.ok()) return check.error();
  c.file.name = base_name(file);
  c.file.path = file;
  c.file.sha256 = sha256_hex(text);
  return c;
}

Result<ClusterProfile> load_cluster_profile(const std::string& path) {
  auto text = read_text_file(path, kMaxProfileFileBytes, "the profile file limit, 256 MiB");
  if (!text) return text.error();
  return parse_cluster_profile(*text, path);
}

}  // namespace pulse
