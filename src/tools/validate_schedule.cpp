// The plan validator's checks of what the plan predicts: skip locality, transfers,
// schedule order, the simulated timeline and per-device memory.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pulse/base/units.hpp"
#include "pulse/profile/recompute.hpp"
#include "pulse/tools/frozen_check.hpp"
#include "validate_internal.hpp"

namespace pulse::detail {

void Validator::build_model() {
  StageLayout layout;
  layout.first_layer = first_layer_;
  layout.num_devices = plan_.pp();
  for (const PlanStage& s : plan_.stages) layout.device.push_back(s.device);
  // Skips that leave their device travel as the plan's routes say (one message, or relayed
  // through every boundary); each route is then checked against that routing.
  bool forwarded = false, routes = false;
  for (const PlanSkip& k : plan_.skips) {
    forwarded |= k.route == "forwarded";
    routes |= k.route == "forwarded" || k.route == "direct";
  }
  if (!routes) {
    const Family* known = known_family(plan_);
    forwarded = known && known->routing == SkipRouting::forwarded;
  }
  std::vector<RankId> ranks;
  const auto& groups = plan_.rank_map.pipeline_groups;
  const bool usable = !groups.empty() && static_cast<int>(groups[0].size()) == plan_.pp() &&
                      std::all_of(groups[0].begin(), groups[0].end(),
                                  [&](RankId r) { return r < cluster_.num_devices(); });
  for (DeviceId d = 0; d < plan_.pp(); ++d) ranks.push_back(usable ? groups[0][d] : d);
  graph_.emplace(LayerGraph::build(model_, device_type_, plan_.parallelism.microbatch_size));
  pm_ = build_pipeline_model(*graph_, layout,
                             forwarded ? SkipRouting::forwarded : SkipRouting::direct,
                             pipeline_links(cluster_, ranks), cluster_.overlap_comm);
  round_to_quantum(pm_);  // as the planner does: plans state times to the nanosecond
}

// What the plan says of each stage and device, against the pipeline model rebuilt from its
// layer lists: a plan whose figures were edited (or made from other profiles) is caught
// here, before the schedule is replayed with the rebuilt times.
void Validator::check_stage_figures() {
  const auto time = [&](const char* what, StageId s, const std::optional<double>& claimed,
                        double want) {
    if (claimed && !close(*claimed, want)) {
      fail("stages", fmt::format("stage {}: {} is {:.9f} s, the model's layers give {:.9f} s", s,
                                 what, *claimed, want));
    }
  };
  const auto count = [&](const char* what, StageId s, const std::optional<std::int64_t>& claimed,
                         std::int64_t want) {
    if (claimed && *claimed != want) {
      fail("stages",
           fmt::format("stage {}: {} is {}, the model's layers give {}", s, what, *claimed, want));
    }
  };
  for (const PlanStage& x : plan_.stages) {
    const StageCost& c = pm_.stages[x.id];
    time("forward_s", x.id, x.forward_s, c.forward_s);
    time("backward_s", x.id, x.backward_s, c.backward_s);
    time("backward_weight_s", x.id, x.backward_weight_s, c.backward_weight_s);
    count("params", x.id, x.params, c.params);
    count("activation_bytes_per_microbatch", x.id, x.activation_bytes_per_microbatch,
          c.activation_bytes);
    count("recompute_workspace_bytes_per_microbatch", x.id,
          x.recompute_workspace_bytes_per_microbatch, c.recompute_workspace_bytes);
    count("largest_layer_params", x.id, x.largest_layer_params, c.largest_layer_params);
    check_recomputed(x);
  }
  const std::vector<double> load = pm_.device_load();
  const std::vector<std::int64_t> params = pm_.device_params();
  for (const PlanDevice& d : plan_.devices) {
    if (d.load_s && !close(*d.load_s, load[d.device])) {
      fail("stages",
           fmt::format("device {}: load_s is {:.9f} s, its stages and sends give {:.9f} s",
                       d.device, *d.load_s, load[d.device]));
    }
    if (d.params && *d.params != params[d.device]) {
      fail("stages", fmt::format("device {}: params is {}, its stages hold {}", d.device, *d.params,
                                 params[d.device]));
    }
  }
}

// A runtime checkpoints the layers a stage names as recomputed (plan_doc.py), so they must
// be the ones the plan's mode selects in that stage, as the cost model charged them.
void Validator::check_recomputed(const PlanStage& x) {
  const std::string mode = plan_.recompute();
  const std::vector<std::string> want = recomputed_layers(
      mode, given_, pm_.layout.first_layer[x.id], pm_.layout.first_layer[x.id + 1]);
  if (!x.recomputed && !want.empty()) {
    fail("stages", fmt::format("stage {}: recomputed is missing; --recompute {} selects [{}], "
                               "which a runtime checkpoints by that list",
                               x.id, mode, fmt::join(want, ", ")));
  }
  if (x.recomputed && *x.recomputed != want) {
    fail("stages", fmt::format("stage {}: recomputed names [{}]; --recompute {} selects [{}]", x.id,
                               fmt::join(*x.recomputed, ", "), mode, fmt::join(want, ", ")));
  }
  if (x.recomputed_layers && *x.recomputed_layers != static_cast<int>(want.size())) {
    fail("stages", fmt::format("stage {}: recomputed_layers is {}; --recompute {} selects {}", x.id,
                               *x.recomputed_layers, mode, want.size()));
  }
}

void Validator::check_skips() {
  std::map<std::pair<std::string, std::string>, std::size_t> claimed;
  for (std::size_t i = 0; i < plan_.skips.size(); ++i) {
    const PlanSkip& k = plan_.skips[i];
    if (!claimed.emplace(std::pair{k.producer, k.consumer}, i).second) {
      fail("skips", fmt::format("skip {} -> {} is listed twice", k.producer, k.consumer));
    }
  }
  const auto& dev = pm_.layout.device;
  int nonlocal = 0;
  for (const SkipPlacement& s : pm_.skips) {
    const Skip& k = model_.skips[s.skip];
    const std::string& a = model_.layers[k.producer].name;
    const std::string& b = model_.layers[k.consumer].name;
    nonlocal += s.local ? 0 : 1;
    const auto it = claimed.find({a, b});
    if (it == claimed.end()) {
      fail("skips", fmt::format("skip \"{}\" ({} -> {}) is missing from skips[]", k.name, a, b));
      continue;
    }
    const PlanSkip& c = plan_.skips[it->second];
    claimed.erase(it);
    if (c.label() != k.name) {  // transfers and runtimes find a skip by its name
      fail("skips", fmt::format("skip {} -> {} is named \"{}\"; model {} names it \"{}\"", a, b,
                                c.label(), model_.name, k.name));
    }
    const std::string where =
        fmt::format("stage {} (device {}) to stage {} (device {})", s.producer_stage,
                    dev[s.producer_stage], s.consumer_stage, dev[s.consumer_stage]);
    if (c.producer_stage != s.producer_stage || c.consumer_stage != s.consumer_stage) {
      fail("skips", fmt::format("skip \"{}\" runs from {}; the plan says stage {} to stage {}",
                                c.label(), where, c.producer_stage, c.consumer_stage));
    } else if ((c.producer_device && *c.producer_device != dev[s.producer_stage]) ||
               (c.consumer_device && *c.consumer_device != dev[s.consumer_stage])) {
      fail("skips",
           fmt::format("skip \"{}\" runs from {}; the plan says device {} to device {}", c.label(),
                       where, c.producer_device.value_or(-1), c.consumer_device.value_or(-1)));
    }
    if (c.local != s.local) {
      fail("skips", fmt::format("skip \"{}\" is claimed {}local but runs from {}", c.label(),
                                c.local ? "" : "not ", where));
    }
    const std::string route = s.local                              ? "local"
                              : pm_.routing == SkipRouting::direct ? "direct"
                                                                   : "forwarded";
    if (c.route && *c.route != route) {
      fail("skips", fmt::format("skip \"{}\" has route \"{}\"; from {} it is \"{}\"", c.label(),
                                *c.route, where, route));
    }
    if (c.bytes_per_sample != k.bytes_per_sample) {
      fail("skips", fmt::format("skip \"{}\" has {} bytes per sample, the model says {}", c.label(),
                                c.bytes_per_sample, k.bytes_per_sample));
    }
  }
  for (const auto& [names, i] : claimed) {
    fail("skips", fmt::format("skips[{}] ({} -> {}) is not a skip of model {}", i, names.first,
                              names.second, model_.name));
  }
  if (plan_.partition.all_skips_local && nonlocal > 0) {
    fail("skips",
         fmt::format("partition.all_skips_local is true, but {} skips are not local", nonlocal));
  }
}

void Validator::check_cached_skips() {
  for (const PlanDevice& d : plan_.devices) {
    std::vector<std::string> want;
    for (const SkipPlacement& s : pm_.skips) {
      if (s.local && pm_.layout.device[s.producer_stage] == d.device) {
        want.push_back(model_.skips[s.skip].name);
      }
    }
    std::vector<std::string> got = d.cached_skips;
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    if (got != want) {
      fail("skips", fmt::format("device {} caches skips [{}]; its local skips are [{}]", d.device,
                                fmt::join(got, ", "), fmt::join(want, ", ")));
    }
  }
}

// Transfers are keyed by stage pair and kind: a skip sent directly between neighbouring
// stages travels beside the main activation, as a transfer of its own.
void Validator::check_transfers() {
  using Key = std::tuple<StageId, StageId, std::string>;
  std::map<Key, const PlanTransfer*> claimed;
  for (const PlanTransfer& t : plan_.transfers) {
    const std::string kind = t.kind.value_or("main");
    if (!claimed.emplace(Key{t.from_stage, t.to_stage, kind}, &t).second) {
      fail("transfers",
           fmt::format("stage {} -> {} ({}) is listed twice", t.from_stage, t.to_stage, kind));
    }
  }
  for (const Transfer& t : pm_.transfers) {
    const std::string kind = t.main_path ? "main" : "skip";
    const std::string name = fmt::format("stage {} -> {} ({})", t.from, t.to, kind);
    const auto it = claimed.find(Key{t.from, t.to, kind});
    if (it == claimed.end()) {
      fail("transfers", fmt::format("{} (device {} -> {}) moves {} bytes per microbatch forward "
                                    "but is missing from transfers[]",
                                    name, pm_.layout.device[t.from], pm_.layout.device[t.to],
                                    t.forward.total()));
      continue;
    }
    const PlanTransfer& c = *it->second;
    claimed.erase(it);
    check_transfer_links(name, t, c);
    check_transfer_carried(name, t, c);
    if (c.forward.total() != t.forward.total() || c.backward.total() != t.backward.total() ||
        !close(c.forward_s.value_or(0), t.forward_s) ||
        !close(c.backward_s.value_or(0), t.backward_s)) {
      fail("transfers", fmt::format("{} moves {} bytes in {:.9f} s forward and {} bytes in "
                                    "{:.9f} s backward; the plan says {} in {:.9f} s and {} in "
                                    "{:.9f} s",
                                    name, t.forward.total(), t.forward_s, t.backward.total(),
                                    t.backward_s, c.forward.total(), c.forward_s.value_or(0),
                                    c.backward.total(), c.backward_s.value_or(0)));
    }
  }
  for (const auto& [key, t] : claimed) {
    fail("transfers", fmt::format("stage {} -> {} ({}) is not a transfer of this partition",
                                  std::get<0>(key), std::get<1>(key), std::get<2>(key)));
  }
}

// A runtime sends the carried tensors a transfer names (plan_doc.py), so the names must be
// the ones the partition moves, in the model's order.
void Validator::check_transfer_carried(const std::string& name, const Transfer& t,
                                       const PlanTransfer& c) {
  if (!c.carried) return;
  std::vector<std::string> moved;
  for (int k : t.carried) moved.push_back(model_.carried[k].name);
  if (*c.carried != moved) {
    fail("transfers", fmt::format("{} moves the carried tensors [{}]; the plan names [{}]", name,
                                  fmt::join(moved, ", "), fmt::join(*c.carried, ", ")));
  }
}

// The plan's ops as a timeline. When sends block the sender, an op keeps its device until its
// sends are done (as in the execution engine, sends leave back to back). Plan times are
// rounded to the nanosecond, which check_schedule's 1 ns slack absorbs; each op is also
// narrowed by a picosecond at both ends, so that floating-point noise on top of a full
// nanosecond of rounding cannot fake an overlap (too little to show in a message).
Timeline Validator::timeline() const {
  std::vector<std::vector<std::size_t>> out_of(pm_.layout.num_stages()),
      into(pm_.layout.num_stages());
  for (std::size_t t = 0; t < pm_.transfers.size(); ++t) {
    out_of[pm_.transfers[t].from].push_back(t);
    into[pm_.transfers[t].to].push_back(t);
  }
  Timeline tl;
  tl.devices.resize(plan_.pp());
  for (DeviceId d = 0; d < plan_.pp(); ++d) {
    for (const PlanOp& o : plan_.schedule[d]) {
      double sends = 0;
      int messages = 0;
      if (!pm_.overlap_comm && o.op.kind == OpKind::forward) {
        for (std::size_t t : out_of[o.op.stage]) {
          sends += pm_.transfers[t].forward_s;
          ++messages;
        }
      } else if (!pm_.overlap_comm && o.op.kind != OpKind::backward_weight) {
        for (std::size_t t : into[o.op.stage]) {
          sends += pm_.transfers[t].backward_s;
          ++messages;
        }
      }
      const double start = o.start_s + kNoise;
      const double end = std::max(start, o.end_s - kNoise);
      // Send times may have been rounded to the nanosecond where the schedule was made: the
      // 1 ns slack covers one, half a nanosecond more is allowed for each further send.
      const double busy = std::max(end, end + sends - std::max(0, messages - 1) * kQuantum / 2);
      tl.devices[d].ops.push_back(TimedOp{o.op, start, end, busy});
      tl.makespan_s = std::max(tl.makespan_s, o.end_s + sends);
    }
  }
  return tl;
}

// Op kinds, every op once on its device and no op ending before it starts are structural
// (plan_check.hpp), checked before this; here, the order of the list against the times.
void Validator::check_schedule_order() {
  for (DeviceId d = 0; d < plan_.pp(); ++d) {
    const auto& ops = plan_.schedule[d];
    for (std::size_t i = 1; i < ops.size(); ++i) {
      if (ops[i].start_s < ops[i - 1].start_s) {
        fail("schedule", fmt::format("device {}: {} starts at {:.9f} s, before {} listed ahead of "
                                     "it ({:.9f} s)",
                                     d, op_name(ops[i].op), ops[i].start_s, op_name(ops[i - 1].op),
                                     ops[i - 1].start_s));
      }
    }
  }
}

// Dependencies and overlap first (with memory unbounded), then memory: the problems the
// second run adds are the memory ones.
void Validator::check_schedule_and_memory() {
  const Timeline tl = timeline();
  ScheduleCheckRequest request{&pm_,
                               &tl,
                               plan_.parallelism.num_microbatches,
                               plan_.split_backward(),
                               static_memory(pm_, plan_.memory(), plan_.parallelism.dp),
                               std::numeric_limits<std::int64_t>::max()};
  const std::vector<std::string> order = check_schedule(request);
  for (const std::string& m : order) fail("schedule", m);
  if (!order.empty()) return;
  check_timing(tl);
  for (const std::string& m : check_frozen_plan({&plan_, &tl, &model_, device_type_, &cluster_})) {
    fail("frozen", m);
  }
  request.memory_capacity = cluster_.usable_memory();
  for (const std::string& m : check_schedule(request)) fail("memory", m);
}

void Validator::check_timing(const Timeline& tl) {
  for (DeviceId d = 0; d < plan_.pp(); ++d) {
    for (const PlanOp& o : plan_.schedule[d]) {
      const StageCost& c = pm_.stages[o.op.stage];
      const double want = o.op.kind == OpKind::forward    ? c.forward_s
                          : o.op.kind == OpKind::backward ? c.backward_s
                          : o.op.kind == OpKind::backward_weight
                              ? c.backward_weight_s
                              : c.backward_s - c.backward_weight_s;
      if (!close(o.end_s - o.start_s, want)) {
        fail("timing", fmt::format("device {}: {} runs {:.9f} s, the cost model says {:.9f} s", d,
                                   op_name(o.op), o.end_s - o.start_s, want));
      }
    }
  }
  const double claimed = plan_.schedule_info.makespan_s.value_or(0);
  if (claimed > 0 && !close(claimed, tl.makespan_s)) {
    fail("timing", fmt::format("schedule_info.makespan_s is {:.9f} s, the schedule ends at "
                               "{:.9f} s",
                               claimed, tl.makespan_s));
  }
}

void Validator::check_predicted_memory() {
  const std::int64_t cap = cluster_.usable_memory();  // within the plan's headroom
  const std::int64_t usable = unscaled_.usable_memory();
  const auto& peaks = plan_.predicted.peak_memory_bytes;
  for (std::size_t d = 0; d < peaks.size(); ++d) {
    if (peaks[d] > cap) {
      const std::string within = cap == usable
                                     ? ""
                                     : fmt::format(" (chosen.headroom {:g} of {})",
                                                   plan_.headroom(), format_bytes(usable));
      fail("memory",
           fmt::format("device {}: predicted peak {} ({} bytes) is over the usable {} "
                       "({} bytes){}",
                       d, format_bytes(peaks[d]), peaks[d], format_bytes(cap), cap, within));
    }
  }
  for (const PlanDevicePrediction& d :
       plan_.predicted.devices.value_or(std::vector<PlanDevicePrediction>{})) {
    if (d.capacity_bytes.value_or(0) > 0 && *d.capacity_bytes != usable) {
      fail("memory", fmt::format("device {}: capacity_bytes is {}, cluster {} has {} usable",
                                 d.device, *d.capacity_bytes, cluster_.name, usable));
    }
  }
}

}  // namespace pulse::detail
