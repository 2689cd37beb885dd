// The structural checks of a plan (plan_check.hpp). They run on what the reader produced,
// so every index is already in range and every count within its limit: the sets below are
// sized by the degrees, never by anything larger.
#include "pulse/plan/plan_check.hpp"

#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pulse/cost/cost_model.hpp"

namespace pulse {

namespace {

std::string op_text(const Op& op) {
  return fmt::format("{}(stage {}, mb {})", op_letter(op.kind), op.stage, op.mb);
}

class StructureCheck {
 public:
  explicit StructureCheck(const Plan& plan) : plan_(plan) {}

  std::vector<PlanProblem> run() {
    schedule();
    rank_map();
    predicted();
    const std::map<std::string, const char*> section = {
        {"schedule", "schedule"}, {"rank_map", "rank_map"}, {"memory", "predicted"}};
    for (const auto& [check, count] : count_) {
      if (count <= kMaxProblemsShown) continue;
      const std::size_t more = count - kMaxProblemsShown;
      out_.push_back(
          {check, JsonPath{}.key(section.at(check)), fmt::format("... and {} more", more), more});
    }
    return std::move(out_);
  }

 private:
  void fail(const char* check, const JsonPath& path, std::string message) {
    if (++count_[check] <= kMaxProblemsShown) out_.push_back({check, path, std::move(message)});
  }

  void schedule();
  void missing_ops(const std::vector<bool>& seen, int kinds);
  void rank_map();
  void rank_groups(const std::map<std::pair<int, int>, RankId>& at);
  void predicted();

