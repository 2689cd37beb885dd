// Waves (partition.hpp): the V partitioner run on kP levels, each level a virtual device,
// then the levels folded onto the devices by wave_layout.

#include <algorithm>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "partition_dp.hpp"
#include "pulse/partition/partition.hpp"

namespace pulse::detail {

namespace {

// The V over kP levels of a wave placement: each level a virtual device on its physical
// device's links (free between levels of one device), with a k-th of its memory.
PartitionRequest level_request(const PartitionRequest& r) {
  const int k = r.waves, levels = k * r.pp;
  PartitionRequest v = r;
  v.pp = levels;
  v.waves = 1;
  v.memory_capacity = r.memory_capacity / k;
  const LinkClass same_device{"self", std::numeric_limits<double>::infinity(), 0.0};
  v.links = PipelineLinks(levels, same_device);
  v.inflight.assign(levels, 1);
  for (int a = 0; a < levels; ++a) {
    const DeviceId da = wave_device(a, r.pp);
    v.inflight[a] = r.inflight[da];
    for (int b = 0; b < levels; ++b) {
      const DeviceId db = wave_device(b, r.pp);
      if (da != db) v.links.set(a, b, r.links.at(da, db));
    }
  }
  return v;
}

}  // namespace

PartitionAnswer partition_waves(const PartitionRequest& request, SkipPolicy policy) {
  const PartitionRequest levels = level_request(request);
  PartitionAnswer answer = partition_v(levels, policy);
  if (!answer.found()) {
    if (answer.shortfall) {  // in device terms: k levels share the device
      answer.shortfall->device = wave_device(answer.shortfall->device, request.pp);
      answer.shortfall->needed_bytes *= request.waves;
      answer.shortfall->capacity_bytes = request.memory_capacity;
    }
    return answer;
  }
  PartitionResult& r = answer.result;
  r.layout = wave_layout(r.layout.first_layer, request.pp, request.waves);
  r.method = fmt::format("w{}-{}", request.waves,
                         r.method);  // GCC 12 warns (-Wrestrict) on "w" + std::string
  std::vector<double> load(request.pp, 0.0);
  std::vector<std::int64_t> memory(request.pp, 0);
  for (std::size_t l = 0; l < r.device_load_s.size(); ++l) {
    load[wave_device(static_cast<int>(l), request.pp)] += r.device_load_s[l];
    memory[wave_device(static_cast<int>(l), request.pp)] += r.device_memory_bytes[l];
  }
  r.device_load_s = load;
  r.device_memory_bytes = memory;
  r.objective_s = *std::max_element(load.begin(), load.end());
  const LayerPrefix prefix(*request.graph);
  const int L = prefix.num_layers;
  r.lower_bound_s = std::max(prefix.load_lower_bound(request.pp),
                             prefix.compute_in(0, 0) + prefix.compute_in(L - 1, L - 1));
  r.exact = false;
  answer.status = SolveStatus::feasible;
  return answer;
}

}  // namespace pulse::detail
