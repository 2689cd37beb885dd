#include "pulse/tools/diff.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/plan/plan_codec.hpp"
#include "pulse/tools/replay.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using nlohmann::json;

json plan_doc(const std::string& model, const std::string& cluster, std::optional<int> pp = {},
              const std::string& frozen = "auto") {
  auto m = load_model_profile(test::profile_path("models/" + model + ".json"));
  auto c = load_cluster_profile(test::profile_path("clusters/" + cluster + ".json"));
  PlanOptions o;
  o.pp = pp;
  o.frozen = frozen;
  o.family = "v";  // the V at each degree: the rows below are worked out for it
  auto p = compile_plan(m.value(), c.value(), o);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return json::parse(test::plan_text(p.value(), m.value(), c.value()));
}

// Renames a stage's layer everywhere the plan names it: its stage list and the skips it
// produces or consumes (a reader holds a skip's layers to the stages it names).
void rename_layer(json& doc, int stage, int index, const std::string& name) {
  json& slot = doc["stages"][stage]["layers"][index];
  const std::string old = slot;
  slot = name;
  for (json& k : doc["skips"]) {
    for (const char* end : {"producer", "consumer"}) {
      if (k[end] == old) k[end] = name;
    }
  }
}

Plan read(const json& doc, const std::string& name) {
  auto p = parse_plan(doc.dump(), name);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.value();
}

const DiffRow& row(const PlanDiff& d, const std::string& key) {
  for (const DiffRow& r : d.rows) {
    if (r.key == key) return r;
  }
  throw std::runtime_error("no row " + key);
}

// Layer -> (stage, device) straight from the JSON, independent of the reader and the diff.
std::map<std::string, std::pair<int, int>> placement(const json& doc) {
  std::map<std::string, std::pair<int, int>> out;
  for (const json& s : doc["stages"]) {
    for (const json& l : s["layers"]) out[l] = {s["id"], s["device"]};
  }
  return out;
}

TEST(Diff, Sd2OnV100AndOn910aNamesChangedDegreesAndMovedLayers) {
  // SD2 at 768: at 512 the two clusters' plans happen to cut every layer alike.
  const json v100 = plan_doc("sd2-unet-768", "dgx1-v100-32gb-1n");
  const json a910 = plan_doc("sd2-unet-768", "atlas800-910a-1n");
  const Plan a = read(v100, "v100.json"), b = read(a910, "910a.json");
  const PlanDiff d = diff_plans({&a, &b});
  const std::string table = format_diff_table(d, {});

  std::vector<std::string> degrees;
  for (const char* k : {"pp", "dp", "microbatch_size", "num_microbatches", "global_batch"}) {
    if (v100["parallelism"][k] != a910["parallelism"][k]) degrees.push_back(k);
  }
  if (v100["stages"].size() != a910["stages"].size()) degrees.push_back("num_stages");
  EXPECT_EQ(d.changed_degrees, degrees);
  for (const std::string& k : degrees) EXPECT_NE(row(d, k).delta, "");

  // The two clusters' links differ, so the balanced cuts differ: some layers move.
  const auto old_at = placement(v100), new_at = placement(a910);
  std::vector<std::string> moved;
  for (const json& s : a910["stages"]) {
    for (const json& l : s["layers"]) {
      if (old_at.at(l) != new_at.at(l)) moved.push_back(l);
    }
  }
  ASSERT_FALSE(moved.empty());
  ASSERT_EQ(d.moved_layers.size(), moved.size());
  for (std::size_t i = 0; i < moved.size(); ++i) {
    const LayerMove& m = d.moved_layers[i];
    EXPECT_EQ(m.layer, moved[i]);
    EXPECT_EQ(std::pair(m.old_stage, m.old_device), old_at.at(moved[i]));
    EXPECT_EQ(std::pair(m.new_stage, m.new_device), new_at.at(moved[i]));
    EXPECT_NE(table.find(fmt::format("  {} ", moved[i])), std::string::npos) << table;
  }
  EXPECT_NE(table.find(fmt::format("moved layers: {} of 47\n", moved.size())), std::string::npos);
  EXPECT_EQ(row(d, "cluster").delta, "changed");
  EXPECT_EQ(row(d, "device_type").new_text, "Ascend-910A");
}