  const Plan& plan_;
  std::vector<PlanProblem> out_;
  std::map<std::string, std::size_t> count_;
};

// Op kinds as slots: F 0, B or I 1, W 2.
int slot(OpKind kind) {
  return kind == OpKind::forward ? 0 : kind == OpKind::backward_weight ? 2 : 1;
}

void StructureCheck::schedule() {
  const bool split = plan_.split_backward();
  const int kinds = split ? 3 : 2;
  const int M = plan_.parallelism.num_microbatches;
  // The reader bounds stages x microbatches x kinds by kMaxOps.
  std::vector<bool> seen(static_cast<std::size_t>(plan_.num_stages()) * M * kinds, false);
  const JsonPath schedule = JsonPath{}.key("schedule");
  for (DeviceId d = 0; d < static_cast<int>(plan_.schedule.size()); ++d) {
    const std::vector<PlanOp>& ops = plan_.schedule[d];
    for (std::size_t k = 0; k < ops.size(); ++k) {
      const Op& op = ops[k].op;
      // Made where a problem is found: a path for each of millions of ops was most of the
      // check (0.71 s of it, 0.07 s without, at pp 1024 over 2048 layers).
      const auto at = [&] { return schedule.at(d).key("ops").at(k); };
      const bool split_op = op.kind == OpKind::backward_input || op.kind == OpKind::backward_weight;
      if (op.kind != OpKind::forward && split_op != split) {
        fail("schedule", at().key("op"),
             split ? fmt::format("expected F, I or W (the schedule splits backward), got {}",
                                 op_letter(op.kind))
                   : fmt::format("expected F or B (the schedule does not split backward), got {}",
                                 op_letter(op.kind)));
        continue;
      }
      const DeviceId home = plan_.stages[op.stage].device;
      if (home != d) {
        fail("schedule", at(),
             fmt::format("{} is listed on device {}, but stage {} runs on device {}", op_text(op),
                         d, op.stage, home));
      }
      if (ops[k].end_s < ops[k].start_s) {
        fail("schedule", at().key("end_s"),
             fmt::format("{} ends at {:.9f} s, before it starts at {:.9f} s", op_text(op),
                         ops[k].end_s, ops[k].start_s));
      }
      const std::size_t index =
          (static_cast<std::size_t>(op.stage) * M + op.mb) * kinds + slot(op.kind);
      if (seen[index]) {
        fail("schedule", at(), fmt::format("{} is listed twice", op_text(op)));
      }
      seen[index] = true;
    }
  }
  missing_ops(seen, kinds);
}

void StructureCheck::missing_ops(const std::vector<bool>& seen, int kinds) {
  const OpKind names[2][3] = {{OpKind::forward, OpKind::backward},
                              {OpKind::forward, OpKind::backward_input, OpKind::backward_weight}};
  const int M = plan_.parallelism.num_microbatches;
  for (std::size_t index = 0; index < seen.size(); ++index) {
    if (seen[index]) continue;
    const int kind = static_cast<int>(index % kinds);
    const int mb = static_cast<int>(index / kinds % M);
    const StageId stage = static_cast<StageId>(index / kinds / M);
    const Op op{names[kinds - 2][kind], stage, mb};
    const DeviceId d = plan_.stages[stage].device;
    fail("schedule", JsonPath{}.key("schedule").at(d).key("ops"),
         fmt::format("{} is missing (every stage runs {} for every microbatch)", op_text(op),
                     kinds == 3 ? "F, I and W" : "F and B"));
  }
}

void StructureCheck::rank_map() {
  const PlanRankMap& m = plan_.rank_map;
  const int P = plan_.pp(), D = plan_.parallelism.dp;
  const long world = static_cast<long>(P) * D;
  const JsonPath at = JsonPath{}.key("rank_map");
  if (m.world_size.value_or(0) > 0 && *m.world_size != world) {
    fail("rank_map", at.key("world_size"),
         fmt::format("world_size {} is not pp {} x dp {}", *m.world_size, P, D));
  }
  const int devices = plan_.parallelism.devices_total.value_or(0);
  std::map<std::pair<int, int>, RankId> place;  // (dp_index, pipeline device) -> rank
  std::set<RankId> used;
  for (std::size_t i = 0; i < m.ranks.size(); ++i) {
    const PlanRank& r = m.ranks[i];
    const JsonPath here = at.key("ranks").at(i);
    if (devices > 0 && r.rank >= devices) {
      fail("rank_map", here.key("rank"),
           fmt::format("rank {} is outside the {} devices of parallelism.devices_total", r.rank,
                       devices));
    }
    if (!used.insert(r.rank).second) {
      fail("rank_map", here.key("rank"), fmt::format("rank {} is listed twice", r.rank));
    }
    if (r.dp_index >= D || r.pipeline_device >= P) {
      fail("rank_map", here,
           fmt::format("rank {} has dp_index {} and pipeline_device {}, outside dp {} x pp {}",
                       r.rank, r.dp_index, r.pipeline_device, D, P));
    } else if (!place.emplace(std::pair{r.dp_index, r.pipeline_device}, r.rank).second) {
      fail("rank_map", here,
           fmt::format("dp_index {}, pipeline_device {} has two ranks", r.dp_index,
                       r.pipeline_device));
    }
  }
  if (static_cast<long>(m.ranks.size()) != world) {
    fail("rank_map", at.key("ranks"),
         fmt::format("ranks[] lists {} ranks, pp {} x dp {} is {}", m.ranks.size(), P, D, world));
  }
  rank_groups(place);
}

// pipeline_groups[i][d] and data_parallel_groups[d][i] are the rank ranks[] puts at
// (dp_index i, pipeline device d).
void StructureCheck::rank_groups(const std::map<std::pair<int, int>, RankId>& at) {
  const PlanRankMap& m = plan_.rank_map;
  const int P = plan_.pp(), D = plan_.parallelism.dp;
  auto expect = [&](const char* key, const std::vector<std::vector<RankId>>& groups, int outer,
                    int inner, bool by_replica) {
    const JsonPath path = JsonPath{}.key("rank_map").key(key);
    if (static_cast<int>(groups.size()) != outer) {
      fail("rank_map", path,
           fmt::format("{} has {} groups, expected {}", key, groups.size(), outer));
      return;
    }
    for (int i = 0; i < outer; ++i) {
      std::vector<RankId> want;
      for (int j = 0; j < inner; ++j) {
        const auto it = at.find(by_replica ? std::pair{i, j} : std::pair{j, i});
        want.push_back(it == at.end() ? -1 : it->second);
      }
      if (groups[i] != want) {
        fail("rank_map", path.at(i),
             fmt::format("{}[{}] is [{}]; ranks[] gives [{}]", key, i, fmt::join(groups[i], ", "),
                         fmt::join(want, ", ")));
      }
    }
  };
  expect("pipeline_groups", m.pipeline_groups, D, P, true);
  expect("data_parallel_groups", m.data_parallel_groups, P, D, false);
}

void StructureCheck::predicted() {
  const int P = plan_.pp();
  const JsonPath at = JsonPath{}.key("predicted");
  const auto& peaks = plan_.predicted.peak_memory_bytes;
  if (static_cast<int>(peaks.size()) != P) {
    fail("memory", at.key("peak_memory_bytes"),
         fmt::format("predicted.peak_memory_bytes has {} entries, pp is {}", peaks.size(), P));
  }
  if (!plan_.predicted.devices) return;
  const auto& devices = *plan_.predicted.devices;
  std::vector<bool> listed(P, false);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceId d = devices[i].device;
    if (listed[d]) {
      fail("memory", at.key("devices").at(i).key("device"),
           fmt::format("device {} is listed twice", d));
    }
    listed[d] = true;
  }
  if (static_cast<int>(devices.size()) != P) {
    fail("memory", at.key("devices"),
         fmt::format("predicted.devices[] has {} entries, pp is {}", devices.size(), P));
  }
}

// The claims a plan makes of itself (check_plan_claims): each contradiction is listed once
// per place, at most kMaxProblemsShown in all and then how many more.
class ClaimsCheck {
 public:
  explicit ClaimsCheck(const Plan& plan) : plan_(plan) {}

