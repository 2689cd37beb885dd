#include "pulse/tools/export.hpp"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "support/test_support.hpp"
#include "pulse/schedule/list_schedule.hpp"

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
  CompiledPlan p = compile_plan(m.value(), c.value(), o).value();
  if (split) {
    p.schedule = list_schedule(p.model, p.num_microbatches, p.inflight_limit, true);
    p.timeline = simulate(p.model, p.schedule, p.num_microbatches, p.static_bytes).value();
  }
  return json::parse(test::plan_text(p, m.value(), c.value()));
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
// rank; per stage F count = microbatches, I count = W count, B + (I + W) / 2 = microbatches.
void expect_torch_rules(const std::string& csv, int ranks, int stages, int microbatches) {
  const std::regex action(R"((\d+)(F|I|B|W)(\d+))");
  const auto rows = csv_cells(csv);
  ASSERT_EQ(static_cast<int>(rows.size()), ranks);
  std::map<int, int> rank_of;
  std::map<std::pair<int, char>, std::set<int>> seen;
  for (int r = 0; r < ranks; ++r) {
    for (const std::string& a : rows[r]) {
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

TEST(ExportTorchCsv, OneRowPerRankInThePlansOrder) {
  const json doc = plan_doc("tiny-unet", 2);  // 4 stages in a V
  const Plan p = read(doc);
  const TorchCsv out = export_torch_csv(p);
  expect_torch_rules(out.csv, 2, 4, p.parallelism.num_microbatches);
  const auto rows = csv_cells(out.csv);
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(rows[d].size(), p.schedule[d].size());
    for (std::size_t i = 0; i < rows[d].size(); ++i) {
      const json& op = doc["schedule"][d]["ops"][i];
      EXPECT_EQ(rows[d][i], fmt::format("{}{}{}", op["stage"].get<int>(),
                                        op["op"].get<std::string>(), op["mb"].get<int>()));
    }
  }
  EXPECT_EQ(rows[1][0], "1F0");
  EXPECT_EQ(out.csv.back(), '\n');
}

TEST(ExportTorchCsv, SideFileHasStageLayersAndSkipCaches) {
  const Plan p = read(plan_doc("tiny-unet", 2));
  const json side = json::parse(export_torch_csv(p).stages_json);
  EXPECT_EQ(side["schema"], "pulse.torch-stages/v1");
  EXPECT_EQ(side["num_microbatches"], p.parallelism.num_microbatches);
  ASSERT_EQ(side["stages"].size(), 4u);
  EXPECT_EQ(side["stages"][3]["rank"], 0);
  EXPECT_EQ(side["stages"][3]["layers"], json({"dec1", "dec0", "head"}));
  EXPECT_EQ(side["ranks"][0]["stages"], json({0, 3}));
  std::vector<RankId> global;
  for (const auto& group : p.rank_map.pipeline_groups) global.push_back(group[0]);
  EXPECT_EQ(side["ranks"][0]["global_ranks"], json(global));
  // Every tiny-unet skip is 1 MiB per sample; three are cached on rank 0, one on rank 1.
  const json& cached = side["ranks"][0]["cached_skips"];
  ASSERT_EQ(cached.size(), 3u);
  EXPECT_EQ(cached[1]["name"], "enc0->dec0");
  EXPECT_EQ(cached[1]["producer"], "enc0");
  EXPECT_EQ(cached[1]["consumer"], "dec0");
  EXPECT_EQ(cached[1]["producer_stage"], 0);
  EXPECT_EQ(cached[1]["consumer_stage"], 3);
  EXPECT_EQ(cached[1]["bytes_per_sample"], 1048576);
  EXPECT_EQ(cached[1]["bytes_per_microbatch"], 1048576 * p.parallelism.microbatch_size);
  EXPECT_EQ(side["ranks"][1]["cached_skips"][0]["name"], "enc2->dec2");
  EXPECT_EQ(side["remote_skips"].size(), 0u);
}

TEST(ExportTorchCsv, SequentialPlansListRemoteSkips) {
  const Plan p = read(plan_doc("tiny-unet", 4, Strategy::one_f_one_b));
  const TorchCsv out = export_torch_csv(p);
  expect_torch_rules(out.csv, 4, 4, p.parallelism.num_microbatches);
  const json side = json::parse(out.stages_json);
  ASSERT_EQ(side["remote_skips"].size(), 4u);
  EXPECT_EQ(side["remote_skips"][0]["route"], "forwarded");
  EXPECT_EQ(side["remote_skips"][0]["producer_rank"], 0);
  EXPECT_EQ(side["remote_skips"][0]["consumer_rank"], 3);
  for (const json& r : side["ranks"]) EXPECT_EQ(r["cached_skips"].size(), 0u);
}

TEST(ExportTorchCsv, SplitBackwardUsesIAndW) {
  const Plan p = read(plan_doc("tiny-unet", 2, Strategy::pulse, true));
  const TorchCsv out = export_torch_csv(p);
  const int m = p.parallelism.num_microbatches;
  expect_torch_rules(out.csv, 2, 4, m);
  EXPECT_EQ(count(out.csv, "B"), 0u);
  EXPECT_EQ(count(out.csv, "I"), 4u * m);
  EXPECT_EQ(count(out.csv, "W"), 4u * m);
  EXPECT_EQ(json::parse(out.stages_json)["split_backward"], true);
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
  doc["stages"][0]["layers"][0] = "em\"bed";
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

}  // namespace
}  // namespace pulse