TEST(Diff, ChangedDegreesAreRowsWithTheirDelta) {
  // pp 4 x dp 2 against pp 2 x dp 4 on the same global batch: the microbatch count changes
  // too (and the microbatch size, if the planner picks another one).
  const json pp4 = plan_doc("sd2-unet-512", "dgx1-v100-32gb-1n", 4);
  const json pp2 = plan_doc("sd2-unet-512", "atlas800-910a-1n", 2);
  const Plan a = read(pp4, "pp4.json"), b = read(pp2, "pp2.json");
  const PlanDiff d = diff_plans({&a, &b});
  std::vector<std::string> degrees = {"pp", "dp"};
  for (const char* k : {"microbatch_size", "num_microbatches", "global_batch"}) {
    if (pp4["parallelism"][k] != pp2["parallelism"][k]) degrees.push_back(k);
  }
  degrees.push_back("num_stages");
  EXPECT_EQ(d.changed_degrees, degrees);
  EXPECT_EQ(row(d, "pp").delta, "-2");
  EXPECT_EQ(row(d, "dp").delta, fmt::format("{:+}", pp2["parallelism"]["dp"].get<int>() -
                                                        pp4["parallelism"]["dp"].get<int>()));
  const std::string table = format_diff_table(d, {});
  EXPECT_NE(table.find("  pp                       4                                   2"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("  stage 7 "), std::string::npos);
  EXPECT_EQ(row(d, "stage7").new_text, "-");
}

TEST(Diff, APlanAgainstItselfHasNoChanges) {
  const Plan a = read(plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 2), "a.json");
  const PlanDiff d = diff_plans({&a, &a});
  for (const DiffRow& r : d.rows) {
    EXPECT_EQ(r.change, Change::same) << r.key;
    EXPECT_EQ(r.delta, "") << r.key;
  }
  EXPECT_TRUE(d.moved_layers.empty());
  EXPECT_TRUE(d.changed_degrees.empty());
  EXPECT_EQ(d.slowdown_pct, 0);
  EXPECT_EQ(d.traffic_increase_pct, 0);
  const std::string table = format_diff_table(d, {});
  EXPECT_EQ(table.substr(table.size() - 20), "\nmoved layers: none\n");
  EXPECT_EQ(table.find('\033'), std::string::npos);
}

TEST(Diff, ThresholdFiguresAndDirections) {
  json old_doc = plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 2);
  json new_doc = old_doc;
  // 10% fewer samples per second (an iteration 1/0.9 as long: a reader refuses a rate its
  // iteration contradicts), twice the point-to-point bytes at the same batch.
  new_doc["predicted"]["samples_per_s"] = old_doc["predicted"]["samples_per_s"].get<double>() * 0.9;
  new_doc["predicted"]["iteration_s"] =
      std::round(old_doc["predicted"]["iteration_s"].get<double>() / 0.9 * 1e9) / 1e9;
  new_doc["comm"]["p2p_bytes_per_iteration"] =
      2 * old_doc["comm"]["p2p_bytes_per_iteration"].get<std::int64_t>();
  const double old_bubble = old_doc["predicted"]["bubble_ratio"];
  ASSERT_GT(old_bubble, 0.06);
  new_doc["predicted"]["bubble_ratio"] = 0.05;
  const Plan a = read(old_doc, "old.json"), b = read(new_doc, "new.json");
  const PlanDiff d = diff_plans({&a, &b});
  EXPECT_NEAR(d.slowdown_pct, 10.0, 1e-6);
  EXPECT_NEAR(d.traffic_increase_pct, 100.0, 1e-9);
  EXPECT_EQ(row(d, "samples_per_s").change, Change::worse);
  EXPECT_EQ(row(d, "samples_per_s").delta, "-10.0%");
  EXPECT_EQ(row(d, "p2p_bytes").change, Change::worse);
  EXPECT_EQ(row(d, "bubble_ratio").change, Change::better);
  EXPECT_EQ(row(d, "bubble_ratio").delta, fmt::format("{:+.1f} pp", 100 * (0.05 - old_bubble)));
  // Colour: red for worse, green for better, only when asked.
  const std::string colored = format_diff_table(d, {true});
  EXPECT_NE(colored.find("\033[31m"), std::string::npos);
  EXPECT_NE(colored.find("\033[32m"), std::string::npos);
  // From no traffic at all to some is an infinite increase (null in JSON).
  json quiet = old_doc;
  quiet["comm"]["p2p_bytes_per_iteration"] = 0;
  const Plan q = read(quiet, "quiet.json");
  const PlanDiff dq = diff_plans({&q, &a});
  EXPECT_TRUE(std::isinf(dq.traffic_increase_pct));
  EXPECT_TRUE(json::parse(format_diff_json(dq))["traffic_increase_pct"].is_null());
}