  std::vector<PlanProblem> run() {
    degrees();
    memory();
    figures();
    layers();
    skips();
    carried();
    op_order();
    ranks();
    if (count_ > kMaxProblemsShown) {
      const std::size_t more = count_ - kMaxProblemsShown;
      out_.push_back({"claims", JsonPath{}, fmt::format("... and {} more", more), more});
    }
    return std::move(out_);
  }

 private:
  void fail(const char* check, const JsonPath& path, std::string message) {
    if (++count_ <= kMaxProblemsShown) out_.push_back({check, path, std::move(message)});
  }

  void degrees() {
    if (auto wrong = global_batch_contradiction(plan_.parallelism)) {
      fail("degrees", JsonPath{}.key("parallelism").key("global_batch"), std::move(*wrong));
    }
  }

  // A runtime trains by the precision's name; the memory figures come from the bytes beside it.
  void memory() {
    std::string given = plan_.options.memory.model().precision_contradiction();
    if (!given.empty()) {
      fail("options", JsonPath{}.key("options").key("memory").key("precision"), std::move(given));
    }
    if (!plan_.chosen) return;
    std::string chosen = plan_.chosen->memory.precision_contradiction();
    if (!chosen.empty()) {
      fail("options", JsonPath{}.key("chosen").key("memory").key("precision"), std::move(chosen));
    }
  }

  // samples_per_s is global_batch / iteration_s (evaluate.hpp): a reader that compares plans
  // (diff and its gates) must not take one without the other. Both are rounded as written,
  // the iteration to 1 ns and the rate to 1e-6, which bounds how far apart they may be; an
  // iteration under the plans' 1 ns resolution is none a plan states.
  void figures() {
    if (global_batch_contradiction(plan_.parallelism)) return;  // an echo of that
    const PlanPredicted& x = plan_.predicted;
    const JsonPath at = JsonPath{}.key("predicted");
    const double batch = plan_.parallelism.global_batch;
    if (x.iteration_s < kTimeQuantum_s) {
      fail("predicted", at.key("iteration_s"),
           fmt::format("expected at least the plans' 1 ns resolution, got {:g} s", x.iteration_s));
      return;
    }
    const double slack = 1e-6 + 1e-9 * x.samples_per_s;
    const double least = batch / (x.iteration_s + kTimeQuantum_s) - slack;
    const double most = x.iteration_s > kTimeQuantum_s
                            ? batch / (x.iteration_s - kTimeQuantum_s) + slack
                            : std::numeric_limits<double>::infinity();
    if (x.samples_per_s < least || x.samples_per_s > most) {
      fail("predicted", at.key("samples_per_s"),
           fmt::format("samples_per_s {:.6f} is not global_batch {} / iteration_s {:.9f} = {:.6f}",
                       x.samples_per_s, plan_.parallelism.global_batch, x.iteration_s,
                       batch / x.iteration_s));
    }
  }

