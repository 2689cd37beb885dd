#include "pulse/tools/export.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/schedule/list_schedule.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using nlohmann::json;

json plan_doc(const std::string& model, int pp, Strategy strategy = Strategy::pulse,
              bool split = false) {
  auto m = load_model_profile(test::profile_path("models/" + model + ".json"));
  auto c = load_cluster_profile(test::profile_path("clusters/dgx1-v100-32gb-1n.json"));
  PlanOptions o;
  o.pp = pp;
  o.strategy = strategy;
  if (strategy == Strategy::pulse) o.family = "v";  // the V: rows and caches checked below
  CompiledPlan p = compile_plan(m.value(), c.value(), o).value();
  if (split) {
    p.schedule = list_schedule(p.model, p.num_microbatches, p.inflight_limit, true);
    p.timeline = simulate(p.model, p.schedule, p.num_microbatches, p.static_bytes).value();
  }
  return json::parse(test::plan_text(p, m.value(), c.value()));
}

// Pipeline groups as given, with ranks[] and data_parallel_groups rewritten to agree (the
// rank map stays whole: the reader refuses one that contradicts itself).
void set_pipeline_groups(json& doc, const json& groups) {
  json& m = doc["rank_map"];
  m["pipeline_groups"] = groups;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    for (std::size_t d = 0; d < groups[i].size(); ++d) {
      for (json& r : m["ranks"]) {
        if (r["rank"] != groups[i][d]) continue;
        r["dp_index"] = i;
        r["pipeline_device"] = d;
      }
      m["data_parallel_groups"][d][i] = groups[i][d];
    }
  }
}

Plan read(const json& doc) {
  auto p = parse_plan(doc.dump(), "p.json");
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.value();
}

