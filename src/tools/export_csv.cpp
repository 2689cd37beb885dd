// torch-csv: the plan's per-device op order as PyTorch's compute-only schedule CSV, and the
// side file a runtime needs besides it. PyTorch names a pipeline rank's actions
// `{stage}{F|B|I|W}{microbatch}` with global stage indices, which are the plan's stage ids;
// its pipeline rank r is the plan's pipeline device r (in a V, rank r holds stages r and
// 2P-1-r, as in PyTorch's ZBVZeroBubble).
#include <nlohmann/json.hpp>

#include "pulse/tools/export.hpp"

namespace pulse {

namespace {

using ojson = nlohmann::ordered_json;

std::string csv_rows(const Plan& p) {
  std::string out;
  for (const auto& ops : p.schedule) {
    std::string row;
    for (const PlanOp& o : ops) {
      if (!row.empty()) row += ',';
      row += std::to_string(o.op.stage) + op_letter(o.op.kind) + std::to_string(o.op.mb);
    }
    out += row + "\n";
  }
  return out;
}

ojson skip_entry(const Plan& p, const PlanSkip& s) {
  const std::int64_t per_mb = s.bytes_per_sample * p.parallelism.microbatch_size;
  return {{"name", s.label()},
          {"producer", s.producer},
          {"consumer", s.consumer},
          {"producer_stage", s.producer_stage},
          {"consumer_stage", s.consumer_stage},
          {"producer_rank", p.stages[s.producer_stage].device},
          {"consumer_rank", p.stages[s.consumer_stage].device},
          {"bytes_per_sample", s.bytes_per_sample},
          {"bytes_per_microbatch", per_mb}};
}

ojson ranks(const Plan& p) {
  ojson out = ojson::array();
  for (DeviceId d = 0; d < p.pp(); ++d) {
    ojson stages = ojson::array(), cached = ojson::array(), global = ojson::array();
    for (const PlanStage& s : p.stages) {
      if (s.device == d) stages.push_back(s.id);
    }
    // A skip is cached where it is produced and consumed: both stages on this rank.
    for (const PlanSkip& s : p.skips) {
      if (p.stages[s.producer_stage].device == d && p.stages[s.consumer_stage].device == d) {
        cached.push_back(skip_entry(p, s));
      }
    }
    for (const auto& group : p.rank_map.pipeline_groups) {
      if (d < static_cast<int>(group.size())) global.push_back(group[d]);
    }
    out.push_back(
        {{"rank", d}, {"stages", stages}, {"global_ranks", global}, {"cached_skips", cached}});
  }
  return out;
}

std::string stages_json(const Plan& p) {
  ojson stages = ojson::array(), remote = ojson::array();
  for (const PlanStage& s : p.stages) {
    stages.push_back({{"stage", s.id}, {"rank", s.device}, {"layers", s.layers}});
  }
  for (const PlanSkip& s : p.skips) {
    if (p.stages[s.producer_stage].device == p.stages[s.consumer_stage].device) continue;
    ojson e = skip_entry(p, s);
    e["route"] = s.route.value_or("direct");
    remote.push_back(e);
  }
  ojson doc = {{"schema", kTorchStagesSchema},
               {"plan",
                {{"model", p.inputs.model.name},
                 {"model_sha256", p.inputs.model.sha256},
                 {"cluster", p.inputs.cluster.name},
                 {"strategy", p.strategy()}}},
               {"csv_format", "compute_only"},
               {"pp", p.pp()},
               {"dp", p.parallelism.dp},
               {"num_stages", p.num_stages()},
               {"num_microbatches", p.parallelism.num_microbatches},
               {"microbatch_size", p.parallelism.microbatch_size},
               {"split_backward", p.split_backward()},
               {"stages", stages},
               {"ranks", ranks(p)},
               {"remote_skips", remote},
               {"pipeline_groups", p.rank_map.pipeline_groups}};
  return doc.dump(2) + "\n";
}

}  // namespace

TorchCsv export_torch_csv(const Plan& plan) {
  return {csv_rows(plan), stages_json(plan)};
}

}  // namespace pulse
