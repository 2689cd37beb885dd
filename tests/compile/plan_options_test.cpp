#include "pulse/compile/plan_options.hpp"

#include <gtest/gtest.h>

#include <set>

#include "pulse/base/defaults.hpp"
#include "pulse/base/limits.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

// The model and cluster every job needs, then `more`.
std::vector<GivenOption> with_files(std::vector<GivenOption> more) {
  std::vector<GivenOption> given = {{"model", std::string("m.json")},
                                    {"cluster", std::string("c.json")}};
  given.insert(given.end(), more.begin(), more.end());
  return given;
}

// The message of checking the options `given` describe ("" when they pass), or of reading
// them when that fails first.
std::string message_of(std::vector<GivenOption> given) {
  auto job = read_plan_job(with_files(std::move(given)));
  if (!job) return "read: " + job.error().message;
  const Status checked = check_plan_options(job->options);
  return checked ? "" : checked.error().message;
}

TEST(PlanOptions, TheTableDefaultsAreThePlanOptionsDefaults) {
  auto job = read_plan_job(with_files({}));
  ASSERT_TRUE(job.ok()) << job.error().message;
  const PlanOptions& read = job->options;
  const PlanOptions plain;
  EXPECT_EQ(read.strategy, plain.strategy);
  EXPECT_EQ(read.family, plain.family);
  EXPECT_EQ(read.pp, plain.pp);
  EXPECT_EQ(read.dp, plain.dp);
  EXPECT_EQ(read.microbatch_size, plain.microbatch_size);
  EXPECT_EQ(read.global_batch, plain.global_batch);
  EXPECT_EQ(read.memory.zero_stage, plain.memory.zero_stage);
  EXPECT_EQ(read.split_backward, plain.split_backward);
  EXPECT_EQ(read.activation_budget_bytes, plain.activation_budget_bytes);
  EXPECT_EQ(read.activation_budget_fraction, plain.activation_budget_fraction);
  EXPECT_EQ(read.solver_max_nodes, kDefaultSolverNodes);
  EXPECT_EQ(read.solver_max_nodes, plain.solver_max_nodes);
  EXPECT_EQ(read.solver_max_seconds, plain.solver_max_seconds);
  EXPECT_EQ(read.tuner_top_k, plain.tuner_top_k);
  EXPECT_TRUE(read.scales.identity());
  EXPECT_EQ(job->model_path, "m.json");
  EXPECT_EQ(job->cluster_path, "c.json");
  EXPECT_FALSE(job->output_path);
  EXPECT_FALSE(job->trace_path);
  EXPECT_TRUE(check_plan_options(read).ok());
}

TEST(PlanOptions, EveryRecordIsNamedOnceWithHelp) {
  std::set<std::string> names;
  for (const OptionRecord& r : plan_option_table()) {
    EXPECT_TRUE(names.insert(r.long_name()).second) << r.name;
    EXPECT_FALSE(r.help.empty()) << r.name;
    EXPECT_NE(r.read, nullptr) << r.name;
    // A bounded option is held to its bounds by its check.
    if (r.least || r.most) {
      EXPECT_NE(r.check, nullptr) << r.name;
    }
    EXPECT_EQ(r.kind == OptionKind::flag, std::string(r.value_name).empty()) << r.name;
  }
  EXPECT_EQ(names.count("pp"), 1u);
  EXPECT_EQ(names.count("output"), 1u);  // "output,o"
}

TEST(PlanOptions, ARequiredFileAbsentIsAUsageError) {
  auto job = read_plan_job({{"cluster", std::string("c.json")}});
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().kind, ErrorKind::usage);
  EXPECT_EQ(job.error().message, "plan: --model FILE is required (see pulse-plan plan --help)");
}