std::vector<std::vector<std::string>> csv_cells(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream cells_in(line);
    for (std::string cell; std::getline(cells_in, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// PyTorch's compute-only loader rules (its _validate_schedule), restated: each stage on one
// rank; per stage F count = microbatches, I count = W count, B + (I + W) / 2 = microbatches;
// an empty cell is an idle step.
void expect_torch_rules(const std::string& csv, int ranks, int stages, int microbatches) {
  const std::regex action(R"((\d+)(F|I|B|W)(\d+))");
  const auto rows = csv_cells(csv);
  ASSERT_EQ(static_cast<int>(rows.size()), ranks);
  std::map<int, int> rank_of;
  std::map<std::pair<int, char>, std::set<int>> seen;
  for (int r = 0; r < ranks; ++r) {
    for (const std::string& a : rows[r]) {
      if (a.empty()) continue;
      std::smatch m;
      ASSERT_TRUE(std::regex_match(a, m, action)) << a;
      const int stage = std::stoi(m[1]);
      EXPECT_EQ(rank_of.emplace(stage, r).first->second, r) << "stage " << stage;
      const std::pair<int, char> key{stage, m[2].str()[0]};
      EXPECT_TRUE(seen[key].insert(std::stoi(m[3])).second) << a;
    }
  }
  ASSERT_EQ(static_cast<int>(rank_of.size()), stages);
  for (int s = 0; s < stages; ++s) {
    const auto n = [&](char k) { return static_cast<int>(seen[{s, k}].size()); };
    EXPECT_EQ(n('F'), microbatches);
    EXPECT_EQ(n('I'), n('W'));
    EXPECT_EQ(n('B') + (n('I') + n('W')) / 2, microbatches);
  }
}

// The lock-step rule restated from the CSV text alone: every op is at a later step than the
// op whose output it consumes (the forward of the stage before; the I or B of the stage after),
// wherever that op is.
void expect_lock_step(const std::string& csv, int stages) {
  const std::regex action(R"((\d+)(F|I|B|W)(\d+))");
  std::map<std::tuple<char, int, int>, int> step;      // ('F' or 'B' for I/B, stage, mb) -> step
  std::vector<std::tuple<char, int, int, int>> needs;  // (kind, stage, mb, step)
  for (const auto& row : csv_cells(csv)) {
    for (std::size_t t = 0; t < row.size(); ++t) {
      if (row[t].empty()) continue;
      std::smatch m;
      ASSERT_TRUE(std::regex_match(row[t], m, action)) << row[t];
      const int s = std::stoi(m[1]), mb = std::stoi(m[3]);
      const char k = m[2].str()[0];
      if (k == 'F') step[{'F', s, mb}] = static_cast<int>(t);
      if (k == 'I' || k == 'B') step[{'B', s, mb}] = static_cast<int>(t);
      needs.emplace_back(k, s, mb, static_cast<int>(t));
    }
  }
  for (const auto& [k, s, mb, t] : needs) {
    if (k == 'F' && s > 0) {
      EXPECT_LT(step.at({'F', s - 1, mb}), t) << s << "F" << mb;
    }
    if ((k == 'I' || k == 'B') && s < stages - 1) {
      EXPECT_LT(step.at({'B', s + 1, mb}), t) << s << k << mb;
    }
  }
}

// Row g's non-empty cells are exactly the plan's ops of device row_devices[g], in order.
void expect_rows_are_devices(const std::string& csv, const Plan& p,
                             const std::vector<DeviceId>& row_devices) {
  const auto rows = csv_cells(csv);
  ASSERT_EQ(rows.size(), row_devices.size());
  for (std::size_t g = 0; g < rows.size(); ++g) {
    std::vector<std::string> cells, want;
    for (const std::string& c : rows[g]) {
      if (!c.empty()) cells.push_back(c);
    }
    for (const PlanOp& o : p.schedule[row_devices[g]]) {
      want.push_back(fmt::format("{}{}{}", o.op.stage, op_letter(o.op.kind), o.op.mb));
    }
    EXPECT_EQ(cells, want) << "row " << g;
    ASSERT_FALSE(rows[g].empty());
    EXPECT_FALSE(rows[g].back().empty()) << "row " << g << " ends in an idle cell";
  }
}

// Renames a stage's layer everywhere the plan names it: its stage list and the skips it
// produces or consumes (a reader holds a skip's layers to the stages it names).
void rename_stage_layer(json& doc, int stage, int index, const std::string& name) {
  json& slot = doc["stages"][stage]["layers"][index];
  const std::string old = slot;
  slot = name;
  for (json& k : doc["skips"]) {
    for (const char* end : {"producer", "consumer"}) {
      if (k[end] == old) k[end] = name;
    }
  }
}

TEST(ExportTorchCsv, RowsHoldThePlansOrderWithLockStepIdleCells) {
  const json doc = plan_doc("tiny-unet", 2);  // 4 stages in a V
  const Plan p = read(doc);
  const TorchCsv out = export_torch_csv(p).value();
  expect_torch_rules(out.csv, 2, 4, p.parallelism.num_microbatches);
  ASSERT_EQ(out.row_devices, (std::vector<DeviceId>{0, 1}));  // groups are ascending
  expect_rows_are_devices(out.csv, p, out.row_devices);
  expect_lock_step(out.csv, 4);
  const auto rows = csv_cells(out.csv);
  // 0F0 is at step 0, so 1F0, which consumes it, waits a step.
  EXPECT_EQ(rows[0][0], "0F0");
  EXPECT_EQ(rows[1][0], "");
  EXPECT_EQ(rows[1][1], "1F0");
  EXPECT_EQ(out.num_steps, static_cast<int>(std::max(rows[0].size(), rows[1].size())));
  EXPECT_EQ(out.csv.back(), '\n');
}

TEST(ExportTorchCsv, EveryStrategyAndDegreeKeepsTheLockStepRule) {
  for (int pp = 1; pp <= 4; ++pp) {
    for (Strategy strategy : {Strategy::pulse, Strategy::one_f_one_b, Strategy::gpipe}) {
      for (bool split : {false, true}) {
        SCOPED_TRACE(
            fmt::format("pp {} strategy {} split {}", pp, static_cast<int>(strategy), split));
        const Plan p = read(plan_doc("tiny-unet", pp, strategy, split));
        const TorchCsv out = export_torch_csv(p).value();
        expect_torch_rules(out.csv, pp, p.num_stages(), p.parallelism.num_microbatches);
        expect_rows_are_devices(out.csv, p, out.row_devices);
        expect_lock_step(out.csv, p.num_stages());
      }
    }
  }
}

TEST(ExportTorchCsv, RowsFollowGroupRankNotPipelinePosition) {
  json doc = plan_doc("tiny-unet", 2);
  // Device 0 gets the larger global rank of every pipeline: new_group makes it group rank 1.
  set_pipeline_groups(doc, json::parse("[[3, 0], [2, 1], [7, 4], [6, 5]]"));
  const Plan p = read(doc);
  const TorchCsv out = export_torch_csv(p).value();
  EXPECT_EQ(out.row_devices, (std::vector<DeviceId>{1, 0}));
  expect_rows_are_devices(out.csv, p, out.row_devices);
  expect_lock_step(out.csv, 4);
  const json side = json::parse(out.stages_json);
  EXPECT_EQ(side["row_devices"], json({1, 0}));
  EXPECT_EQ(side["ranks"][0]["group_rank"], 0);
  EXPECT_EQ(side["ranks"][0]["device"], 1);
  EXPECT_EQ(side["ranks"][0]["stages"], json({1, 2}));
  EXPECT_EQ(side["ranks"][0]["global_ranks"], json({0, 1, 4, 5}));
  EXPECT_EQ(side["ranks"][1]["global_ranks"], json({3, 2, 7, 6}));
  EXPECT_EQ(side["stages"][0]["group_rank"], 1);
  EXPECT_EQ(side["stages"][1]["group_rank"], 0);
}

TEST(ExportTorchCsv, GroupsThatDisagreeAreRefusedNamingBoth) {
  json doc = plan_doc("tiny-unet", 2);
  set_pipeline_groups(doc, json::parse("[[0, 3], [2, 1], [4, 7], [5, 6]]"));
  const auto out = export_torch_csv(read(doc));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::input);
  EXPECT_NE(out.error().message.find("p.json: pipeline groups 0 [0, 3] and 1 [2, 1] "),
            std::string::npos)
      << out.error().message;
  EXPECT_NE(out.error().message.find("(row g is device [0, 1] vs [1, 0])"), std::string::npos);
}

TEST(ExportTorchCsv, SideFileHasStageLayersAndSkipCaches) {
  const Plan p = read(plan_doc("tiny-unet", 2));
  const TorchCsv out = export_torch_csv(p).value();
  const json side = json::parse(out.stages_json);
  EXPECT_EQ(side["schema"], "pulse.torch-stages/v2");
  EXPECT_EQ(side["csv_format"], "compute_only");
  EXPECT_EQ(side["csv_rows"], "group_rank");
  EXPECT_EQ(side["csv_idle_cells"], "lock_step");
  EXPECT_EQ(side["num_steps"], out.num_steps);
  EXPECT_EQ(side["num_microbatches"], p.parallelism.num_microbatches);
  EXPECT_EQ(side["pipeline_groups"], json(p.rank_map.pipeline_groups));
  ASSERT_EQ(side["stages"].size(), 4u);
  EXPECT_EQ(side["stages"][3]["device"], 0);
  EXPECT_EQ(side["stages"][3]["group_rank"], 0);
  EXPECT_EQ(side["stages"][3]["layers"], json({"dec1", "dec0", "head"}));
  EXPECT_EQ(side["ranks"][0]["stages"], json({0, 3}));
  std::vector<RankId> global;
  for (const auto& group : p.rank_map.pipeline_groups) global.push_back(group[0]);
  EXPECT_EQ(side["ranks"][0]["global_ranks"], json(global));
  // Every tiny-unet skip is 1 MiB per sample; three are cached on rank 0, one on rank 1.
  const json& cached = side["ranks"][0]["cached_skips"];
  ASSERT_EQ(cached.size(), 3u);
  EXPECT_EQ(cached[1], json::parse(R"({"name": "enc0->dec0", "producer": "enc0",
      "consumer": "dec0", "producer_stage": 0, "consumer_stage": 3, "producer_device": 0,
      "consumer_device": 0, "producer_group_rank": 0, "consumer_group_rank": 0,
      "bytes_per_sample": 1048576, "bytes_per_microbatch": )" +
                                   std::to_string(1048576 * p.parallelism.microbatch_size) + "}"));
  EXPECT_EQ(side["ranks"][1]["cached_skips"][0]["name"], "enc2->dec2");
  EXPECT_EQ(side["remote_skips"].size(), 0u);
}

TEST(ExportTorchCsv, SideFileKeysInTheDocumentedOrder) {
  const Plan p = read(plan_doc("tiny-unet", 2));
  const auto side = nlohmann::ordered_json::parse(export_torch_csv(p).value().stages_json);
  std::vector<std::string> keys;
  for (const auto& [k, v] : side.items()) keys.push_back(k);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"schema", "plan", "csv_format", "csv_rows", "csv_idle_cells",
                                      "num_steps", "pp", "dp", "num_stages", "num_microbatches",
                                      "microbatch_size", "split_backward", "pipeline_groups",
                                      "row_devices", "stages", "ranks", "remote_skips"}));
}

