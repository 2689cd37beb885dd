// The tools' jobs called as a library caller calls them, no command line: each makes what
// the tool functions it calls make (replay, validate_plan, diff_plans, the exporters),
// writes it where the job says, and says what went wrong in the words the command line
// prints.

#include <gtest/gtest.h>

#include "pulse/plan/plan_codec.hpp"
#include "pulse/tools/diff_job.hpp"
#include "pulse/tools/export_job.hpp"
#include "pulse/tools/simulate_job.hpp"
#include "pulse/tools/simulation_report.hpp"
#include "pulse/tools/validate_job.hpp"
#include "support/temp_dir.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

std::string fixture(const std::string& name) {
  return test::source_dir() + "/tests/cli/fixtures/plans/" + name;
}

class ToolJobTest : public test::TempDirTest {};

TEST_F(ToolJobTest, SimulateWritesTheReportOfTheReplay) {
  SimulateJob job;
  job.plan_path = fixture("tiny-v100.plan.json");
  job.json = true;
  job.output_path = path("sim.json");
  job.check = true;
  const SimulateRun run = run_simulate_job(job);
  ASSERT_TRUE(run.ok()) << run.errors.front().message;
  EXPECT_EQ(run.exit_code(), 0);
  EXPECT_TRUE(run.differences.empty());  // an untouched plan replays to its own figures
  const Plan plan = load_plan(job.plan_path).value();
  const Replay by_hand = replay_plan({&plan}).value();
  const std::string text = read_plan_text(job.plan_path).value();
  EXPECT_EQ(run.report, simulation_report_json(job.plan_path, text, plan, by_hand, {}));
  EXPECT_EQ(get("sim.json"), run.report);
  EXPECT_TRUE(run.notes.empty());
}

TEST_F(ToolJobTest, SimulateCheckFailsWithItsNotesAndWritesNoFile) {
  SimulateJob job;
  job.plan_path = fixture("tiny-slow-transfer.plan.json");
  job.output_path = path("sim.txt");
  job.check = true;
  std::vector<std::string> streamed;
  job.on_note = [&](const std::string& note) { streamed.push_back(note); };
  const SimulateRun run = run_simulate_job(job);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run.exit_code(), 1);
  EXPECT_EQ(run.differences.size(), 7u);
  EXPECT_EQ(run.notes, (std::vector<std::string>{
                           job.plan_path +
                               ": the replay differs from the plan's predicted figures in 7 places",
                           "simulate: not written, as the command fails: " + path("sim.txt") +
                               " (run it without --check to write them)"}));
  EXPECT_EQ(streamed, run.notes);
  EXPECT_TRUE(entries().empty());
}

TEST_F(ToolJobTest, SimulateSaysWhyItCannotRead) {
  SimulateJob job;
  job.plan_path = path("no-such-plan.json");
  job.cluster_path = path("no-such-cluster.json");
  const SimulateRun run = run_simulate_job(job);
  // The plan's bytes come first: an unreadable plan ends the job before the cluster is read.
  ASSERT_EQ(run.errors.size(), 1u);
  EXPECT_EQ(run.errors[0].message, path("no-such-plan.json") +
                                       ": cannot open file for reading: No such file or directory");
  EXPECT_EQ(run.exit_code(), 2);
}

TEST_F(ToolJobTest, ValidateReportsTheVerdictWithoutWriting) {
  ValidateJob job;
  job.plan_path = fixture("tiny-v100.plan.json");
  job.model_path = fixture("tiny-unet.model.json");
  job.cluster_path = fixture("dgx1-v100.cluster.json");
  job.write = false;
  ValidateRun run = run_validate_job(job);
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run.result.ok());
  EXPECT_EQ(run.report, job.plan_path +
                            ": valid (tiny-unet on dgx1-v100-32gb-1n: pp 2 x dp 4, 4 stages, "
                            "ZeRO-0, 4 microbatches, 32 ops, 4/4 skips local)\n");
  job.plan_path = fixture("tiny-bad-degrees.plan.json");
  run = run_validate_job(job);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run.exit_code(), 1);
  ASSERT_FALSE(run.result.violations.empty());
  EXPECT_EQ(run.result.violations.front().check, "degrees");
  EXPECT_EQ(run.notes.back(), job.plan_path +
                                  ": invalid plan: " + std::to_string(run.result.total) +
                                  " violation" + (run.result.total == 1 ? "" : "s"));
}

TEST_F(ToolJobTest, ValidateReportsEveryFileItCannotRead) {
  ValidateJob job;
  job.plan_path = path("a.json");
  job.model_path = path("m.json");
  job.cluster_path = path("c.json");
  const ValidateRun run = run_validate_job(job);
  ASSERT_EQ(run.errors.size(), 3u);
  EXPECT_EQ(run.errors[2].message,
            path("c.json") + ": cannot open file for reading: No such file or directory");
}