TEST(Diff, LayersOnlyInOnePlan) {
  json old_doc = plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 2);
  json new_doc = old_doc;
  rename_layer(new_doc, 0, 0, "embedding");
  const Plan a = read(old_doc, "old.json"), b = read(new_doc, "new.json");
  const PlanDiff d = diff_plans({&a, &b});
  ASSERT_EQ(d.moved_layers.size(), 2u);
  EXPECT_EQ(d.moved_layers[0].layer, "embedding");
  EXPECT_EQ(d.moved_layers[0].old_stage, -1);
  EXPECT_EQ(d.moved_layers[1].layer, "embed");
  EXPECT_EQ(d.moved_layers[1].new_stage, -1);
  const std::string table = format_diff_table(d, {});
  EXPECT_NE(table.find("  embedding  (absent)            -> stage 0 (device 0)\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("  embed      stage 0 (device 0)  -> (absent)\n"), std::string::npos);
}

TEST(Diff, ScaleRowsOnlyWhenAPlanAssumesAScale) {
  const json doc = plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 2);
  const Plan a = read(doc, "a.json");
  auto has_row = [](const PlanDiff& d, const std::string& key) {
    for (const DiffRow& r : d.rows) {
      if (r.key == key) return true;
    }
    return false;
  };
  const PlanDiff same = diff_plans({&a, &a});
  EXPECT_FALSE(has_row(same, "compute_scale"));
  EXPECT_FALSE(has_row(same, "link_scale"));
  // The same plan replayed with compute x3 (as diff --compute-scale 3 does): a compute row,
  // x1 against x3, no link row, a slower iteration and nothing moved.
  auto replayed = replay_plan({&a, nullptr, 3.0, 1.0});
  ASSERT_TRUE(replayed.ok()) << replayed.error().message;
  const PlanDiff d = diff_plans({&a, &replayed->figures});
  ASSERT_TRUE(has_row(d, "compute_scale"));
  EXPECT_FALSE(has_row(d, "link_scale"));
  EXPECT_EQ(row(d, "compute_scale").old_text, "x1");
  EXPECT_EQ(row(d, "compute_scale").new_text, "x3");
  EXPECT_EQ(row(d, "compute_scale").change, Change::changed);
  EXPECT_EQ(row(d, "iteration_s").change, Change::worse);
  EXPECT_TRUE(d.moved_layers.empty());
  EXPECT_TRUE(d.changed_degrees.empty());
}

TEST(Diff, JsonForMachines) {
  const Plan a = read(plan_doc("sd2-unet-512", "dgx1-v100-32gb-1n"), "v100.json");
  const Plan b = read(plan_doc("sd2-unet-512", "atlas800-910a-1n"), "910a.json");
  const PlanDiff d = diff_plans({&a, &b});
  const json j = json::parse(format_diff_json(d));
  EXPECT_EQ(j["schema"], "pulse.plan-diff/v1");
  EXPECT_EQ(j["old"], "v100.json");
  EXPECT_EQ(j["moved_layers"].size(), d.moved_layers.size());
  EXPECT_EQ(j["rows"].size(), d.rows.size());
  for (const json& r : j["rows"]) {
    if (r["key"] == "iteration_s") {
      EXPECT_EQ(r["old"], a.predicted.iteration_s);
      EXPECT_EQ(r["section"], "time");
      EXPECT_EQ(r["change"], "worse");  // the 910A plan is slower (anchored 910A profile)
    }
    if (r["key"] == "cluster") {
      EXPECT_EQ(r["new"], "atlas800-910a-1n");
    }
  }
  EXPECT_NEAR(j["slowdown_pct"].get<double>(), d.slowdown_pct, 1e-9);
}

// Compute per sample from the stages alone: every op of a stage runs once per microbatch,
// so a pipeline computes sum over stages of (forward + backward) per microbatch.
double stage_compute_per_sample(const json& doc) {
  double per_microbatch = 0;
  for (const json& s : doc["stages"]) {
    per_microbatch += s["forward_s"].get<double>() + s["backward_s"].get<double>();
  }
  return per_microbatch / doc["parallelism"]["microbatch_size"].get<double>();
}