TEST(ExportTorchCsv, SequentialPlansListRemoteSkips) {
  const Plan p = read(plan_doc("tiny-unet", 4, Strategy::one_f_one_b));
  const TorchCsv out = export_torch_csv(p).value();
  expect_torch_rules(out.csv, 4, 4, p.parallelism.num_microbatches);
  const json side = json::parse(out.stages_json);
  ASSERT_EQ(side["remote_skips"].size(), 4u);
  const json& first = side["remote_skips"][0];
  EXPECT_EQ(first["route"], "forwarded");
  EXPECT_EQ(first["producer_device"], 0);
  EXPECT_EQ(first["consumer_device"], 3);
  EXPECT_EQ(first["producer_group_rank"], side["stages"][0]["group_rank"]);
  EXPECT_EQ(first["consumer_group_rank"], side["stages"][3]["group_rank"]);
  for (const json& r : side["ranks"]) EXPECT_EQ(r["cached_skips"].size(), 0u);
}

TEST(ExportTorchCsv, SplitBackwardUsesIAndW) {
  const Plan p = read(plan_doc("tiny-unet", 2, Strategy::pulse, true));
  const TorchCsv out = export_torch_csv(p).value();
  const int m = p.parallelism.num_microbatches;
  expect_torch_rules(out.csv, 2, 4, m);
  expect_lock_step(out.csv, 4);
  EXPECT_EQ(count(out.csv, "B"), 0u);
  EXPECT_EQ(count(out.csv, "I"), 4u * m);
  EXPECT_EQ(count(out.csv, "W"), 4u * m);
  EXPECT_EQ(json::parse(out.stages_json)["split_backward"], true);
}