TEST(PlanOptions, EachBoundAndCheckSaysWhatWasExpected) {
  EXPECT_EQ(message_of({{"pp", 0}}), "plan: --pp must be at least 1, got 0");
  EXPECT_EQ(message_of({{"pp", kMaxPipelineDegree + 1}}),
            "plan: --pp 1025 is above pulse-plan's limit of 1024");
  EXPECT_EQ(message_of({{"pp", kMaxPipelineDegree}}), "");
  EXPECT_EQ(message_of({{"dp", 0}}), "plan: --dp must be at least 1, got 0");
  EXPECT_EQ(message_of({{"microbatch-size", -3}}),
            "plan: --microbatch-size must be at least 1, got -3");
  EXPECT_EQ(message_of({{"global-batch", kMaxGlobalBatch + 1}}),
            "plan: --global-batch 16777217 is above pulse-plan's limit of 16777216 samples");
  EXPECT_EQ(message_of({{"zero", 4}}), "plan: --zero must be 0, 1, 2 or 3, got 4");
  EXPECT_EQ(message_of({{"zero", -1}}), "plan: --zero must be 0, 1, 2 or 3, got -1");
  EXPECT_EQ(message_of({{"zero", 3}}), "");
  EXPECT_EQ(message_of({{"precision", std::string("fp8")}}),
            "read: plan: --precision must be mixed (or bf16-mixed), fp16-mixed, bf16, fp32 or "
            "fp64, got \"fp8\"");
  EXPECT_EQ(message_of({{"precision", std::string("bf16")}}), "");
  EXPECT_EQ(message_of({{"recompute", std::string("some")}}),
            "plan: --recompute must be none, selective, full or auto, got \"some\"");
  EXPECT_EQ(message_of({{"recompute", std::string("selective")}}), "");
  EXPECT_EQ(message_of({{"solver-nodes", -1}}), "plan: --solver-nodes must be at least 0, got -1");
  EXPECT_EQ(message_of({{"solver-time-limit", 86400.5}}),
            "plan: --solver-time-limit 86400.5 is above pulse-plan's limit of 86400 seconds");
  EXPECT_EQ(message_of({{"solver-time-limit", 0.0}}), "");
  EXPECT_EQ(message_of({{"strategy", std::string("gpipe")}, {"family", std::string("v")}}),
            "plan: --family applies to --strategy pulse, not gpipe");
  EXPECT_EQ(message_of({{"family", std::string("w9")}}),
            "plan: --family w9 is not a family of strategy pulse (families: v, v-released, w2, "
            "w2-released, w3, w3-released, chain, chain-relayed, v-naive, 1f1b, 1f1b-direct, "
            "gpipe)");
  EXPECT_EQ(message_of({{"link-scale", std::string("2000")}}),
            "plan: --link-scale must be from 0.001 to 1000 (the what-if factor limit), got 2000");
  EXPECT_EQ(message_of({{"strategy", std::string("pipedream")}}),
            "read: plan: --strategy must be one of pulse, v-naive, 1f1b, 1f1b-direct, gpipe "
            "(sequential means 1f1b), got \"pipedream\"");
}

TEST(PlanOptions, TextValuesAreParsedOnce) {
  auto job = read_plan_job(with_files({{"activation-budget", std::string("8GiB")},
                                       {"compute-scale", std::string("range-low")},
                                       {"link-scale", std::string("0.5")},
                                       {"exhaustive", true},
                                       {"output", std::string("-")}}));
  ASSERT_TRUE(job.ok()) << job.error().message;
  EXPECT_EQ(job->options.activation_budget_bytes, std::int64_t{8} << 30);
  EXPECT_FALSE(job->options.activation_budget_fraction);
  EXPECT_EQ(job->options.scales.compute_from, "range-low");
  EXPECT_EQ(job->options.scales.links, 0.5);
  EXPECT_EQ(job->options.tuner_top_k, 0);
  EXPECT_EQ(job->output_path, "-");
  // A fraction needs its decimal point: a bare 1 is one byte.
  job = read_plan_job(with_files({{"activation-budget", std::string("1")}}));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->options.activation_budget_bytes, 1);
  job = read_plan_job(with_files({{"activation-budget", std::string("1.0")}}));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->options.activation_budget_fraction, 1.0);
  EXPECT_EQ(message_of({{"activation-budget", std::string("2KB")}}),
            "read: plan: --activation-budget must be a byte count (such as 8589934592 or 8GiB) "
            "or a fraction of the device's usable memory in (0, 1] with a decimal point (such as "
            "0.5), got \"2KB\"");
}

// A library caller sets PlanOptions directly; the same checks hold it, in compile_plan.
TEST(PlanOptions, CompilePlanChecksWhatALibraryCallerSet) {
  const test::Inputs in = test::shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.activation_budget_bytes = 1 << 20;
  o.activation_budget_fraction = 0.5;
  auto r = compile_plan(in.model, in.cluster, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "plan: --activation-budget is a byte count or a fraction, not both");
  o = PlanOptions{};
  o.activation_budget_fraction = 1.5;
  r = compile_plan(in.model, in.cluster, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "plan: --activation-budget as a fraction must be in (0, 1], got 1.5");
  o = PlanOptions{};
  o.microbatch_size = 0;
  r = compile_plan(in.model, in.cluster, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::usage);
  EXPECT_EQ(r.error().message, "plan: --microbatch-size must be at least 1, got 0");
}

}  // namespace
}  // namespace pulse