  void layers() {
    std::map<std::string, StageId> first;
    for (const PlanStage& s : plan_.stages) {
      for (std::size_t k = 0; k < s.layers.size(); ++k) {
        const auto [at, fresh] = first.emplace(s.layers[k], s.id);
        if (!fresh) {
          fail("layers", JsonPath{}.key("stages").at(s.id).key("layers").at(k),
               fmt::format("layer \"{}\" is in stage {} and again in stage {}", s.layers[k],
                           at->second, s.id));
        }
      }
    }
  }

  // Transfers name the skips they carry, and runtimes cache skips by name: one name, one skip.
  // A skip's layers are in the stages it names: a layer moved to another stage (the digest
  // recomputed or deleted with it) leaves its skips' stages behind.
  void skips() {
    std::map<std::string, StageId> stage_of;
    for (const PlanStage& s : plan_.stages) {
      for (const std::string& l : s.layers) stage_of.emplace(l, s.id);
    }
    std::map<std::string, std::size_t> named;
    for (std::size_t i = 0; i < plan_.skips.size(); ++i) {
      const PlanSkip& k = plan_.skips[i];
      const JsonPath at = JsonPath{}.key("skips").at(i);
      if (const auto [first, fresh] = named.emplace(k.label(), i); !fresh) {
        fail("skips", k.name ? at.key("name") : at,
             fmt::format("skip name \"{}\" is already the name of $.skips[{}]; each skip needs "
                         "its own",
                         k.label(), first->second));
      }
      skip_layer(stage_of, k, at, "producer", k.producer, k.producer_stage);
      skip_layer(stage_of, k, at, "consumer", k.consumer, k.consumer_stage);
      const DeviceId from = plan_.stages[k.producer_stage].device;
      const DeviceId to = plan_.stages[k.consumer_stage].device;
      if (k.producer_device && *k.producer_device != from) {
        fail("skips", at.key("producer_device"),
             fmt::format("skip \"{}\" says producer_device {}; its producer_stage {} runs on "
                         "device {}",
                         k.label(), *k.producer_device, k.producer_stage, from));
      }
      if (k.consumer_device && *k.consumer_device != to) {
        fail("skips", at.key("consumer_device"),
             fmt::format("skip \"{}\" says consumer_device {}; its consumer_stage {} runs on "
                         "device {}",
                         k.label(), *k.consumer_device, k.consumer_stage, to));
      }
      if (k.local != (from == to)) {
        fail("skips", at.key("local"),
             fmt::format("skip \"{}\" says local {}; it runs from stage {} (device {}) to stage "
                         "{} (device {})",
                         k.label(), k.local, k.producer_stage, from, k.consumer_stage, to));
      }
    }
  }

  void skip_layer(const std::map<std::string, StageId>& stage_of, const PlanSkip& k,
                  const JsonPath& at, const char* role, const std::string& layer, StageId stage) {
    const auto it = stage_of.find(layer);
    if (it != stage_of.end() && it->second == stage) return;
    fail("skips", at.key(fmt::format("{}_stage", role)),
         it == stage_of.end()
             ? fmt::format("skip \"{}\" says {}_stage {}; its {} \"{}\" is in no stage", k.label(),
                           role, stage, role, layer)
             : fmt::format("skip \"{}\" says {}_stage {}; its {} \"{}\" is in stage {} "
                           "($.stages[{}].layers)",
                           k.label(), role, stage, role, layer, it->second, it->second));
  }

  // A runtime sends the carried tensors a transfer names by their $.carried[] entries.
  void carried() {
    std::set<std::string> names;
    for (const PlanCarried& c : plan_.carried) names.insert(c.name);
    for (std::size_t i = 0; i < plan_.transfers.size(); ++i) {
      const auto& listed = plan_.transfers[i].carried;
      if (!listed) continue;
      for (std::size_t j = 0; j < listed->size(); ++j) {
        if (names.count((*listed)[j])) continue;
        fail("transfers", JsonPath{}.key("transfers").at(i).key("carried").at(j),
             fmt::format("\"{}\" is not a carried tensor of this plan ($.carried[].name)",
                         (*listed)[j]));
      }
    }
  }