// A hand-made plan with four stages on each device (waves: 8 stages, zig-zag 0 1 1 0 0 1 1 0)
// and two microbatches, run in one global order: every forward in stage order, then every
// backward in reverse. Its steps are worked out by hand below.
Plan waves_plan() {
  Plan p;
  p.file = "waves.json";
  p.parallelism.pp = 2;
  p.parallelism.num_microbatches = 2;
  p.parallelism.microbatch_size = 3;
  p.parallelism.num_stages = 8;
  const std::vector<DeviceId> zigzag = {0, 1, 1, 0, 0, 1, 1, 0};
  for (StageId s = 0; s < 8; ++s) {
    PlanStage stage;
    stage.id = s;
    stage.device = zigzag[s];
    stage.layers = {fmt::format("l{}", s)};
    p.stages.push_back(stage);
  }
  p.schedule.resize(2);
  for (StageId s = 0; s < 8; ++s) {
    for (int mb = 0; mb < 2; ++mb) p.schedule[zigzag[s]].push_back({{OpKind::forward, s, mb}});
  }
  for (StageId s = 7; s >= 0; --s) {
    for (int mb = 0; mb < 2; ++mb) p.schedule[zigzag[s]].push_back({{OpKind::backward, s, mb}});
  }
  // Device 0 is global rank 1: row 0 is device 1.
  p.rank_map.pipeline_groups = {{1, 0}};
  auto skip = [](std::string a, std::string b, StageId from, StageId to) {
    PlanSkip k;
    k.producer = std::move(a);
    k.consumer = std::move(b);
    k.producer_stage = from;
    k.consumer_stage = to;
    k.bytes_per_sample = 10;
    return k;
  };
  p.skips = {skip("l0", "l7", 0, 7), skip("l1", "l6", 1, 6), skip("l3", "l5", 3, 5)};
  return p;
}