TEST(Diff, PerSampleRowsSayWhyAcrossMicrobatchSizes) {
  // SD2 at 512 on a V100 node (microbatch 4) and a 910A server (microbatch 2), the denoiser
  // alone (with the encoders in the step both keep microbatch 8): per-stage times do not
  // compare across microbatch sizes; device time per sample does.
  const json v100 = plan_doc("sd2-unet-512", "dgx1-v100-32gb-1n", {}, "cached");
  const json a910 = plan_doc("sd2-unet-512", "atlas800-910a-1n", {}, "cached");
  ASSERT_NE(v100["parallelism"]["microbatch_size"], a910["parallelism"]["microbatch_size"]);
  const Plan a = read(v100, "v100.json"), b = read(a910, "910a.json");
  const PlanDiff d = diff_plans({&a, &b});
  for (const auto& [doc, side] : {std::pair{&v100, 0}, std::pair{&a910, 1}}) {
    const auto value = [&, side = side](const std::string& key) {
      const DiffRow& r = row(d, key);
      return side == 0 ? *r.old_value : *r.new_value;
    };
    const json& pl = (*doc)["parallelism"];
    // Device time per sample is devices used over samples/s, and its parts add up to it.
    EXPECT_NEAR(value("device_time_s"),
                pl["pp"].get<double>() * pl["dp"].get<double>() /
                    (*doc)["predicted"]["samples_per_s"].get<double>(),
                1e-12);
    EXPECT_NEAR(value("compute_s") + value("send_s") + value("idle_s") + value("allreduce_s"),
                value("device_time_s"), 1e-6 * value("device_time_s"));
    EXPECT_NEAR(value("compute_s"), stage_compute_per_sample(*doc), 1e-6 * value("compute_s"));
  }
  // The 910A plan is slower because its devices compute each sample more slowly.
  EXPECT_GT(d.slowdown_pct, 0);
  EXPECT_EQ(row(d, "compute_s").change, Change::worse);
  EXPECT_EQ(
      d.headline.rfind(
          "910a.json is " + fmt::format("{:.1f}", d.slowdown_pct) + "% slower than v100.json (", 0),
      0u)
      << d.headline;
  EXPECT_NE(d.headline.find("device time per sample "), std::string::npos) << d.headline;
  EXPECT_NE(d.headline.find(": compute +"), std::string::npos) << d.headline;  // largest first
  // The link classes each plan sends over, at their bytes over their link time.
  EXPECT_EQ(row(d, "link_bandwidth.NV2").new_text, "-");
  EXPECT_EQ(row(d, "link_bandwidth.HCCS").old_text, "-");
}

TEST(Diff, JsonCountsAreIntegersAndDeltasNumbers) {
  const Plan a = read(plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 2), "a.json");
  const Plan b = read(plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 4), "b.json");
  const json j = json::parse(format_diff_json(diff_plans({&a, &b})));
  for (const json& r : j["rows"]) {
    if (r["key"] == "pp") {
      EXPECT_TRUE(r["old"].is_number_integer()) << r;
      EXPECT_EQ(r["delta_value"], 2) << r;
    }
    if (r["key"] == "p2p_bytes") {
      EXPECT_TRUE(r["new"].is_number_integer()) << r;
    }
    if (r["key"] == "iteration_s") {
      const double x = r["old"], y = r["new"];
      EXPECT_NEAR(r["delta_value"].get<double>(), 100 * (y - x) / x, 1e-9) << r;
    }
    if (r["change"] == "same") {
      EXPECT_TRUE(r["delta_value"].is_null()) << r;
    }
  }
}

TEST(Diff, MarkdownEscapesNamesAndFoldsTheFullTable) {
  json a = plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 2);
  json b = plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 4);
  rename_layer(b, 0, 0, "a|b_c*<x>");
  const Plan pa = read(a, "a.json"), pb = read(b, "b.json");
  const PlanDiff d = diff_plans({&pa, &pb});
  const std::string md = format_diff_markdown(d);
  EXPECT_EQ(md.rfind("**b.json is ", 0), 0u) << md;
  EXPECT_NE(md.find("a\\|b\\_c\\*\\<x>"), std::string::npos) << md;
  EXPECT_EQ(md.find("a|b"), std::string::npos) << md;
  EXPECT_NE(md.find(fmt::format("<details><summary>All {} rows</summary>", d.rows.size())),
            std::string::npos);
  // The first table holds only the rows that changed.
  const std::string changed = md.substr(0, md.find("<details>"));
  EXPECT_EQ(changed.find("| model |"), std::string::npos);
  EXPECT_NE(md.find("| model | tiny-unet | tiny-unet |  |"), std::string::npos);
}

