// torch-csv: the plan's per-device op order as PyTorch's compute-only schedule CSV, in the
// form both of its executors run correctly (docs/plans.md, "torch-csv"; the same format in
// Python is tests/torch_export_ref.py), and the side file pulse.torch-stages/v2.
//
// PyTorch names an action `{stage}{F|B|I|W}{microbatch}` with global stage indices, which are
// the plan's stage ids. Nothing here assumes a shape of the stage map: a device may hold any
// number of stages (a chain one, the V two, waves 2k), and the rows, steps and side file are
// computed from the stage -> device map and the ops as they are.
#include <algorithm>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pulse/tools/export.hpp"

namespace pulse {

namespace {

using ojson = nlohmann::ordered_json;

// The group rank of each pipeline device in one pipeline group: new_group sorts its ranks,
// so device d (global rank group[d]) gets its rank's place in the sorted list.
std::vector<DeviceId> devices_by_group_rank(const std::vector<RankId>& group) {
  std::vector<DeviceId> order(group.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](DeviceId a, DeviceId b) { return group[a] < group[b]; });
  return order;
}

std::string plan_name(const Plan& p) {
  return p.file.empty() ? "the plan" : p.file;
}

// Row g's pipeline device, the same for every replica, or why there is none.
Result<std::vector<DeviceId>> row_devices(const Plan& p) {
  const auto& groups = p.rank_map.pipeline_groups;
  if (groups.empty()) {
    return input_error(fmt::format(
        "{}: rank_map.pipeline_groups is empty; the CSV's rows are ordered by group rank, "
        "which needs the global ranks of each pipeline",
        plan_name(p)));
  }
  std::vector<DeviceId> first;
  for (std::size_t k = 0; k < groups.size(); ++k) {
    if (static_cast<int>(groups[k].size()) != p.pp()) {
      return input_error(fmt::format("{}: rank_map.pipeline_groups[{}] has {} ranks, pp is {}",
                                     plan_name(p), k, groups[k].size(), p.pp()));
    }
    const std::vector<DeviceId> order = devices_by_group_rank(groups[k]);
    if (k == 0) {
      first = order;
    } else if (order != first) {
      return input_error(fmt::format(
          "{}: pipeline groups 0 [{}] and {} [{}] put their devices in different group-rank "
          "orders (row g is device [{}] vs [{}]): new_group sorts each group's ranks, so one "
          "CSV cannot serve both",
          plan_name(p), fmt::join(groups[0], ", "), k, fmt::join(groups[k], ", "),
          fmt::join(first, ", "), fmt::join(order, ", ")));
    }
  }
  return first;
}

// Lock-step steps: steps[d][i] for op i of device d, each op at the earliest step after the
// previous op of its device and after the op whose output it consumes (the forward of the
// stage before; the I or B of the stage after). A fixed point, so the order in which the
// devices are visited does not matter.
Result<std::vector<std::vector<int>>> lock_step(const Plan& p) {
  const int stages = p.num_stages(), mbs = p.parallelism.num_microbatches;
  const int devices = static_cast<int>(p.schedule.size());
  // Step of F(s, m) and of the input gradient (I or B) of (s, m); -1 until it is placed.
  std::vector<int> forward_at(static_cast<std::size_t>(stages) * mbs, -1);
  std::vector<int> gradient_at(forward_at.size(), -1);
  auto at = [&](std::vector<int>& v, StageId s, int mb) -> int& {
    return v[static_cast<std::size_t>(s) * mbs + mb];
  };
  auto producer_step = [&](const Op& o) -> std::optional<int> {  // nullopt: not yet placed
    if (o.kind == OpKind::forward && o.stage > 0) {
      const int t = at(forward_at, o.stage - 1, o.mb);
      return t < 0 ? std::nullopt : std::optional<int>(t + 1);
    }
    if ((o.kind == OpKind::backward || o.kind == OpKind::backward_input) && o.stage < stages - 1) {
      const int t = at(gradient_at, o.stage + 1, o.mb);
      return t < 0 ? std::nullopt : std::optional<int>(t + 1);
    }
    return 0;
  };
  std::vector<std::vector<int>> steps(devices);
  std::vector<std::size_t> next(devices, 0);
  std::vector<int> row_step(devices, -1);
  for (bool progress = true; progress;) {
    progress = false;
    for (int d = 0; d < devices; ++d) {
      for (; next[d] < p.schedule[d].size(); ++next[d]) {
        const Op& o = p.schedule[d][next[d]].op;
        const std::optional<int> ready = producer_step(o);
        if (!ready) break;
        const int t = std::max(row_step[d] + 1, *ready);
        steps[d].push_back(row_step[d] = t);
        if (o.kind == OpKind::forward) at(forward_at, o.stage, o.mb) = t;
        if (o.kind == OpKind::backward || o.kind == OpKind::backward_input) {
          at(gradient_at, o.stage, o.mb) = t;
        }
        progress = true;
      }
    }
  }
  std::vector<std::string> stuck;
  for (int d = 0; d < devices; ++d) {
    if (next[d] == p.schedule[d].size()) continue;
    const Op& o = p.schedule[d][next[d]].op;
    const bool forward = o.kind == OpKind::forward;
    stuck.push_back(fmt::format("device {} at {}{}{} (op {}) waits for {} of stage {}", d, o.stage,
                                op_letter(o.kind), o.mb, next[d],
                                forward ? "the forward" : "the input gradient",
                                forward ? o.stage - 1 : o.stage + 1));
  }
  if (!stuck.empty()) {
    return input_error(
        fmt::format("{}: the schedule cannot run to its end, so it cannot be exported: {}",
                    plan_name(p), fmt::join(stuck, "; ")));
  }
  return steps;
}

std::string csv_rows(const Plan& p, const std::vector<DeviceId>& rows,
                     const std::vector<std::vector<int>>& steps) {
  std::string out;
  for (DeviceId d : rows) {
    const auto& ops = p.schedule[d];
    std::vector<std::string> cells(ops.empty() ? 0 : steps[d].back() + 1);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i].op;
      cells[steps[d][i]] = fmt::format("{}{}{}", o.stage, op_letter(o.kind), o.mb);
    }
    out += fmt::format("{}\n", fmt::join(cells, ","));
  }
  return out;
}