TEST(ExportTorchCsv, FourStagesPerDeviceStepByHand) {
  const Plan p = waves_plan();
  const TorchCsv out = export_torch_csv(p).value();
  EXPECT_EQ(out.row_devices, (std::vector<DeviceId>{1, 0}));
  // Device 1: 1F0 waits for 0F0 (step 0); 5F0 for 4F0 (step 6); 6B0 for 7B0 (step 12), ...
  EXPECT_EQ(out.csv,
            ",1F0,1F1,2F0,2F1,,,5F0,5F1,6F0,6F1,,,6B0,6B1,5B0,5B1,,,2B0,2B1,1B0,1B1\n"
            "0F0,0F1,,,3F0,3F1,4F0,4F1,,,7F0,7F1,7B0,7B1,,,4B0,4B1,3B0,3B1,,,0B0,0B1\n");
  EXPECT_EQ(out.num_steps, 24);
  expect_torch_rules(out.csv, 2, 8, 2);
  expect_lock_step(out.csv, 8);
  const json side = json::parse(out.stages_json);
  EXPECT_EQ(side["ranks"][0]["stages"], json({1, 2, 5, 6}));
  EXPECT_EQ(side["ranks"][1]["stages"], json({0, 3, 4, 7}));
  EXPECT_EQ(side["ranks"][1]["global_ranks"], json({1}));
  EXPECT_EQ(side["ranks"][0]["cached_skips"][0]["name"], "l1->l6");
  EXPECT_EQ(side["ranks"][1]["cached_skips"][0]["name"], "l0->l7");
  EXPECT_EQ(side["ranks"][1]["cached_skips"][0]["bytes_per_microbatch"], 30);
  ASSERT_EQ(side["remote_skips"].size(), 1u);
  EXPECT_EQ(side["remote_skips"][0]["name"], "l3->l5");
  EXPECT_EQ(side["remote_skips"][0]["producer_group_rank"], 1);
  EXPECT_EQ(side["remote_skips"][0]["consumer_group_rank"], 0);
  EXPECT_EQ(side["remote_skips"][0]["route"], "direct");
  EXPECT_EQ(side["stages"][5], json::parse(R"({"stage": 5, "group_rank": 0, "device": 1,
      "layers": ["l5"]})"));
}

TEST(ExportTorchCsv, AScheduleThatWaitsInACycleIsRefused) {
  Plan p = waves_plan();
  // 0B0 first on device 0: it needs 1B0, which needs 1F0, which needs 0F0, after 0B0.
  auto& ops = p.schedule[0];
  std::rotate(ops.begin(), ops.end() - 2, ops.end() - 1);
  const auto out = export_torch_csv(p);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::input);
  EXPECT_EQ(out.error().message,
            "waves.json: the schedule cannot run to its end, so it cannot be exported: device 0 "
            "at 0B0 (op 0) waits for the input gradient of stage 1; device 1 at 1F0 (op 0) "
            "waits for the forward of stage 0");
}