// The SVG element with this id, start tag to end tag.
std::string svg_with_id(const std::string& html, const std::string& id) {
  const auto start = html.find("<svg id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</svg>", start) + 6 - start);
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The smallest x and the largest x + width of the op rectangles of a timeline.
std::pair<double, double> op_extent(const std::string& svg) {
  const std::regex rect(
      R"re(<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)" height="26" fill=)re");
  double lo = 1e9, hi = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), rect); it != std::sregex_iterator();
       ++it) {
    const double x = std::stod((*it)[1]), w = std::stod((*it)[2]);
    lo = std::min(lo, x);
    hi = std::max(hi, x + w);
  }
  return {lo, hi};
}

double makespan(const Plan& p) {
  double end = 0;
  for (const auto& ops : p.schedule) {
    for (const PlanOp& o : ops) end = std::max(end, o.end_s);
  }
  return end;
}

TEST(DiffHtml, TwoPlansSideBySideOnOneScale) {
  json doc910 = plan_doc("sd2-unet-512", "atlas800-910a-1n");
  doc910["stages"][0]["layers"][0] = "time<embedding>&";  // escaped on the page
  const Plan a = read(plan_doc("sd2-unet-512", "dgx1-v100-32gb-1n"), "v100.json");
  const Plan b = read(doc910, "910a.json");
  const PlanDiff d = diff_plans({&a, &b});
  const std::string html = format_diff_html(d, a, b);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>\n", 0), 0u);
  EXPECT_EQ(html.substr(html.size() - 8), "</html>\n");
  for (const char* external : {"<script", "src=", "href=", "url(", "@import", "<link"}) {
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  }
  EXPECT_NE(html.find("time&lt;embedding&gt;&amp;"), std::string::npos);
  EXPECT_EQ(html.find("time<embedding>"), std::string::npos);

  // Both timelines, every op of each plan in its own.
  const std::string left = svg_with_id(html, "timeline-old");
  const std::string right = svg_with_id(html, "timeline-new");
  EXPECT_EQ(occurrences(left, "<title>F stage") + occurrences(left, "<title>B stage"), a.num_ops());
  EXPECT_EQ(occurrences(right, "<title>F stage") + occurrences(right, "<title>B stage"),
            b.num_ops());
  // One time scale: both start at the same x, and each spans its makespan over the longer.
  const auto [left_lo, left_hi] = op_extent(left);
  const auto [right_lo, right_hi] = op_extent(right);
  EXPECT_NEAR(left_lo, right_lo, 0.01);
  EXPECT_NEAR((right_hi - right_lo) / (left_hi - left_lo), makespan(b) / makespan(a), 1e-3);
  // The makespans differ by more than 10% either way, so the check above has something to check.
  EXPECT_GT(std::abs(makespan(b) / makespan(a) - 1), 0.1);

  // Traffic by link class: NV2 on the V100 and HCCS on the 910A, each class one colour and a
  // bar in both halves (0 B where the plan does not use it).
  const std::regex link(
      R"re(fill="(#[0-9a-f]{6})" class="link"><title>(\w+): ([^<]+) per iteration)re");
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> bars;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), link); it != std::sregex_iterator();
       ++it) {
    bars[(*it)[2]].emplace_back((*it)[1], (*it)[3]);
  }
  ASSERT_EQ(bars.size(), 2u);
  for (const auto& [name, seen] : bars) {
    ASSERT_EQ(seen.size(), 2u) << name;
    EXPECT_EQ(seen[0].first, seen[1].first) << name;
  }
  EXPECT_EQ(bars["NV2"][1].second, "0 B");
  EXPECT_EQ(bars["HCCS"][0].second, "0 B");
  EXPECT_NE(bars["HCCS"][1].second, "0 B");

  // Memory on one scale: the capacity lanes of both halves are equally long.
  const std::regex lane(R"re(y="[0-9.]+" width="([0-9.]+)" height="26" class="capacity")re");
  std::set<std::string> widths;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), lane); it != std::sregex_iterator();
       ++it) {
    widths.insert((*it)[1]);
  }
  EXPECT_EQ(widths.size(), 1u);

  // Every row of the diff, coloured by its change; the moved layers.
  EXPECT_EQ(occurrences(html, "<tr class=\"") - occurrences(html, "<tr class=\"section\">"),
            d.rows.size());
  int worse = 0;
  for (const DiffRow& r : d.rows) worse += r.change == Change::worse ? 1 : 0;
  EXPECT_EQ(occurrences(html, "<tr class=\"worse\">"), static_cast<std::size_t>(worse));
  EXPECT_NE(html.find(fmt::format("{} of 47 layers moved", d.moved_layers.size())),
            std::string::npos);
  EXPECT_NE(html.find("910a.json predicts "), std::string::npos);
}

