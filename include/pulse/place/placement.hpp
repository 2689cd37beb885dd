// Placement: which cluster rank runs each pipeline device of each data-parallel replica.
// Pipelines go on fast links (inside a node when they fit: an NVLink-connected set on a
// DGX-1, a 4-NPU HCCS group on an Ascend 910A server), ordered along the pipeline so the
// boundaries that move the most bytes get the strongest links; replicas spread over nodes.
#pragma once

#include <cstdint>
#include <vector>

#include "pulse/plan/plan.hpp"
#include "pulse/profile/profile.hpp"

namespace pulse {

struct PlacementRequest {
  const ClusterProfile* cluster = nullptr;
  int pp = 1;
  int dp = 1;
  /// Per boundary between pipeline devices d and d+1 (pp - 1 entries): bytes per microbatch
  /// crossing it, both directions, and the messages that carry them. Empty: equal weights.
  std::vector<std::int64_t> boundary_bytes;
  std::vector<int> boundary_messages;
};

/// The ranks, and how they were chosen (the plan's rank_map.placement).
struct Placement : PlanPlacement {
  /// ranks[r][d]: the cluster rank of pipeline device d in replica r. Replica 0 is the one
  /// with the slowest boundary (the plan simulates it).
  std::vector<std::vector<RankId>> ranks;
};

/// Chooses a placement. Nodes of up to 9 devices are searched exhaustively (every order of
/// a node's devices, cut into paths); larger nodes keep the rank order.
Placement place_pipelines(const PlacementRequest& request);

}  // namespace pulse