TEST(ExportDot, StagesAreClustersAndSkipsDashed) {
  const Plan p = read(plan_doc("tiny-unet", 2));
  const std::string dot = export_dot(p, {});
  EXPECT_EQ(dot.rfind("digraph \"tiny-unet\" {\n", 0), 0u);
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(count(dot, fmt::format("subgraph cluster_stage{} ", s)), 1u);
  EXPECT_EQ(count(dot, "style=dashed"), 4u);
  EXPECT_EQ(count(dot, "\"enc0\" -> \"dec0\" [style=dashed"), 1u);
  EXPECT_EQ(count(dot, " -> ") - count(dot, "style=dashed"), 9u);  // the main path
  // Layers of device 0 share a fill, device 1 has another.
  EXPECT_NE(dot.find("\"embed\" [label=\"embed\", fillcolor=\"#a6cee3\"]"), std::string::npos);
  EXPECT_NE(dot.find("\"enc2\" [label=\"enc2\", fillcolor=\"#b2df8a\"]"), std::string::npos);
  EXPECT_NE(dot.find("\"head\" [label=\"head\", fillcolor=\"#a6cee3\"]"), std::string::npos);
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
}

TEST(ExportDot, ModelAddsKindsAndNamesAreQuoted) {
  json doc = plan_doc("tiny-unet", 2);
  rename_stage_layer(doc, 0, 0, "em\"bed");
  const Plan p = read(doc);
  auto model = load_model_profile(test::profile_path("models/tiny-unet.json"));
  const std::string dot = export_dot(p, {&model.value()});
  EXPECT_NE(dot.find("\"em\\\"bed\" [label=\"em\\\"bed\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"enc0\" [label=\"enc0\\n"), std::string::npos) << dot;
  EXPECT_NE(dot.find(" M params\""), std::string::npos);
}

TEST(ExportHtml, OneSelfContainedPageWithEveryOp) {
  json doc = plan_doc("tiny-unet", 2);
  doc["stages"][1]["layers"][1] = "mid<0>&";  // a layer no skip touches
  const Plan p = read(doc);
  const std::string html = export_html({&p, {}});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>\n", 0), 0u);
  EXPECT_EQ(html.substr(html.size() - 8), "</html>\n");
  EXPECT_EQ(count(html, "<svg id=\"timeline-0\""), 1u);
  EXPECT_EQ(count(html, "<title>F stage") + count(html, "<title>B stage"), p.num_ops());
  EXPECT_EQ(count(html, "<path d="), 4u);  // one arc per skip
  EXPECT_EQ(count(html, "class=\"skip local\""), 4u);
  EXPECT_NE(html.find("mid&lt;0&gt;&amp;"), std::string::npos);
  EXPECT_EQ(html.find("mid<0>"), std::string::npos);
  for (const char* external : {"<script", "src=", "href=", "url(", "@import", "<link"}) {
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  }
}

TEST(ExportHtml, AVerdictOrWarningOfSeveralLinesKeepsItsLines) {
  // pipeline_or_not.note lists a failed configuration per line; the page breaks the lines
  // rather than spelling the newline out as a control byte.
  Plan p = read(plan_doc("tiny-unet", 2));
  p.warnings = {"first line\nsecond <line>"};
  const std::string html = export_html({&p, {}});
  EXPECT_NE(html.find("<li>Warning: first line<br>\nsecond &lt;line&gt;</li>"), std::string::npos);
  EXPECT_EQ(html.find("\\x0a"), std::string::npos);
}

