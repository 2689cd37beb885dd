#include "pulse/tools/validate.hpp"

#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pulse/base/units.hpp"
#include "pulse/plan/plan_check.hpp"
#include "pulse/profile/buckets.hpp"
#include "pulse/profile/derive.hpp"
#include "pulse/profile/recompute.hpp"
#include "pulse/profile/scaling.hpp"
#include "validate_internal.hpp"

namespace pulse {

namespace detail {
ValidateResult Validator::run() {
  check_inputs();
  check_cost_model();
  check_degrees();
  // The plan's structure (plan_check.hpp): every check after this one indexes the plan by
  // its own counts, so a plan that is not whole is only listed.
  const std::vector<PlanProblem> structure = check_plan_structure(plan_);
  for (const PlanProblem& p : structure) {
    out_.violations.push_back({p.check, fmt::format("{}: {}", p.path.str(), p.message)});
    out_.total += p.count;
  }
  if (!structure.empty()) {
    skip(
        "layers, placement, stages, skips, transfers, schedule, timing, memory and rank_map: the "
        "plan's structure is broken");
    finish();
    return std::move(out_);
  }
  check_stated_keys();
  const bool layers = check_layers();
  const bool placement = check_placement();
  const auto skip_model_checks = [&](const char* why) {
    skip(fmt::format("stages, skips, transfers, schedule, timing and memory: {}", why));
  };
  if (device_type_ < 0) {
    skip_model_checks("no times for the cluster's device type");
  } else if (plan_.parallelism.device_type &&
             !cluster_.names_device(*plan_.parallelism.device_type)) {
    skip_model_checks("the plan is for another device type");
  } else if (!layers) {
    skip_model_checks("the stages do not cover the model");
  } else if (!placement) {
    skip_model_checks("a pipeline device runs no stage");
  } else {
    build_model();
    check_stage_figures();
    check_skips();
    check_cached_skips();
    check_transfers();
    check_schedule_order();
    check_schedule_and_memory();
    check_inflight_limits();
  }
  check_predicted_memory();
  check_rank_map();
  // Last: only a plan that passed every other check is replayed.
  if (pm_.layout.num_stages() > 0) check_predicted_figures();
  check_summary();
  check_stages_digest();
  finish();
  return std::move(out_);
}

void Validator::finish() {
  for (const auto& [check, at] : overflow_) {
    out_.violations[at].message =
        fmt::format("... and {} more", count_[check] - request_.max_per_check);
  }
  for (const auto& [check, n] : count_) out_.total += n;
}

void Validator::check_inputs() {
  const struct {
    const char* kind;
    const SourceFile& file;
    const PlanInput& claimed;
  } inputs[] = {{"model", model_.file, plan_.inputs.model},
                {"cluster", cluster_.file, plan_.inputs.cluster}};
  for (const auto& in : inputs) {
    if (in.file.sha256 != in.claimed.sha256) {
      fail("inputs", fmt::format("{} profile {} has sha256 {}..., the plan was made from {} with "
                                 "sha256 {}...",
                                 in.kind, in.file.name, short_hash(in.file.sha256), in.claimed.file,
                                 short_hash(in.claimed.sha256)));
    }
  }
  if (plan_.parallelism.device_type && !cluster_.names_device(*plan_.parallelism.device_type)) {
    fail("inputs",
         fmt::format("the plan is for device type \"{}\", cluster {} has \"{}\"",
                     *plan_.parallelism.device_type, cluster_.name, cluster_.device_type));
  }
  device_type_ = model_.device_type_index(cluster_.device_type);
  if (device_type_ < 0) {
    fail("inputs", fmt::format("model {} has no times for device type \"{}\" of cluster {}",
                               model_.name, cluster_.device_type, cluster_.name));
  }
}

void Validator::check_degrees() {
  const PlanParallelism& x = plan_.parallelism;
  const long needed = static_cast<long>(x.pp) * x.dp;
  if (needed > cluster_.num_devices()) {
    fail("degrees", fmt::format("pp {} x dp {} needs {} devices, cluster {} has {}", x.pp, x.dp,
                                needed, cluster_.name, cluster_.num_devices()));
  }
  if (auto wrong = global_batch_contradiction(x)) fail("degrees", std::move(*wrong));
  if (x.devices_used.value_or(0) > 0 && *x.devices_used != needed) {
    fail("degrees", fmt::format("devices_used {} is not pp {} x dp {} = {}", *x.devices_used, x.pp,
                                x.dp, needed));
  }
  if (x.devices_total.value_or(0) > 0 && *x.devices_total != cluster_.num_devices()) {
    fail("degrees", fmt::format("devices_total {} is not the {} devices of cluster {}",
                                *x.devices_total, cluster_.num_devices(), cluster_.name));
  }
}

// The precision a runtime trains in must be the bytes per parameter the memory figures were
// costed with.
void Validator::check_stated_keys() {
  if (std::string wrong = plan_.options.memory.model().precision_contradiction(); !wrong.empty()) {
    fail("options", "$.options.memory.precision: " + wrong);
  }
  if (!plan_.chosen) return;
  if (std::string wrong = plan_.chosen->memory.precision_contradiction(); !wrong.empty()) {
    fail("options", "$.chosen.memory.precision: " + wrong);
  }
}

// The digest simulate holds the stages to (replay.cpp refuses a plan whose stages no longer
// match it). An edit the stage checks found already explains a mismatch; only one they
// could not see (the digest itself, or a change that agrees with the profiles) is listed.
void Validator::check_stages_digest() {
  const std::optional<std::string>& planned = plan_.partition.stages_sha256;
  if (!planned || count_["stages"] + count_["layers"] + count_["placement"] > 0) return;
  const std::string stated = stages_digest(plan_.stages);
  if (*planned == stated) return;
  fail("stages", fmt::format("$.partition.stages_sha256 is {}..., the stages as stated hash to "
                             "{}...: the stages or the digest were edited after planning, and "
                             "simulate will not replay them",
                             short_hash(*planned), short_hash(stated)));
}

bool Validator::check_layers() {
  std::map<std::string, LayerId> index;
  for (LayerId l = 0; l < static_cast<LayerId>(model_.layers.size()); ++l) {
    index[model_.layers[l].name] = l;
  }
  std::map<std::string, StageId> seen;
  std::vector<LayerId> order;
  bool complete = true;
  for (const auto& [layer, stage] : plan_.layer_stages()) {
    const auto it = index.find(layer);
    if (it == index.end()) {
      fail("layers", fmt::format("stage {} lists layer \"{}\", which model {} does not have", stage,
                                 layer, model_.name));
      complete = false;
    } else if (const auto [at, fresh] = seen.emplace(layer, stage); !fresh) {
      fail("layers", fmt::format("layer \"{}\" is in stage {} and again in stage {}", layer,
                                 at->second, stage));
      complete = false;
    } else {
      order.push_back(it->second);
    }
  }
  for (const Layer& l : model_.layers) {
    if (seen.count(l.name)) continue;
    fail("layers", fmt::format("layer \"{}\" (layer {} of model {}) is in no stage", l.name,
                               index[l.name], model_.name));
    complete = false;
  }
  if (!complete) return false;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i] == static_cast<LayerId>(i)) continue;
    fail("layers", fmt::format("stage {} lists \"{}\" where the model's execution order has "
                               "\"{}\" (layer {})",
                               seen[model_.layers[order[i]].name], model_.layers[order[i]].name,
                               model_.layers[i].name, i));
    return false;
  }
  first_layer_.push_back(0);
  for (const PlanStage& s : plan_.stages) {
    first_layer_.push_back(first_layer_.back() + static_cast<LayerId>(s.layers.size()));
  }
  return true;
}

