// The published pipeline schedules, behind one registry: a name (an enum, and its text as
// PyTorch's `get_schedule_class` maps "ZBVZeroBubble" to its class,
// torch/distributed/pipelining/schedules.py) and one signature, a request in and a schedule
// out. Every generator is a restatement of its authors' own rules (each file names the commit
// it restates); the synthesizer seeds its search with them (synthesize.hpp), the benchmarks
// compare with them (bench/), and the tests hold each to its authors' orders.
//
//   gpipe      GPipe: every forward, then every backward; any layout.
//   1f1b       1F1B (PipeDream-Flush) as a list schedule: backward first, each device
//              admitting at most its in-flight limit (list_schedule.hpp); any layout.
//   zb-v       ZB-V by its greedy, on the pipeline's own stage and link times, each device's
//              activations within a room in bytes (solver/schedule/zbv_greedy.cpp).
//   zb-v-fill  ZB-V's fill loop as its authors wrote it (zbv.py), on scalar costs and a
//              budget in stage activations: the authors' pick among their variants.
//   v-half     V-Half from its repeating pattern (zbv_greedy.py).
//   v-min      V-Min from its repeating pattern (zbv_greedy.py).
//   v-auto     V-auto's building-block search (v_auto_schedule.py), on scalar costs and a
//              budget in stage activations: the authors' pick among its candidates.
//   dualpipev  DeepSeek's DualPipeV (dualpipe/dualpipev.py), from 2P microbatches; PyTorch's
//              ScheduleDualPipeV gives the same order (bench/bench_torch_v.cpp checks it).
//   zbv-zero-bubble  PyTorch's ScheduleZBVZeroBubble (schedules.py): a fixed order.
//
// All but gpipe and 1f1b are V schedules: they need the V with two stages per device
// (v_families.hpp, is_two_stage_v) and are ordered with a split backward (ops F, I and W).
// Asked without one, a V schedule gives each I as a full backward in its place and drops the
// W ops: the order a runtime that cannot split the backward runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulse/base/result.hpp"
#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse {

enum class PublishedSchedule {
  gpipe,
  one_f_one_b,
  zb_v,
  zb_v_fill,
  v_half,
  v_min,
  v_auto,
  dualpipev,
  zbv_zero_bubble,
};

/// Every published schedule, in the order the header lists them.
const std::vector<PublishedSchedule>& published_schedules();

/// "gpipe", "1f1b", "zb-v", "zb-v-fill", "v-half", "v-min", "v-auto", "dualpipev",
/// "zbv-zero-bubble".
const char* published_schedule_name(PublishedSchedule schedule);

/// The schedule of `name` (any case); an unknown name is a usage error listing the known
/// ones, as get_schedule_class's ValueError does.
Result<PublishedSchedule> published_schedule_named(std::string_view name);

/// One F, B (the input gradient) and W time and one link time for every stage, in
/// milliseconds: what the authors' own generators (zb-v-fill, v-auto) take.
struct ScalarStageCosts {
  double forward_ms = 1;
  double input_grad_ms = 1;
  double weight_grad_ms = 1;
  double link_ms = 0;
};

struct PublishedRequest {
  /// The stages' costs and placement (and the links' times) the schedule is for.
  const PipelineModel* model = nullptr;
  int num_microbatches = 1;
  /// Backward as I and W; without, a V schedule's I ops become full backwards (above).
  bool split_backward = true;
  /// zb-v: per device, the bytes activations (and skip caches) may hold under the memory
  /// rule; empty: ZB-V's own room (zbv_room, v_families.hpp).
  std::vector<std::int64_t> activation_room = {};
  /// 1f1b: per device, the microbatches in flight at most; empty: default_inflight.
  std::vector<int> inflight_limit = {};
  /// zb-v-fill and v-auto: the stage activations a device may hold (the authors' max_mem).
  int max_mem = 0;
  /// zb-v-fill and v-auto: the costs the authors' generators see; absent: what the authors'
  /// runtime would give them for this pipeline (the upper median over devices of each
  /// device's average, v_seeds.hpp authors_costs).
  std::optional<ScalarStageCosts> scalar_costs = {};
};

/// The schedule `schedule` names, for `request`. An error says why there is none: the
/// request does not suit it (no model, no microbatch, not a two-stage V: input kind), or it
/// does not run there (ZB-V's room too small for its warm-up, the
/// authors' code raising at this budget, DualPipeV below 2P microbatches: infeasible kind).
Result<Schedule> published_schedule(PublishedSchedule schedule, const PublishedRequest& request);

}  // namespace pulse
