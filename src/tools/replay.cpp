#include "pulse/tools/replay.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "pulse/base/json_check.hpp"
#include "pulse/simulate/evaluate.hpp"
#include "pulse/compile/plan_json.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {

namespace {

using ojson = nlohmann::ordered_json;

// Link class names of the plan, for the traffic-by-link-class figures when no cluster is
// given; the times themselves are the transfers' own.
constexpr const char* kUnnamedLink = "unnamed";

class Rebuild {
 public:
  Rebuild(const Plan& plan, const ClusterProfile* cluster)
      : p_(plan), cluster_(cluster), check_(plan.file) {}

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

  const Plan& p_;
  const ClusterProfile* cluster_;
  JsonChecker check_;
  Replay out_;
  PipelineModel& m_ = out_.figures.model;
  std::map<std::string, int> skip_index_;
};

void Rebuild::degrees() {
  CompiledPlan& f = out_.figures;
  const PlanParallelism& par = p_.parallelism;
  f.pp = par.pp;
  f.dp = par.dp;
  f.microbatch_size = par.microbatch_size;
  f.num_microbatches = par.num_microbatches;
  f.global_batch = par.global_batch;
  f.options.memory = p_.memory;
  if (auto s = parse_strategy(p_.strategy)) f.strategy = *s;
  f.ranks = p_.rank_map.pipeline_groups;
  if (!cluster_) {
    if (!p_.cost_model.present) {
      check_.fail(JsonPath{}.key("cost_model"),
                  "missing: the plan does not say which cluster settings its figures assume "
                  "(overlap_comm, allreduce); give --cluster FILE");
    }
    return;
  }
  const ClusterProfile& c = *cluster_;
  if (!par.device_type.empty() && par.device_type != c.device_type) {
    check_.fail(JsonPath{}.key("parallelism").key("device_type"),
                fmt::format("the plan's stage times are for {}, cluster {} ({}) has {}; plan "
                            "again for that cluster",
                            par.device_type, c.name, c.file.name, c.device_type));
  }
  const long needed = static_cast<long>(par.pp) * par.dp;
  if (needed > c.num_devices()) {
    check_.fail(JsonPath{}.key("parallelism"),
                fmt::format("pp {} x dp {} needs {} devices; cluster {} has {}", par.pp, par.dp,
                            needed, c.name, c.num_devices()));
    return;  // every rank check would fail too
  }
  const JsonPath groups = JsonPath{}.key("rank_map").key("pipeline_groups");
  if (static_cast<int>(f.ranks.size()) != par.dp) {
    check_.fail(groups, fmt::format("expected {} pipeline groups (dp), got {}; the cluster's "
                                    "links and all-reduce need the plan's ranks",
                                    par.dp, f.ranks.size()));
    return;
  }
  for (std::size_t r = 0; r < f.ranks.size(); ++r) {
    if (static_cast<int>(f.ranks[r].size()) != par.pp) {
      check_.fail(groups.at(r),
                  fmt::format("expected {} ranks (pp), got {}", par.pp, f.ranks[r].size()));
    }
    for (std::size_t d = 0; d < f.ranks[r].size(); ++d) {
      if (f.ranks[r][d] < 0 || f.ranks[r][d] >= c.num_devices()) {
        check_.fail(groups.at(r).at(d), fmt::format("rank {} is outside cluster {} (ranks 0 to {})",
                                                    f.ranks[r][d], c.name, c.num_devices() - 1));
      }
    }
  }
}

void Rebuild::layout() {
  StageLayout& l = m_.layout;
  l.num_devices = p_.pp();
  l.first_layer.push_back(0);
  for (const PlanStage& s : p_.stages) {
    l.first_layer.push_back(l.first_layer.back() + static_cast<LayerId>(s.layers.size()));
    l.device.push_back(s.device);
  }
  m_.overlap_comm = cluster_ ? cluster_->overlap_comm : p_.cost_model.overlap_comm;
}

void Rebuild::stages() {
  const bool split = p_.schedule_info.split_backward;
  for (const PlanStage& s : p_.stages) {
    const JsonPath path = JsonPath{}.key("stages").at(s.id);
    if (!s.has_times) {
      check_.fail(path, "expected forward_s and backward_s: the replay needs every stage's times");
    }
    if (split && s.backward_weight_s < 0) {
      check_.fail(path.key("backward_weight_s"),
                  "missing: the schedule splits backward into I and W ops, whose times need "
                  "the weight-gradient share");
    } else if (s.backward_weight_s > s.backward_s) {
      check_.fail(path.key("backward_weight_s"),
                  fmt::format("expected at most backward_s ({}), got {}", s.backward_s,
                              s.backward_weight_s));
    }
    m_.stages.push_back(StageCost{s.forward_s, s.backward_s, std::max(0.0, s.backward_weight_s),
                                  s.params, s.activation_bytes_per_microbatch});
  }
}

void Rebuild::skips() {
  for (std::size_t k = 0; k < p_.skips.size(); ++k) {
    const PlanSkip& s = p_.skips[k];
    skip_index_.emplace(s.name, static_cast<int>(k));
    SkipPlacement placement;
    placement.skip = static_cast<int>(k);
    placement.producer_stage = s.producer_stage;
    placement.consumer_stage = s.consumer_stage;
    placement.local = s.local;
    placement.bytes = s.bytes_per_sample * p_.parallelism.microbatch_size;
    m_.skips.push_back(placement);
    if (s.route == "forwarded") m_.routing = SkipRouting::forwarded;
  }
}

void Rebuild::transfers() {
  for (std::size_t i = 0; i < p_.transfers.size(); ++i) {
    const PlanTransfer& pt = p_.transfers[i];
    const JsonPath path = JsonPath{}.key("transfers").at(i);
    Transfer t;
    t.from = pt.from_stage;
    t.to = pt.to_stage;
    t.main_path = pt.kind == "main";
    t.forward = pt.forward;
    t.backward = pt.backward;
    t.forward_messages = std::max(0, pt.forward_messages);
    t.backward_messages = std::max(0, pt.backward_messages);
    t.forward_s = pt.forward_s;
    t.backward_s = pt.backward_s;
    if (!cluster_ && !pt.has_times) {
      check_.fail(path,
                  "expected forward_s and backward_s (or give --cluster FILE to time the "
                  "transfer on its links)");
    }
    if (cluster_ && (pt.forward_messages < 0 || pt.backward_messages < 0)) {
      check_.fail(path,
                  "expected forward_messages and backward_messages: timing a transfer on "
                  "the cluster's links costs one latency per message");
    }
    if (m_.layout.device[t.from] == m_.layout.device[t.to]) {
      check_.fail(path, fmt::format("stages {} and {} are both on device {}: nothing to transfer",
                                    t.from, t.to, m_.layout.device[t.from]));
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
    m_.transfers.push_back(std::move(t));
  }
}

void Rebuild::links() {
  const int P = p_.pp();
  if (cluster_) {
    m_.links = pipeline_links(*cluster_, out_.figures.ranks[0]);
    time_transfers(m_);
    round_to_nanoseconds(m_);
    return;
  }
  // Only the names matter here (traffic by link class); the plan states the times.
  m_.links.assign(P, std::vector<LinkClass>(P, LinkClass{"self", 0, 0}));
  for (std::size_t i = 0; i < p_.transfers.size(); ++i) {
    const PlanTransfer& pt = p_.transfers[i];
    const DeviceId a = m_.layout.device[pt.from_stage], b = m_.layout.device[pt.to_stage];
    auto name = [](const std::string& n) { return n.empty() ? std::string(kUnnamedLink) : n; };
    m_.links[a][b].name = name(pt.forward_link);
    m_.links[b][a].name = name(pt.backward_link);
  }
}

void Rebuild::schedule() {
  Schedule& s = out_.figures.schedule;
  s.policy = p_.schedule_info.policy;
  s.split_backward = p_.schedule_info.split_backward;
  for (const auto& ops : p_.schedule) {
    std::vector<Op>& out = s.device_ops.emplace_back();
    for (const PlanOp& op : ops) out.push_back(op.op);
  }
}

std::vector<double> Rebuild::allreduce() {
  const int P = p_.pp();
  if (cluster_) {
    return allreduce_times(m_, out_.figures.ranks, p_.memory, *cluster_);
  }
  std::vector<double> seconds(P, 0.0);
  if (p_.parallelism.dp == 1) return seconds;  // nothing to reduce
  if (static_cast<int>(p_.predicted.devices.size()) != P) {
    check_.fail(JsonPath{}.key("predicted").key("devices"),
                fmt::format("expected {} entries with allreduce_s (dp is {}), got {}; or give "
                            "--cluster FILE to time the all-reduce",
                            P, p_.parallelism.dp, p_.predicted.devices.size()));
    return seconds;
  }
  for (const PlanDevicePrediction& d : p_.predicted.devices) seconds[d.device] = d.allreduce_s;
  return seconds;
}

Result<Replay> Rebuild::run() {
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

  CompiledPlan& f = out_.figures;
  f.static_bytes = static_memory(m_, p_.memory, f.dp);
  auto timeline = simulate(m_, f.schedule, f.num_microbatches, f.static_bytes);
  if (!timeline) {
    // The plan is the input here: a schedule that misses ops or deadlocks is its fault.
    return input_error(
        fmt::format("{}: $.schedule: cannot replay: {}", p_.file, timeline.error().message));
  }
  f.timeline = std::move(*timeline);
  const Evaluation e = evaluate(m_, f.timeline, allreduce_s, f.global_batch, p_.memory);
  f.allreduce = e.allreduce;
  f.iteration_s = e.iteration_s;
  f.samples_per_s = e.samples_per_s;
  f.bubble_ratio = e.bubble_ratio;

  if (cluster_) {
    out_.capacity_bytes = cluster_->usable_memory();
    out_.cost_source = fmt::format("cluster {} ({})", cluster_->name, cluster_->file.name);
  } else {
    out_.capacity_bytes =
        p_.predicted.devices.empty() ? 0 : p_.predicted.devices.front().capacity_bytes;
    out_.cost_source = "the plan's own cost model and link times";
  }
  return std::move(out_);
}

// Numbers agree when within a nanosecond or a part in 10^9 (plans state times to the
// nanosecond; a hand-written plan may carry more digits).
bool same_number(double a, double b) {
  return std::abs(a - b) <= 1e-9 + 1e-9 * std::max(std::abs(a), std::abs(b));
}

void compare(const ojson& plan, const ojson& replay, const std::string& path,
             std::vector<FigureDifference>& out) {
  if (plan.is_object() && replay.is_object()) {
    for (const auto& [key, value] : replay.items()) {
      const std::string at = path + "." + key;
      if (!plan.contains(key)) {
        out.push_back({at, "(absent)", value.dump()});
        continue;
      }
      compare(plan[key], value, at, out);
    }
    for (const auto& [key, value] : plan.items()) {
      if (!replay.contains(key)) out.push_back({path + "." + key, value.dump(), "(absent)"});
    }
    return;
  }
  if (plan.is_array() && replay.is_array() && plan.size() == replay.size()) {
    for (std::size_t i = 0; i < plan.size(); ++i) {
      compare(plan[i], replay[i], fmt::format("{}[{}]", path, i), out);
    }
    return;
  }
  if (plan.is_number() && replay.is_number()) {
    if (!same_number(plan.get<double>(), replay.get<double>())) {
      out.push_back({path, plan.dump(), replay.dump()});
    }
    return;
  }
  if (plan != replay) out.push_back({path, plan.dump(), replay.dump()});
}

}  // namespace

Result<Replay> replay_plan(const ReplayRequest& request) {
  return Rebuild(*request.plan, request.cluster).run();
}

std::vector<FigureDifference> compare_figures(const Replay& replay, std::string_view plan_text) {
  // Ordered, so the differences come in the plan's key order.
  const ojson figures = ojson::parse(figures_json(replay.figures, replay.capacity_bytes));
  const ojson plan = ojson::parse(plan_text, nullptr, false);
  std::vector<FigureDifference> out;
  for (const char* block : {"comm", "predicted"}) {
    const std::string path = std::string("$.") + block;
    if (!plan.is_object() || !plan.contains(block)) {
      out.push_back({path, "(absent)", "(replayed)"});
      continue;
    }
    compare(plan[block], figures[block], path, out);
  }
  return out;
}

}  // namespace pulse