bool Validator::check_placement() {
  const int P = plan_.pp(), S = plan_.num_stages();
  // A known family fixes the shape: a chain, the V or waves (wave_layout); without one the
  // stage count decides (P stages: a chain, 2kP: k waves).
  const Family* known = known_family(plan_);
  const int waves = known ? known->waves : S == P ? 0 : S % (2 * P) == 0 ? S / (2 * P) : 1;
  const int want_stages = waves == 0 ? P : 2 * waves * P;
  const std::string shape = waves == 0 ? "chain" : waves == 1 ? "V" : fmt::format("W{}", waves);
  if (S != want_stages) {
    fail("placement", fmt::format("a {} on pp {} devices has {} stages, the plan has {}", shape, P,
                                  want_stages, S));
  }
  const std::vector<LayerId> cuts(want_stages + 1, 0);
  const StageLayout expected =
      waves == 0 ? sequential_layout(cuts, P) : wave_layout(cuts, P, waves);
  for (const PlanStage& s : plan_.stages) {
    if (S == want_stages && s.device != expected.device[s.id]) {
      fail("placement", fmt::format("stage {} is on device {}; the {} puts it on device {}", s.id,
                                    s.device, shape, expected.device[s.id]));
    }
    const std::string side = waves == 0 ? "chain" : (s.id < S / 2 ? "encoder" : "decoder");
    if (s.side && *s.side != side) {
      fail("placement", fmt::format("stage {} is marked \"{}\"; in the {} it is \"{}\"", s.id,
                                    *s.side, shape, side));
    }
  }
  bool every_device_busy = true;
  std::vector<std::vector<StageId>> on(P);
  for (const PlanStage& s : plan_.stages) on[s.device].push_back(s.id);
  for (DeviceId d = 0; d < P; ++d) {
    if (on[d].empty()) {
      fail("placement", fmt::format("pipeline device {} runs no stage", d));
      every_device_busy = false;
    }
  }
  std::set<DeviceId> listed;
  for (const PlanDevice& d : plan_.devices) {
    if (!listed.insert(d.device).second) {
      fail("placement", fmt::format("devices[] lists device {} twice", d.device));
    } else if (d.stages != on[d.device]) {
      fail("placement",
           fmt::format("devices[] says device {} runs stages [{}]; the stages on it "
                       "are [{}]",
                       d.device, fmt::join(d.stages, ", "), fmt::join(on[d.device], ", ")));
    }
  }
  if (static_cast<int>(listed.size()) != P) {
    fail("placement", fmt::format("devices[] describes {} devices, pp is {}", listed.size(), P));
  }
  return every_device_busy;
}