struct Rows {
  std::vector<DeviceId> device_of_row;
  std::vector<int> row_of_device;
};

ojson skip_entry(const Plan& p, const Rows& r, const PlanSkip& s) {
  const DeviceId from = p.stages[s.producer_stage].device, to = p.stages[s.consumer_stage].device;
  return {{"name", s.label()},
          {"producer", s.producer},
          {"consumer", s.consumer},
          {"producer_stage", s.producer_stage},
          {"consumer_stage", s.consumer_stage},
          {"producer_device", from},
          {"consumer_device", to},
          {"producer_group_rank", r.row_of_device[from]},
          {"consumer_group_rank", r.row_of_device[to]},
          {"bytes_per_sample", s.bytes_per_sample},
          {"bytes_per_microbatch", s.bytes_per_sample * p.parallelism.microbatch_size}};
}

bool skip_is_local(const Plan& p, const PlanSkip& s) {
  return p.stages[s.producer_stage].device == p.stages[s.consumer_stage].device;
}

std::string stages_json(const Plan& p, const Rows& r, int num_steps) {
  ojson stages = ojson::array(), ranks = ojson::array(), remote = ojson::array();
  for (const PlanStage& s : p.stages) {
    stages.push_back({{"stage", s.id},
                      {"group_rank", r.row_of_device[s.device]},
                      {"device", s.device},
                      {"layers", s.layers}});
  }
  for (std::size_t g = 0; g < r.device_of_row.size(); ++g) {
    const DeviceId d = r.device_of_row[g];
    ojson own = ojson::array(), global = ojson::array(), cached = ojson::array();
    for (const PlanStage& s : p.stages) {
      if (s.device == d) own.push_back(s.id);
    }
    for (const auto& group : p.rank_map.pipeline_groups) global.push_back(group[d]);
    // A skip is cached where it is produced and consumed: both stages on this rank.
    for (const PlanSkip& s : p.skips) {
      if (skip_is_local(p, s) && p.stages[s.producer_stage].device == d) {
        cached.push_back(skip_entry(p, r, s));
      }
    }
    ranks.push_back({{"group_rank", g},
                     {"device", d},
                     {"stages", own},
                     {"global_ranks", global},
                     {"cached_skips", cached}});
  }
  for (const PlanSkip& s : p.skips) {
    if (skip_is_local(p, s)) continue;
    ojson e = skip_entry(p, r, s);
    e["route"] = s.route.value_or("direct");
    remote.push_back(e);
  }
  const ojson doc = {{"schema", kTorchStagesSchema},
                     {"plan",
                      {{"model", p.inputs.model.name},
                       {"model_sha256", p.inputs.model.sha256},
                       {"cluster", p.inputs.cluster.name},
                       {"strategy", p.strategy()}}},
                     {"csv_format", "compute_only"},
                     {"csv_rows", "group_rank"},
                     {"csv_idle_cells", "lock_step"},
                     {"num_steps", num_steps},
                     {"pp", p.pp()},
                     {"dp", p.parallelism.dp},
                     {"num_stages", p.num_stages()},
                     {"num_microbatches", p.parallelism.num_microbatches},
                     {"microbatch_size", p.parallelism.microbatch_size},
                     {"split_backward", p.split_backward()},
                     {"pipeline_groups", p.rank_map.pipeline_groups},
                     {"row_devices", r.device_of_row},
                     {"stages", stages},
                     {"ranks", ranks},
                     {"remote_skips", remote}};
  return doc.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

}  // namespace

Result<TorchCsv> export_torch_csv(const Plan& plan) {
  if (static_cast<int>(plan.schedule.size()) != plan.pp()) {
    return input_error(fmt::format("{}: the schedule has {} devices, pp is {}", plan_name(plan),
                                   plan.schedule.size(), plan.pp()));
  }
  auto devices = row_devices(plan);
  if (!devices) return devices.error();
  auto steps = lock_step(plan);
  if (!steps) return steps.error();
  Rows rows{*devices, std::vector<int>(devices->size())};
  for (std::size_t g = 0; g < rows.device_of_row.size(); ++g) {
    rows.row_of_device[rows.device_of_row[g]] = static_cast<int>(g);
  }
  int num_steps = 0;
  for (const auto& s : *steps) {
    if (!s.empty()) num_steps = std::max(num_steps, s.back() + 1);
  }
  return TorchCsv{csv_rows(plan, *devices, *steps), stages_json(plan, rows, num_steps), *devices,
                  num_steps};
}

}  // namespace pulse