TEST_F(ToolJobTest, DiffComparesAndHoldsItsThresholds) {
  DiffJob job;
  job.old_path = fixture("tiny-v100.plan.json");
  job.new_path = fixture("tiny-910a.plan.json");
  job.format = "json";
  job.output_path = path("diff.json");
  job.fail_if_slower_pct = 0;
  const DiffRun run = run_diff_job(job);
  ASSERT_TRUE(run.ok()) << run.errors.front().message;
  const Plan a = load_plan(job.old_path).value();
  const Plan b = load_plan(job.new_path).value();
  const PlanDiff by_hand = diff_plans({&a, &b, "", "", 0.0, {}});
  EXPECT_EQ(run.report, format_diff_json(by_hand));
  // The report states the gate asked for, and that it tripped.
  ASSERT_EQ(by_hand.gates.size(), 1u);
  EXPECT_EQ(by_hand.gates[0].option, "fail-if-slower");
  EXPECT_TRUE(by_hand.gates[0].tripped);
  EXPECT_EQ(get("diff.json"), run.report);
  // The 910A plan is slower: the gate trips after the report is written.
  ASSERT_GT(by_hand.slowdown_pct, 0);
  EXPECT_EQ(run.exit_code(), kDiffThresholdExit);
  ASSERT_EQ(run.notes.size(), 1u);
  EXPECT_EQ(run.notes[0].rfind("diff: " + by_hand.new_name + " is ", 0), 0u) << run.notes[0];
}

TEST_F(ToolJobTest, DiffRefusesWhatTheCommandLineRefuses) {
  DiffJob job;
  job.old_path = fixture("tiny-v100.plan.json");
  job.new_path = fixture("tiny-910a.plan.json");
  job.fail_if_slower_pct = -5;
  DiffRun run = run_diff_job(job);
  ASSERT_EQ(run.errors.size(), 1u);
  EXPECT_EQ(run.errors[0].message, "diff: --fail-if-slower must be a percentage >= 0, got -5");
  job.fail_if_slower_pct.reset();
  job.json = true;
  job.format = "markdown";
  run = run_diff_job(job);
  ASSERT_EQ(run.errors.size(), 1u);
  EXPECT_EQ(run.errors[0].message,
            "diff: --json and --format markdown ask for two formats; give one of them");
  EXPECT_EQ(run.exit_code(), 2);
}

TEST_F(ToolJobTest, ExportWritesTheFormatAsked) {
  ExportJob job;
  job.plan_path = fixture("tiny-v100.plan.json");
  job.format = "torch-csv";
  job.output_path = path("out.csv");
  const ExportRun run = run_export_job(job);
  ASSERT_TRUE(run.ok()) << run.errors.front().message;
  const Plan plan = load_plan(job.plan_path).value();
  const TorchCsv by_hand = export_torch_csv(plan).value();
  EXPECT_EQ(get("out.csv"), by_hand.csv);
  EXPECT_EQ(get("out.stages.json"), by_hand.stages_json);
  EXPECT_EQ(entries(), (std::vector<std::string>{"out.csv", "out.stages.json"}));
}

TEST_F(ToolJobTest, ExportRefusesAnotherFormatsOption) {
  ExportJob job;
  job.plan_path = fixture("tiny-v100.plan.json");
  job.format = "dot";
  job.compare_paths = {fixture("tiny-seq.plan.json")};
  ExportRun run = run_export_job(job);
  ASSERT_EQ(run.errors.size(), 1u);
  EXPECT_EQ(run.errors[0].message, "export: --compare applies to --format html, not dot");
  job.format = "trace";
  run = run_export_job(job);
  ASSERT_EQ(run.errors.size(), 1u);
  EXPECT_EQ(run.errors[0].message,
            "export: --format must be torch-csv, dot or html, got \"trace\"; the timeline as a "
            "Chrome trace is pulse-plan simulate PLAN --trace FILE (or plan --trace FILE)");
}

TEST(ToolJobOptions, TheTablesReadIntoTheJob) {
  const auto job = read_diff_job({"old.json", "new.json"},
                                 {{"fail-if-slower", 6.0}, {"format", std::string("html")}});
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->fail_if_slower_pct, 6.0);
  EXPECT_EQ(job->format, "html");
  EXPECT_FALSE(job->color.has_value());  // absent: the job's own default
  const auto one = read_export_job({"a.json", "b.json"}, {{"format", std::string("dot")}});
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.error().message,
            "export: expected one plan file, got 2 (see pulse-plan export --help)");
  const auto required = read_validate_job({"a.json"}, {{"model", std::string("m.json")}});
  ASSERT_FALSE(required.ok());
  EXPECT_EQ(required.error().message,
            "validate: --cluster FILE is required (see pulse-plan validate --help)");
  const auto compare = read_export_job(
      {"a.json"},
      {{"format", std::string("html")}, {"compare", std::vector<std::string>{"b.json", "c.json"}}});
  ASSERT_TRUE(compare.ok());
  EXPECT_EQ(compare->compare_paths, (std::vector<std::string>{"b.json", "c.json"}));
}

}  // namespace
}  // namespace pulse