  // An op's own stage and microbatch come first, F before B or I before W: a device that
  // lists them the other way round could never run them (each needs the one before). Every
  // op of a stage is on the stage's device (check_plan_structure), so one table of
  // (stage, microbatch) serves all devices, as the structure's `seen` does.
  void op_order() {
    struct Latest {
      int slot = -1;      // the latest listed so far: 0 F, 1 B or I, 2 W (slot())
      std::size_t k = 0;  // and where in its device's list
    };
    const int M = plan_.parallelism.num_microbatches;
    std::vector<Latest> latest(static_cast<std::size_t>(plan_.num_stages()) * M);
    for (DeviceId d = 0; d < static_cast<int>(plan_.schedule.size()); ++d) {
      const std::vector<PlanOp>& ops = plan_.schedule[d];
      for (std::size_t k = 0; k < ops.size(); ++k) {
        const Op& op = ops[k].op;
        Latest& seen = latest[static_cast<std::size_t>(op.stage) * M + op.mb];
        if (seen.slot > slot(op.kind)) {
          fail("schedule", JsonPath{}.key("schedule").at(d).key("ops").at(k),
               fmt::format("{} is listed after {}, which needs it first", op_text(op),
                           op_text(ops[seen.k].op)));
          continue;
        }
        seen = {slot(op.kind), k};
      }
    }
  }

  // Clusters number ranks node by node: rank = node x devices per node + local device. The
  // first rank off node 0 says how many devices a node has; every rank must agree.
  void ranks() {
    const std::vector<PlanRank>& ranks = plan_.rank_map.ranks;
    const JsonPath at = JsonPath{}.key("rank_map").key("ranks");
    std::optional<std::size_t> ref;
    for (std::size_t i = 0; i < ranks.size() && !ref; ++i) {
      if (ranks[i].node > 0) ref = i;
    }
    long per_node = 0;
    if (ref) {
      const PlanRank& r = ranks[*ref];
      const long before = static_cast<long>(r.rank) - r.local_device;
      if (before <= 0 || before % r.node != 0 || r.local_device >= before / r.node) {
        fail("rank_map", at.at(*ref),
             fmt::format("rank {} is said to be node {} local device {}: no count of devices "
                         "per node numbers it so (rank = node x devices per node + local device)",
                         r.rank, r.node, r.local_device));
        return;
      }
      per_node = before / r.node;
    }
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const PlanRank& r = ranks[i];
      const long node = per_node > 0 ? r.rank / per_node : 0;
      const long local = per_node > 0 ? r.rank % per_node : r.rank;
      if (r.node == node && r.local_device == local) continue;
      fail("rank_map", at.at(i),
           per_node > 0
               ? fmt::format("rank {} is said to be node {} local device {}; with {} devices per "
                             "node (rank {} is node {} local device {}) it is node {} local "
                             "device {}",
                             r.rank, r.node, r.local_device, per_node, ranks[*ref].rank,
                             ranks[*ref].node, ranks[*ref].local_device, node, local)
               : fmt::format("rank {} is said to be node {} local device {}; with every rank on "
                             "node 0, rank {} is local device {}",
                             r.rank, r.node, r.local_device, r.rank, r.rank));
    }
  }

  const Plan& plan_;
  std::vector<PlanProblem> out_;
  std::size_t count_ = 0;
};

}  // namespace

std::vector<PlanProblem> check_plan_structure(const Plan& plan) {
  return StructureCheck(plan).run();
}

std::optional<std::string> global_batch_contradiction(const PlanParallelism& x) {
  const long batch = static_cast<long>(x.dp) * x.microbatch_size * x.num_microbatches;
  if (batch == x.global_batch) return std::nullopt;
  return fmt::format("global_batch {} is not dp {} x microbatch_size {} x num_microbatches {} = {}",
                     x.global_batch, x.dp, x.microbatch_size, x.num_microbatches, batch);
}

std::vector<PlanProblem> check_plan_claims(const Plan& plan) {
  return ClaimsCheck(plan).run();
}

}  // namespace pulse