TEST(DiffInputs, PlansOfOneProfileWithOtherContentsAreShownAsRecalibrated) {
  const json doc = plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 2);
  const Plan a = read(doc, "a.json");
  json changed = doc;
  changed["inputs"]["model"]["sha256"] = std::string(64, '0');
  const Plan b = read(changed, "b.json");
  const std::string hash = doc["inputs"]["model"]["sha256"].get<std::string>().substr(0, 12);
  // A pull request that recalibrates a profile: not refused, shown.
  EXPECT_TRUE(check_inputs_agree(a, b).ok());
  const PlanDiff d = diff_plans({&a, &b});
  EXPECT_EQ(row(d, "model_sha256").new_text, "000000000000");
  EXPECT_NE(d.headline.find("; model profile tiny-unet recalibrated (sha256 " + hash +
                            " -> 000000000000)"),
            std::string::npos)
      << d.headline;
  // Plans of one profile show no hash rows and no recalibration.
  const PlanDiff same = diff_plans({&a, &a});
  for (const DiffRow& r : same.rows) EXPECT_NE(r.key, "model_sha256");
  EXPECT_EQ(same.headline.find("recalibrated"), std::string::npos);
}

TEST(DiffInputs, TheSameBytesUnderTwoNamesAreRefusedAlways) {
  const json doc = plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 2);
  const Plan a = read(doc, "a.json");
  json renamed = doc;
  renamed["inputs"]["cluster"]["name"] = "other";
  const Plan b = read(renamed, "b.json");
  const Status refused = check_inputs_agree(a, b);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message.rfind("diff: a.json and b.json give their cluster profiles "
                                          "the same sha256 (",
                                          0),
            0u)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("(\"dgx1-v100-32gb-1n\", analytic and \"other\", "
                                         "analytic): the same bytes cannot be both, so one "
                                         "plan's inputs were edited"),
            std::string::npos)
      << refused.error().message;
}

TEST(DiffInputs, DifferentProfilesAreSimplyDifferent) {
  // The typical diff: one model on two clusters.
  const Plan a = read(plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 2), "a.json");
  const Plan b = read(plan_doc("tiny-unet", "atlas800-910a-1n", 2), "b.json");
  EXPECT_TRUE(check_inputs_agree(a, b).ok());
}

// Names from the plans reach the table, the JSON and the page printable: no raw control byte.
TEST(Diff, ControlBytesInNamesAreSpelledOut) {
  json a = plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 2);
  json b = plan_doc("tiny-unet", "dgx1-v100-32gb-1n", 4);
  for (json* doc : {&a, &b}) {
    const char name[] = "em\0bed\x1b]0;x\x07";
    rename_layer(*doc, 0, 0, std::string(name, sizeof name - 1));
    (*doc)["inputs"]["model"]["name"] = std::string("tiny\x7f\0", 6);
  }
  const Plan pa = read(a, "a.json"), pb = read(b, "b\x1b.json");
  const PlanDiff d = diff_plans({&pa, &pb});
  const std::string table = format_diff_table(d, {true});
  const std::string js = format_diff_json(d);
  const std::string page = format_diff_html(d, pa, pb);
  EXPECT_NE(table.find("em\\x00bed\\x1b]0;x\\x07"), std::string::npos) << table;
  EXPECT_NE(table.find("b\\x1b.json"), std::string::npos);
  EXPECT_NE(js.find("em\\\\x00bed\\\\x1b]0;x\\\\x07"), std::string::npos) << js;
  for (const std::string* out : {&js, &page}) {
    for (char c : *out) {
      const unsigned char u = static_cast<unsigned char>(c);
      EXPECT_FALSE((u < 0x20 && c != '\n') || u == 0x7f) << "raw byte " << int(u);
    }
  }
  // The table's own colours are the only escapes in it.
  std::string plain = table;
  for (const char* sgr : {"\033[1m", "\033[0m", "\033[32m", "\033[31m", "\033[33m"}) {
    for (auto at = plain.find(sgr); at != std::string::npos; at = plain.find(sgr)) {
      plain.erase(at, std::string(sgr).size());
    }
  }
  EXPECT_EQ(plain.find('\033'), std::string::npos);
}
}  // namespace
}  // namespace pulse
