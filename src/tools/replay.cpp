#include "pulse/tools/replay.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "pulse/base/json_check.hpp"
#include "pulse/cost/cost_model.hpp"
#include "pulse/cost/memory.hpp"
#include "pulse/plan/figures.hpp"
#include "pulse/profile/scaling.hpp"

namespace pulse {

namespace {

// Link class names of the plan, for the traffic-by-link-class figures when no cluster is
// given; the times themselves are the transfers' own.
constexpr const char* kUnnamedLink = "unnamed";

// A time the plan states, times a what-if factor, on the time quantum as the planner's are.
double scaled(double seconds, double factor) {
  return factor == 1 ? seconds : quantize_time(seconds * factor);
}

class Rebuild {
 public:
  explicit Rebuild(const ReplayRequest& r)
      : plan_(*r.plan),
        cluster_(r.cluster),
        compute_scale_(r.compute_scale),
        link_scale_(r.link_scale),
        trust_edited_stages_(r.trust_edited_stages),
        check_(plan_.file) {
    // A cluster's links as the plan's figures assume them, then the request's what-if.
    if (cluster_ && link_factor() != 1) {
      scaled_cluster_ = *cluster_;
      scale_links(*scaled_cluster_, link_factor());
      cluster_ = &*scaled_cluster_;
    }
  }

  Result<Replay> run();

 private:
  void degrees();
  void layout();
  void stages();
  void skips();
  void transfers();
  void links();
  void schedule();
  std::vector<double> allreduce();
  /// How much faster than the cluster profile's the links are: the plan's scale x the request's.
  double link_factor() const {
    return (plan_.cost_model ? plan_.cost_model->link_factor() : 1.0) * link_scale_;
  }

