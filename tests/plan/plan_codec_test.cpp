// The plan codec: one key list drives the writer, the reader and the schema. A plan written,
// read and written again is the same bytes, whatever sections it has; every key the writer
// emits is in the key list; the schema describes exactly the key list, with the same types
// and the same required keys.
#include "pulse/plan/plan_codec.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "plan/plan_codec_internal.hpp"
#include "pulse/compile/compile.hpp"
#include "pulse/compile/plan_builder.hpp"
#include "pulse/compile/plan_job.hpp"
#include "pulse/profile/scaling.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

using nlohmann::json;

std::string round_trip(const std::string& text) {
  auto plan = parse_plan(text, "p.json");
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
  return plan.ok() ? write_plan(*plan) : "";
}

// Plans with every section the writer has: tuned (search), fixed, V and chain, split
// backward, data parallel (all-reduce figures), carried tensors, relayed and direct skips.
std::vector<std::string> planned() {
  std::vector<std::string> out;
  struct Case {
    const char* model;
    const char* cluster;
    Strategy strategy;
    std::optional<int> pp;
    bool split;
    std::optional<int> dp = std::nullopt;
    std::optional<std::string> family = std::nullopt;
  };
  const Case cases[] = {
      {"tiny-unet", "dgx1-v100-32gb-1n", Strategy::pulse, std::nullopt, false},
      {"sd2-unet-512", "dgx1-v100-32gb-2n", Strategy::pulse, 4, true},
      {"sd2-unet-512", "atlas800-910a-1n", Strategy::one_f_one_b, 4, false, 1},  // unused ranks
      {"uvit-l2-256", "dgx1-v100-32gb-1n", Strategy::one_f_one_b_direct, 2, true},
      {"tiny-unet", "dgx1-v100-32gb-2n", Strategy::gpipe, std::nullopt, false},
      {"sd2-unet-512", "dgx1-v100-32gb-1n", Strategy::pulse, 8, false},  // w3 needs more layers
      {"tiny-unet", "dgx1-v100-32gb-1n", Strategy::pulse, 2, false, std::nullopt, "v"},
      {"tiny-unet", "dgx-h100-1n", Strategy::pulse, 2, false},  // times derived from the V100
  };
  for (const Case& c : cases) {
    const test::Inputs in = test::shipped(c.model, c.cluster);
    PlanOptions o;
    o.strategy = c.strategy;
    o.pp = c.pp;
    o.split_backward = c.split;
    o.dp = c.dp;
    o.family = c.family;
    o.solver_max_seconds = 0.3;
    out.push_back(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  }
  {  // --sequence 1x4 --pp 1 --zero 2 --recompute full: parallelism.sequence,
     // rank_map.sequence_groups, alternatives[].sequence, pipeline_or_not.layout(_note).
    const test::Inputs in = test::shipped("video/open-sora-2.0-11b-129x768x768", "dgx-h100-1n");
    PlanOptions o;
    o.pp = 1;
    o.recompute = "full";
    o.sequence = {1, 4};
    o.memory.sequence_degree = 4;
    o.memory.zero_stage = 2;
    o.sequence_fixed = true;
    o.solver_max_seconds = 0.3;
    out.push_back(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  }
  {  // --buckets: the buckets section, its candidates and rows.
    const std::string path = ::testing::TempDir() + "codec-buckets.json";
    std::ofstream(path) << R"({"schema": "pulse.buckets/v1", "name": "two", "source": "test",
        "share_of": "steps", "profile_shape": {"tokens": 4096},
        "buckets": [{"tokens": 4096, "share": 1}, {"name": "small", "tokens": 1024, "share": 3}]})";
    PlanJob job;
    job.model_path = test::profile_path("models/tiny-unet.json");
    job.cluster_path = test::profile_path("clusters/dgx1-v100-32gb-1n.json");
    job.buckets_path = path;
    job.write = false;
    job.options.solver_max_seconds = 0.3;
    const PlanRun run = run_plan_job(job);
    EXPECT_TRUE(run.ok()) << run.errors.front().message;
    out.push_back(run.text);
  }
  {  // --cuts: options.cuts.
    const test::Inputs in = test::shipped("tiny-unet", "dgx1-v100-32gb-1n");
    PlanOptions o;
    o.cuts = {"enc1", "mid0", "dec2", "dec0"};
    o.solver_max_seconds = 0.3;
    out.push_back(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  }
  {  // --compute-scale range-high --link-scale 0.5: the scale keys of options and cost_model.
    const test::Inputs in = test::shipped("sd2-unet-512", "atlas800-910a-1n");
    PlanOptions o;
    o.pp = 4;
    o.solver_max_seconds = 0.3;
    o.scales = *parse_compute_scale("range-high");
    o.scales.links = 0.5;
    out.push_back(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  }
  {  // Recomputation, ZeRO-3, a warning (bubble above 50%) and a sharded answer that cannot
     // be (a global batch of 4 over 8 devices).
    const test::Inputs in = test::shipped("sd2-unet-512", "dgx1-v100-32gb-1n");
    PlanOptions o;
    o.pp = 4;
    o.dp = 1;
    o.global_batch = 4;
    o.recompute = "full";
    o.memory.zero_stage = 3;
    o.activation_budget_bytes = std::int64_t{48} << 20;
    o.solver_max_seconds = 0.3;
    out.push_back(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  }
  {  // --recompute auto: recompute_search, stages[].recomputed; a mode not planned (the
     // model's attention renamed, so selective selects nothing): modes[].reason.
    test::Inputs in = test::shipped("tiny-unet", "atlas800-910a-1n");
    for (Layer& l : in.model.layers) {
      if (l.kind == "attention") l.kind = "conv";
    }
    PlanOptions o;
    o.pp = 2;
    o.recompute = "auto";
    o.solver_max_seconds = 0.3;
    out.push_back(test::plan_text(test::compile_ok(in, o), in.model, in.cluster));
  }
  {  // pp open where sharded data parallelism wins: search[].zero_stage.
    const test::Inputs in = test::shipped("hunyuan-dit-g2-1024", "dgx-a100-1n");
    PlanOptions o;
    o.solver_max_seconds = 0.3;
    const CompiledPlan p = test::compile_ok(in, o);
    EXPECT_EQ(p.pipeline_or_not->verdict, "sharded data parallel");
    out.push_back(test::plan_text(p, in.model, in.cluster));
  }
  return out;
}

// "$.stages[].layers[]" for every key of a written plan; map entries become ".*".
void written_paths(const json& v, const std::string& path, const std::set<std::string>& maps,
                   std::set<std::string>& out) {
  if (v.is_object()) {
    const bool map = maps.count(path) > 0;
    for (const auto& [key, value] : v.items()) {
      const std::string at = path + "." + (map ? "*" : key);
      out.insert(at);
      written_paths(value, at, maps, out);
    }
  } else if (v.is_array()) {
    for (const json& e : v) {
      out.insert(path + "[]");
      written_paths(e, path + "[]", maps, out);
    }
  }
}

TEST(PlanCodec, WriteReadWriteGivesTheSameBytes) {
  for (const std::string& text : planned()) {
    EXPECT_EQ(round_trip(text), text);
  }
}

// The layout plans are written in, printed from a tree: nlohmann's dump(2) (indentation,
// empty lists and objects, numbers, strings escaped or replaced) but for the schedule's
// ops ($.schedule[].ops[]), each an object on one line with its members separated by ", ".
using ojson = nlohmann::ordered_json;
void print_tree(const ojson& v, int level, const std::string& path, std::string& out) {
  const auto scalar = [](const ojson& x) {
    return x.dump(-1, ' ', false, ojson::error_handler_t::replace);
  };
  const std::string indent(2 * static_cast<std::size_t>(level + 1), ' ');
  const std::string close(2 * static_cast<std::size_t>(level), ' ');
  if (v.is_object() && path == "$.schedule[].ops[]") {
    std::vector<std::string> members;
    for (const auto& [key, x] : v.items()) members.push_back(scalar(key) + ": " + scalar(x));
    out += "{" + fmt::format("{}", fmt::join(members, ", ")) + "}";
  } else if (v.is_object() && !v.empty()) {
    out += "{";
    bool first = true;
    for (const auto& [key, x] : v.items()) {
      out += (first ? "\n" : ",\n") + indent + scalar(key) + ": ";
      first = false;
      print_tree(x, level + 1, path + "." + key, out);
    }
    out += "\n" + close + "}";
  } else if (v.is_array() && !v.empty()) {
    out += "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
      out += (i == 0 ? "\n" : ",\n") + indent;
      print_tree(v[i], level + 1, path + "[]", out);
    }
    out += "\n" + close + "]";
  } else {
    out += scalar(v);  // a scalar, [] or {}
  }
}

std::string layout_of(const std::string& text) {
  std::string out;
  print_tree(ojson::parse(text), 0, "$", out);
  return out + "\n";
}

// The writer writes the text as it walks the keys, with no tree; its bytes are those
// layout_of prints from the same keys as an ordered tree.
TEST(PlanCodec, WritesTheBytesATreePrints) {
  const std::vector<std::string> texts = planned();
  for (const std::string& text : texts) EXPECT_EQ(text, layout_of(text));
  // Outside the ops, nlohmann's dump(2) of the same tree, as plans have always been.
  for (const std::string& text : texts) {
    ojson tree = ojson::parse(text);
    for (ojson& d : tree["schedule"]) d["ops"] = ojson::array();
    EXPECT_EQ(layout_of(tree.dump()),
              tree.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n");
  }
  auto plan = parse_plan(texts.front(), "p.json");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  plan->warnings = {"a \"quote\" and a \\", "tab\tnew line\n\x01", "\u00e9 \u6f22",
                    "bad \xff\xfe UTF-8", ""};
  const std::string text = write_plan(*plan);
  EXPECT_EQ(text, layout_of(text));
  EXPECT_NE(text.find(R"("a \"quote\" and a \\")"), std::string::npos);
  EXPECT_NE(text.find(R"("tab\tnew line\n\u0001")"), std::string::npos);
  EXPECT_NE(text.find("\"bad \xef\xbf\xbd\xef\xbf\xbd UTF-8\""), std::string::npos);
  // An op is one line: the first of device 0's as written.
  const PlanOp& op = plan->schedule[0][0];
  EXPECT_NE(text.find(fmt::format("\n        {{\"op\": \"F\", \"stage\": {}, \"mb\": 0, "
                                  "\"start_s\": ",
                                  op.op.stage)),
            std::string::npos);
}

// An op's line written directly (PlanWriter::op_line) is the one the keys write a member at
// a time (op_keys through line_object_text): every kind, indices up to the limits, times
// whole, tiny, huge, between the time quantum's ticks and on them, with digits that print
// fixed and in exponent form. A time that is not finite is left to the generic path.
TEST(PlanCodec, AnOpLineWrittenDirectlyIsTheKeysLine) {
  const std::vector<double> times{0.0,           1.0,       0.5,     3.6e-05,   0.0001184,
                                  1.23456789e-7, 1e-12,     2.5e-9,  123456.75, 1e6,
                                  98765.4321,    0.1 + 0.2, 1.0 / 3, 7e-10,     0.000012345678901};
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> scale(-12, 6);
  std::vector<double> all = times;
  for (int k = 0; k < 300; ++k) all.push_back(std::pow(10.0, scale(rng)) * (1 + k % 7 / 9.0));
  int compared = 0;
  for (OpKind kind :
       {OpKind::forward, OpKind::backward, OpKind::backward_input, OpKind::backward_weight}) {
    for (std::size_t k = 0; k < all.size(); ++k) {
      PlanOp op;
      op.op = {kind, static_cast<StageId>(k % 3 == 0 ? 4095 : k), static_cast<int>(k * 37 % 65535)};
      op.start_s = all[k];
      op.end_s = all[(k * 11 + 5) % all.size()];
      detail::PlanText direct, keys;
      ASSERT_TRUE(detail::PlanWriter::op_line(direct, op));
      detail::PlanWriter::line_object_text(
          keys, [&](detail::PlanWriter& io) { detail::op_keys(io, op); });
      ASSERT_EQ(direct.text, keys.text) << "time " << op.start_s;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 4 * 315);
  PlanOp endless;
  endless.end_s = std::numeric_limits<double>::infinity();
  detail::PlanText none;
  EXPECT_FALSE(detail::PlanWriter::op_line(none, endless));
  EXPECT_TRUE(none.text.empty());
}

TEST(PlanCodec, EveryKeyTheWriterEmitsIsInTheKeyList) {
  std::set<std::string> listed, required, maps;
  for (const PlanKey& k : plan_keys()) {
    listed.insert(k.path);
    if (k.required) required.insert(k.path);
    if (k.path.size() > 2 && k.path.substr(k.path.size() - 2) == ".*") {
      maps.insert(k.path.substr(0, k.path.size() - 2));
    }
  }
  std::set<std::string> seen_anywhere;
  for (const std::string& text : planned()) {
    std::set<std::string> written;
    written_paths(json::parse(text), "$", maps, written);
    for (const std::string& p : written) EXPECT_TRUE(listed.count(p)) << p;
    // A required key of a section that is present appears whenever its parent does.
    for (const std::string& r : required) {
      const std::string parent = r.substr(0, r.find_last_of('.'));
      if (parent == "$" || written.count(parent)) {
        EXPECT_TRUE(written.count(r)) << r;
      }
    }
    seen_anywhere.insert(written.begin(), written.end());
  }
  // The test plans exercise every key but those only hand-written plans or failures use.
  for (const std::string& p : listed) {
    if (p == "$.search[].reason" || p == "$.carried[].producer") continue;
    // A frozen placement refused, a sharded row whose encoders do not fit: failures only.
    if (p == "$.frozen.placements[].reason" || p == "$.pipeline_or_not.sharded[].frozen_reason") {
      continue;
    }
    EXPECT_TRUE(seen_anywhere.count(p)) << "no test plan writes " << p;
  }
}

// The schema as (path -> type, required) in the key list's notation.
struct SchemaKey {
  std::string type;
  bool required = false;
};

std::string schema_type(const json& node) {
  if (node.contains("type")) {
    if (node["type"].is_array()) {
      std::vector<std::string> types;
      for (const json& x : node["type"]) types.push_back(x.get<std::string>());
      return fmt::format("{}", fmt::join(types, "|"));
    }
    return node["type"];
  }
  if (node.contains("enum") || node.contains("const")) return "string";
  return "?";
}

void flatten(const json& node, const std::string& path, bool required,
             std::map<std::string, SchemaKey>& out) {
  out[path] = {schema_type(node), required};
  std::set<std::string> req;
  if (node.contains("required")) {
    for (const json& r : node["required"]) req.insert(r.get<std::string>());
  }
  if (node.contains("properties")) {
    for (const auto& [key, child] : node["properties"].items()) {
      flatten(child, path + "." + key, req.count(key) > 0, out);
    }
  }
  if (node.contains("items")) flatten(node["items"], path + "[]", false, out);
  if (node.contains("additionalProperties") && node["additionalProperties"].is_object()) {
    flatten(node["additionalProperties"], path + ".*", false, out);
  }
}

// Every disagreement between the key list and a schema, one line each.
std::vector<std::string> disagreements(const json& schema) {
  std::map<std::string, SchemaKey> described;
  flatten(schema, "$", true, described);
  described.erase("$");
  std::vector<std::string> out;
  std::set<std::string> listed;
  for (const PlanKey& k : plan_keys()) {
    listed.insert(k.path);
    const auto it = described.find(k.path);
    if (it == described.end()) {
      out.push_back(k.path + ": written but not in the schema");
      continue;
    }
    if (it->second.type != k.type) {
      out.push_back(k.path + ": schema type " + it->second.type + ", written as " + k.type);
    }
    // Items of an array and map entries have no "required" of their own.
    const bool element = k.path.back() == ']' || k.path.back() == '*';
    if (!element && it->second.required != k.required) {
      out.push_back(k.path + (k.required ? ": the reader requires it, the schema does not"
                                         : ": the schema requires it, the reader does not"));
    }
  }
  for (const auto& [path, key] : described) {
    if (!listed.count(path)) out.push_back(path + ": in the schema but not a key of the codec");
  }
  return out;
}

json shipped_schema() {
  std::ifstream in(test::source_dir() + "/schema/plan.schema.json");
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

TEST(PlanCodec, TheSchemaDescribesExactlyTheKeyList) {
  EXPECT_EQ(disagreements(shipped_schema()), std::vector<std::string>{});
}

TEST(PlanCodec, ASchemaThatDivergesIsCaught) {
  // The check itself can fail: a key the schema forgets, a type it gets wrong, a key it
  // invents, and a required key it makes optional.
  json schema = shipped_schema();
  schema["properties"]["solver"]["properties"].erase("milp_nodes");
  schema["properties"]["parallelism"]["properties"]["pp"]["type"] = "number";
  schema["properties"]["stages"]["items"]["properties"]["colour"] = {{"type", "string"}};
  schema["properties"]["comm"]["required"] = json::array({"p2p_bytes_per_iteration"});
  EXPECT_EQ(disagreements(schema),
            (std::vector<std::string>{
                "$.parallelism.pp: schema type number, written as integer",
                "$.solver.milp_nodes: written but not in the schema",
                "$.comm.skip_bytes_per_iteration: the reader requires it, the schema does not",
                "$.stages[].colour: in the schema but not a key of the codec"}));
}

}  // namespace
}  // namespace pulse