// The rank map's own consistency (every rank once, the groups) is structural
// (plan_check.hpp); what is left is whether the cluster has the ranks where the plan says.
void Validator::check_rank_map() {
  const int N = cluster_.num_devices();
  for (const PlanRank& r : plan_.rank_map.ranks) {
    if (r.rank >= N) {
      fail("rank_map",
           fmt::format("rank {} is not in cluster {} ({} devices)", r.rank, cluster_.name, N));
      continue;
    }
    if (r.node != cluster_.node_of(r.rank) || r.local_device != cluster_.local_of(r.rank)) {
      fail("rank_map", fmt::format("rank {} is said to be node {} local device {}; in cluster {} "
                                   "it is node {} local device {}",
                                   r.rank, r.node, r.local_device, cluster_.name,
                                   cluster_.node_of(r.rank), cluster_.local_of(r.rank)));
    }
  }
}

}  // namespace detail

ValidateResult validate_plan(const ValidateRequest& request) {
  const std::optional<PlanCostModel>& cost = request.plan->cost_model;
  const std::string recompute = request.plan->recompute();
  const bool derived = cost && cost->derived_times;
  const bool scaled_costs = cost && (cost->compute_factor() != 1 || cost->link_factor() != 1);
  const double headroom = request.plan->headroom();
  const std::optional<PlanBuckets>& buckets = request.plan->buckets;
  const bool bucketed = buckets && buckets->body < static_cast<int>(buckets->rows.size());
  if (!derived && !scaled_costs && recompute == "none" && headroom == 1 && !bucketed) {
    return detail::Validator(request, *request.cluster, *request.model).run();
  }
  // A plan made with --compute-scale / --link-scale / --recompute, or with times derived for
  // the cluster's device type, is checked against the profiles as it was made from them:
  // derived, scaled and recomputing the same way (their files, and so their hashes,
  // unchanged). A model from which nothing can be derived is left as it is: the inputs
  // check says so.
  ModelProfile model = *request.model;
  ClusterProfile cluster = *request.cluster;
  // --buckets: the plan's body is the model at its body row's shape (profile/buckets.hpp).
  if (bucketed) {
    scale_to_tokens(model, static_cast<double>(buckets->rows[buckets->body].tokens) /
                               static_cast<double>(buckets->profile_tokens));
  }
  if (derived) (void)derive_device_times(model, cluster);
  if (scaled_costs) apply_scales({cost->compute_factor(), cost->link_factor(), ""}, model, cluster);
  apply_recompute(recompute, model);
  apply_headroom(headroom, cluster);  // the memory the plan was made to fit in
  ValidateRequest scaled = request;
  scaled.model = &model;
  scaled.cluster = &cluster;
  return detail::Validator(scaled, *request.cluster, *request.model).run();
}

}  // namespace pulse
