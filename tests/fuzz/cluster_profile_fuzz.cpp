// libFuzzer target: the cluster profile loader (parse_cluster_profile) on any bytes. It must
// return, never crash, leak or run into undefined behaviour; a refusal is an input error
// naming the file; a cluster it accepts keeps profile.hpp's promises (fuzz_support.hpp), and
// every pair of its ranks has a link (ClusterProfile::link, which the cost model calls).
// Seeds: profiles/clusters and the golden cases' cluster files (scripts/fuzz_corpus.py).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "pulse/profile/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pulse;
  constexpr const char* kFile = "fuzz.cluster.json";
  const auto cluster = parse_cluster_profile(fuzz::as_text(data, size), kFile);
  if (!cluster) {
    fuzz::require_input_error(cluster.error(), kFile);
    return 0;
  }
  fuzz::require_valid_cluster(*cluster);
  // Every pair of the first two nodes' ranks (enough to meet every matrix cell and the
  // inter-node class), bounded so a 4096-device node stays fast.
  const int ranks = std::min(cluster->num_devices(), 2 * std::min(cluster->devices_per_node, 64));
  for (RankId a = 0; a < ranks; ++a) {
    for (RankId b = 0; b < ranks; ++b) {
      if (a != b) fuzz::require(cluster->link(a, b).bandwidth_bytes_per_s > 0, "a link exists");
    }
  }
  return 0;
}
