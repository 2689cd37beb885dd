// The operations of one microbatch and their dependencies, with the latencies the execution
// engine applies: an op's output reaches a consumer on another device when the op's compute
// and every send the op makes before that one have finished (sends leave in transfer order).
// The schedule ILP and the lower bound (lower_bound.hpp) are built on this graph.
#pragma once

#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse::detail {

struct OpType {
  OpKind kind;
  StageId stage;
  DeviceId device;
  double compute;    ///< Seconds of compute.
  double occupancy;  ///< Compute plus the sends that block the device afterwards.
};

struct OpEdge {
  int from, to;    ///< Indices into OpGraph::ops.
  double latency;  ///< Earliest start of `to` after the start of `from`.
};

struct OpGraph {
  std::vector<OpType> ops;  ///< In topological order.
  std::vector<OpEdge> edges;
  std::vector<std::vector<int>> by_device;
  std::vector<int> admitting;  ///< Per device: its first stage's forward (-1: no stage).
  std::vector<int> releasing;  ///< Per device: the op freeing its first stage's memory (-1).
  std::vector<double> head;    ///< Per op: longest path from the start of the microbatch.
  std::vector<double> tail;    ///< Per op: longest path from its start to the microbatch's end.
  double critical_path = 0;    ///< One microbatch alone, start to end.

  int find(OpKind kind, StageId stage) const;
};

OpGraph build_op_graph(const PipelineModel& model, bool split_backward);

}  // namespace pulse::detail