TEST(ExportHtml, BaselinesBesideThePlan) {
  const Plan v = read(plan_doc("tiny-unet", 2));
  const Plan seq = read(plan_doc("tiny-unet", 4, Strategy::one_f_one_b));
  const std::string html = export_html({&v, {&seq}});
  EXPECT_EQ(count(html, "<svg id=\"timeline-"), 2u);
  EXPECT_EQ(count(html, "<section id=\"plan-"), 2u);
  EXPECT_NE(html.find("<table class=\"compare\">"), std::string::npos);
  EXPECT_NE(
      html.find(fmt::format("<tr><th>strategy</th><td>pulse</td><td>{}</td></tr>", seq.strategy())),
      std::string::npos);
  EXPECT_EQ(count(html, "class=\"skip remote\""), 4u);  // the baseline relays every skip
}

TEST(ExportHtml, AxisTicksAreBoundedWhateverTheTimes) {
  // The reader refuses times over its limit; a plan built in memory is not read, and the
  // timeline's axis must end for any time, even one that is not finite (stepping from 0 by
  // a step of infinity never passed the end before).
  Plan p = read(plan_doc("tiny-unet", 2));
  const std::size_t finite_ticks = count(export_html({&p, {}}), "class=\"tick\"");
  EXPECT_GE(finite_ticks, 2u);
  EXPECT_LE(finite_ticks, 101u);
  for (const double end :
       {1e18, 1e300, std::numeric_limits<double>::max(), std::numeric_limits<double>::infinity()}) {
    p.schedule[0].back().end_s = end;
    const std::string html = export_html({&p, {}});
    EXPECT_GE(count(html, "class=\"tick\""), 1u) << end;
    EXPECT_LE(count(html, "class=\"tick\""), 101u) << end;
  }
}

// --model must be the plan's model: its layers, each once, in execution order. A stage whose
// layers were reversed is refused at its first misplaced layer.
TEST(ExportDot, ModelLayersMustBeThePlansInOrder) {
  auto model = load_model_profile(test::profile_path("models/tiny-unet.json"));
  ASSERT_TRUE(model.ok());
  json doc = plan_doc("tiny-unet", 2);
  EXPECT_TRUE(check_dot_model(read(doc), *model).ok());
  json& first = doc["stages"][0]["layers"];
  ASSERT_EQ(first, json::parse(R"(["embed", "enc0", "enc1"])"));
  std::reverse(first.begin(), first.end());
  const Status s = check_dot_model(read(doc), *model);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "p.json: $.stages[0].layers[0]: layer \"enc1\" where model tiny-unet (--model " +
                model->file.path +
                ") has \"embed\" (layer 0): the stages must list the model's layers in its "
                "execution order");
}

// Names with control bytes, NUL included, are printable in dot (a NUL would end the string
// for Graphviz) and in HTML.
TEST(ExportDot, ControlBytesInNamesAreSpelledOut) {
  Plan p = read(plan_doc("tiny-unet", 2));
  const char name[] = "em\0b\x1b[31m\xff";  // \xff: not UTF-8, as a plan's reader may pass it
  p.stages[0].layers[0] = std::string(name, sizeof name - 1);
  p.inputs.model.name = "t\x07iny";
  const std::string dot = export_dot(p, {});
  EXPECT_NE(dot.find("\"em\\\\x00b\\\\x1b[31m\\\\xff\" [label="), std::string::npos) << dot;
  EXPECT_NE(dot.find("digraph \"t\\\\x07iny\""), std::string::npos);
  const std::string html = export_html({&p, {}});
  for (const std::string& raw :
       {std::string(1, '\0'), std::string("\x1b"), std::string("\x07"), std::string("\xff")}) {
    EXPECT_EQ(html.find(raw), std::string::npos) << "raw byte " << int(raw[0]);
    EXPECT_EQ(dot.find(raw), std::string::npos) << "raw byte " << int(raw[0]);
  }
  EXPECT_NE(html.find("em\\x00b\\x1b[31m\\xff"), std::string::npos);
}
}  // namespace
}  // namespace pulse