  const Plan& plan_;
  const ClusterProfile* cluster_;
  std::optional<ClusterProfile> scaled_cluster_;
  double compute_scale_;
  double link_scale_;
  bool trust_edited_stages_;
  JsonChecker check_;
  Replay out_;
  PipelineModel& model_ = out_.model;
  std::vector<std::vector<RankId>> ranks_;
  std::map<std::string, int> skip_index_;
};

void Rebuild::degrees() {
  const PlanParallelism& par = plan_.parallelism;
  ranks_ = plan_.rank_map.pipeline_groups;
  if (!cluster_) {
    if (!plan_.cost_model) {
      check_.fail(JsonPath{}.key("cost_model"),
                  "missing: the plan does not say which cluster settings its figures assume "
                  "(overlap_comm, allreduce); give --cluster FILE");
    }
    return;
  }
  const ClusterProfile& c = *cluster_;
  if (par.device_type && !c.names_device(*par.device_type)) {
    check_.fail(JsonPath{}.key("parallelism").key("device_type"),
                fmt::format("the plan's stage times are for {}, cluster {} ({}) has {}; plan "
                            "again for that cluster",
                            *par.device_type, c.name, c.file.name, c.device_type));
  }
  const long needed = static_cast<long>(par.pp) * par.dp;
  if (needed > c.num_devices()) {
    check_.fail(JsonPath{}.key("parallelism"),
                fmt::format("pp {} x dp {} needs {} devices; cluster {} has {}", par.pp, par.dp,
                            needed, c.name, c.num_devices()));
    return;  // every rank check would fail too
  }
  const JsonPath groups = JsonPath{}.key("rank_map").key("pipeline_groups");
  if (static_cast<int>(ranks_.size()) != par.dp) {
    check_.fail(groups, fmt::format("expected {} pipeline groups (dp), got {}; the cluster's "
                                    "links and all-reduce need the plan's ranks",
                                    par.dp, ranks_.size()));
    return;
  }
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (static_cast<int>(ranks_[r].size()) != par.pp) {
      check_.fail(groups.at(r),
                  fmt::format("expected {} ranks (pp), got {}", par.pp, ranks_[r].size()));
    }
    for (std::size_t d = 0; d < ranks_[r].size(); ++d) {
      if (ranks_[r][d] < 0 || ranks_[r][d] >= c.num_devices()) {
        check_.fail(groups.at(r).at(d), fmt::format("rank {} is outside cluster {} (ranks 0 to {})",
                                                    ranks_[r][d], c.name, c.num_devices() - 1));
      }
    }
  }
}

void Rebuild::layout() {
  StageLayout& l = model_.layout;
  l.num_devices = plan_.pp();
  l.first_layer.push_back(0);
  for (const PlanStage& s : plan_.stages) {
    l.first_layer.push_back(l.first_layer.back() + static_cast<LayerId>(s.layers.size()));
    l.device.push_back(s.device);
  }
  model_.overlap_comm =
      cluster_ ? cluster_->overlap_comm : plan_.cost_model && plan_.cost_model->overlap_comm;
}

void Rebuild::stages() {
  const bool split = plan_.split_backward();
  for (const PlanStage& s : plan_.stages) {
    const JsonPath path = JsonPath{}.key("stages").at(s.id);
    if (!s.has_times()) {
      check_.fail(path, "expected forward_s and backward_s: the replay needs every stage's times");
    }
    const double backward = s.backward_s.value_or(0);
    if (split && !s.backward_weight_s) {
      check_.fail(path.key("backward_weight_s"),
                  "missing: the schedule splits backward into I and W ops, whose times need "
                  "the weight-gradient share");
    } else if (s.backward_weight_s && *s.backward_weight_s > backward) {
      check_.fail(
          path.key("backward_weight_s"),
          fmt::format("expected at most backward_s ({}), got {}", backward, *s.backward_weight_s));
    }
    model_.stages.push_back(
        StageCost{scaled(s.forward_s.value_or(0), compute_scale_), scaled(backward, compute_scale_),
                  scaled(s.backward_weight_s.value_or(0), compute_scale_), s.params.value_or(0),
                  s.activation_bytes_per_microbatch.value_or(0),
                  s.recompute_workspace_bytes_per_microbatch.value_or(0),
                  s.largest_layer_params.value_or(0)});
  }
}

void Rebuild::skips() {
  for (std::size_t k = 0; k < plan_.skips.size(); ++k) {
    const PlanSkip& s = plan_.skips[k];
    skip_index_.emplace(s.label(), static_cast<int>(k));
    SkipPlacement placement;
    placement.skip = static_cast<int>(k);
    placement.producer_stage = s.producer_stage;
    placement.consumer_stage = s.consumer_stage;
    placement.local = s.local;
    placement.bytes = s.bytes_per_sample * plan_.parallelism.microbatch_size;
    model_.skips.push_back(placement);
    if (s.route == "forwarded") model_.routing = SkipRouting::forwarded;
  }
}

void Rebuild::transfers() {
  for (std::size_t i = 0; i < plan_.transfers.size(); ++i) {
    const PlanTransfer& pt = plan_.transfers[i];
    const JsonPath path = JsonPath{}.key("transfers").at(i);
    Transfer t;
    t.from = pt.from_stage;
    t.to = pt.to_stage;
    t.main_path = pt.kind == "main";
    t.forward = pt.forward;
    t.backward = pt.backward;
    t.forward_messages = pt.forward_messages.value_or(0);
    t.backward_messages = pt.backward_messages.value_or(0);
    t.forward_s = scaled(pt.forward_s.value_or(0), 1 / link_scale_);
    t.backward_s = scaled(pt.backward_s.value_or(0), 1 / link_scale_);
    if (!cluster_ && !pt.has_times()) {
      check_.fail(path,
                  "expected forward_s and backward_s (or give --cluster FILE to time the "
                  "transfer on its links)");
    }
    if (cluster_ && (!pt.forward_messages || !pt.backward_messages)) {
      check_.fail(path,
                  "expected forward_messages and backward_messages: timing a transfer on "
                  "the cluster's links costs one latency per message");
    }
    if (model_.layout.device[t.from] == model_.layout.device[t.to]) {
      check_.fail(path, fmt::format("stages {} and {} are both on device {}: nothing to transfer",
                                    t.from, t.to, model_.layout.device[t.from]));
    }
    for (std::size_t j = 0; j < pt.skips.size(); ++j) {
      auto it = skip_index_.find(pt.skips[j]);
      if (it == skip_index_.end()) {
        check_.fail(path.key("skips").at(j),
                    fmt::format("\"{}\" is not a skip of this plan ($.skips[].name)", pt.skips[j]));
        continue;
      }
      t.skips.push_back(it->second);
    }
    model_.transfers.push_back(std::move(t));
  }
}

void Rebuild::links() {
  const int P = plan_.pp();
  if (cluster_) {
    model_.links = pipeline_links(*cluster_, ranks_[0]);
    time_transfers(model_);
    round_to_quantum(model_);
    return;
  }
  // Only the names matter here (traffic by link class); the plan states the times.
  model_.links = PipelineLinks(P, LinkClass{"self", 0, 0});
  for (const PlanTransfer& pt : plan_.transfers) {
    const DeviceId a = model_.layout.device[pt.from_stage], b = model_.layout.device[pt.to_stage];
    model_.links.set(a, b, LinkClass{pt.forward_link.value_or(kUnnamedLink), 0, 0});
    model_.links.set(b, a, LinkClass{pt.backward_link.value_or(kUnnamedLink), 0, 0});
  }
}

void Rebuild::schedule() {
  Schedule& s = out_.schedule;
  s.policy = plan_.schedule_info.policy.value_or("");
  s.split_backward = plan_.split_backward();
  for (const auto& ops : plan_.schedule) {
    std::vector<Op>& out = s.device_ops.emplace_back();
    for (const PlanOp& op : ops) out.push_back(op.op);
  }
}

std::vector<double> Rebuild::allreduce() {
  const int P = plan_.pp();
  if (cluster_) {
    return allreduce_times(model_, ranks_, plan_.memory(), *cluster_,
                           plan_.parallelism.num_microbatches);
  }
  std::vector<double> seconds(P, 0.0);
  if (plan_.parallelism.dp == 1) return seconds;  // nothing to reduce
  const auto& devices = plan_.predicted.devices;
  if (!devices || static_cast<int>(devices->size()) != P) {
    check_.fail(JsonPath{}.key("predicted").key("devices"),
                fmt::format("expected {} entries with allreduce_s (dp is {}), got {}; or give "
                            "--cluster FILE to time the all-reduce",
                            P, plan_.parallelism.dp, devices ? devices->size() : 0));
    return seconds;
  }
  for (const PlanDevicePrediction& d : *devices) {
    seconds[d.device] = scaled(d.allreduce_s.value_or(0), 1 / link_scale_);
  }
  return seconds;
}

Result<Replay> Rebuild::run() {
  const std::optional<std::string>& planned = plan_.partition.stages_sha256;
  if (!trust_edited_stages_ && planned && *planned != stages_digest(plan_.stages)) {
    return input_error(fmt::format(
        "{}: $.partition.stages_sha256: the stages are not the ones planned (a layer moved to "
        "another stage, or a stage's device or time changed), so the times the plan states are "
        "not its stages' and a replay of them would not say what the edit does; re-cost the "
        "edited cut with pulse-plan plan --partition-from {} (with the plan's --model and "
        "--cluster), or list what differs with pulse-plan validate",
        plan_.file, plan_.file));
  }
  degrees();
  if (!check_.ok()) return check_.error();
  layout();
  stages();
  skips();
  transfers();
  if (!check_.ok()) return check_.error();
  links();
  schedule();
  const std::vector<double> allreduce_s = allreduce();
  if (!check_.ok()) return check_.error();

  const PlanParallelism& par = plan_.parallelism;
  const std::vector<MemoryBreakdown> static_bytes = static_memory(model_, plan_.memory(), par.dp);
  // With its sends: `simulate --trace` draws them.
  auto timeline = simulate(model_, out_.schedule, par.num_microbatches, static_bytes, Peaks::held,
                           Sends::recorded);
  if (!timeline) {
    // The plan is the input here: a schedule that misses ops or deadlocks is its fault.
    return input_error(
        fmt::format("{}: $.schedule: cannot replay: {}", plan_.file, timeline.error().message));
  }
  out_.timeline = std::move(*timeline);
  out_.evaluation = evaluate(model_, out_.timeline, allreduce_s, par.global_batch, plan_.memory());
  if (!(out_.timeline.makespan_s > 0)) {
    return input_error(fmt::format(
        "{}: $.stages: every stage and transfer time{} is 0 s at the plans' 1 ns resolution: a "
        "pipeline of 0 s has no throughput or bubble (pulse-plan plans no such model)",
        plan_.file, compute_scale_ != 1 || link_scale_ != 1 ? " (as scaled)" : ""));
  }

  if (cluster_) {
    out_.capacity_bytes = cluster_->usable_memory();
    out_.cost_source = fmt::format("cluster {} ({})", cluster_->name, cluster_->file.name);
    if (scaled_cluster_) {
      out_.cost_source += fmt::format(" with links x{:g}", link_factor());
    }
  } else {
    const auto& devices = plan_.predicted.devices;
    out_.capacity_bytes =
        devices && !devices->empty() ? devices->front().capacity_bytes.value_or(0) : 0;
    out_.cost_source = "the plan's own cost model and link times";
    if (link_scale_ != 1) out_.cost_source += fmt::format(", link times / {:g}", link_scale_);
  }
  if (compute_scale_ != 1) out_.cost_source += fmt::format(", stage times x{:g}", compute_scale_);
  out_.own_costs = !cluster_ && link_scale_ == 1 && compute_scale_ == 1;
  out_.figures = plan_;
  out_.figures.schedule_info.makespan_s = out_.timeline.makespan_s;
  if (out_.figures.cost_model && (compute_scale_ != 1 || link_scale_ != 1)) {
    PlanCostModel& cost = *out_.figures.cost_model;
    const double compute = cost.compute_factor() * compute_scale_;
    const double links = cost.link_factor() * link_scale_;
    cost.compute_scale = compute == 1 ? std::nullopt : std::optional<double>(compute);
    cost.link_scale = links == 1 ? std::nullopt : std::optional<double>(links);
  }
  out_.figures.comm = comm_figures(model_, out_.evaluation.allreduce, par.num_microbatches, par.dp);
  out_.figures.predicted = predicted_figures(out_.timeline, out_.evaluation, out_.capacity_bytes);
  return std::move(out_);
}

}  // namespace

Result<Replay> replay_plan(const ReplayRequest& request) {
  for (const auto& [name, value] :
       {std::pair{"compute_scale", request.compute_scale}, {"link_scale", request.link_scale}}) {
    if (!std::isfinite(value) || !(value > 0)) {
      return usage_error(
          fmt::format("replay: {} must be positive and finite, got {}", name, value));
    }
  }
  return Rebuild(request).run();
}

}  // namespace pulse
