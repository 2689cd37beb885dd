#include "pulse/compile/plan_job.hpp"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pulse/simulate/trace.hpp"
#include "support/temp_dir.hpp"
#include "support/test_support.hpp"

namespace pulse {
namespace {

class PlanJobTest : public test::TempDirTest {
 protected:
  // tiny-unet on one DGX-1 at pp 2, written into the test's directory.
  PlanJob tiny_job() const {
    PlanJob job;
    job.model_path = test::profile_path("models/tiny-unet.json");
    job.cluster_path = test::profile_path("clusters/dgx1-v100-32gb-1n.json");
    job.output_path = path("plan.json");
    job.trace_path = path("trace.json");
    job.options.pp = 2;
    return job;
  }
};

// The job is what a caller of the passes would do by hand: compile_plan, build_plan and
// the codec give the same bytes, and the trace is the plan's timeline.
TEST_F(PlanJobTest, WritesWhatTheLibraryCallsMake) {
  const PlanRun run = run_plan_job(tiny_job());
  ASSERT_TRUE(run.ok()) << run.errors.front().message;
  const test::Inputs in = test::shipped("tiny-unet", "dgx1-v100-32gb-1n");
  PlanOptions o;
  o.pp = 2;
  const CompiledPlan by_hand = test::compile_ok(in, o);
  EXPECT_EQ(get("plan.json"), test::plan_text(by_hand, in.model, in.cluster));
  EXPECT_TRUE(run.text.empty());  // streamed into the file, never held whole
  const auto timeline = timeline_with_sends(by_hand);
  ASSERT_TRUE(timeline.ok());
  EXPECT_EQ(get("trace.json"),
            chrome_trace(by_hand.model, *timeline, by_hand.evaluation.allreduce, by_hand.dp));
  // The sends are drawn (the plan's own timeline keeps none): pp 2 sends each microbatch's
  // activation and gradient once.
  EXPECT_NE(get("trace.json").find("\"send grad stage 1 -> 0"), std::string::npos);
  EXPECT_EQ(entries(), (std::vector<std::string>{"plan.json", "trace.json"}));
  // Every pass timed once per run at least, load first and write last.
  ASSERT_FALSE(run.pass_times.empty());
  EXPECT_EQ(run.pass_times.front().pass, "load");
  EXPECT_EQ(run.pass_times.back().pass, "write");
  EXPECT_EQ(run.summary.rfind("tiny-unet on dgx1-v100-32gb-1n (pulse): pp 2 x dp 4", 0), 0u)
      << run.summary;
  EXPECT_TRUE(run.warnings.empty());
}

TEST_F(PlanJobTest, WithoutWritingTheTextComesBack) {
  PlanJob job = tiny_job();
  job.write = false;
  const PlanRun run = run_plan_job(job);
  ASSERT_TRUE(run.ok()) << run.errors.front().message;
  EXPECT_NE(run.text.find("\"schema\": \"pulse.plan/v2\""), std::string::npos);
  EXPECT_EQ(run.plan.parallelism.pp, 2);
  EXPECT_TRUE(entries().empty());
}

// One run reports both profiles' problems, and writes nothing.
TEST_F(PlanJobTest, BothProfilesProblemsAreReported) {
  PlanJob job = tiny_job();
  job.model_path = path("no-model.json");
  job.cluster_path = path("no-cluster.json");
  const PlanRun run = run_plan_job(job);
  ASSERT_EQ(run.errors.size(), 2u);
  EXPECT_EQ(run.errors[0].kind, ErrorKind::input);
  EXPECT_NE(run.errors[0].message.find("no-model.json"), std::string::npos);
  EXPECT_NE(run.errors[1].message.find("no-cluster.json"), std::string::npos);
  EXPECT_TRUE(entries().empty());
}

// The options are checked before anything is read: a bad option is the one error, though
// the files do not exist either.
TEST_F(PlanJobTest, OptionsAreCheckedBeforeTheFilesAreRead) {
  PlanJob job = tiny_job();
  job.model_path = path("no-model.json");
  job.options.pp = 0;
  const PlanRun run = run_plan_job(job);
  ASSERT_EQ(run.errors.size(), 1u);
  EXPECT_EQ(run.errors[0].message, "plan: --pp must be at least 1, got 0");
  // And the outputs: the plan may not overwrite an input.
  job = tiny_job();
  job.output_path = job.model_path;
  const PlanRun clash = run_plan_job(job);
  ASSERT_EQ(clash.errors.size(), 1u);
  EXPECT_EQ(clash.errors[0].kind, ErrorKind::usage);
  EXPECT_NE(clash.errors[0].message.find("would destroy an input"), std::string::npos)
      << clash.errors[0].message;
}

// No plan fits: nothing is written, the trace included.
TEST_F(PlanJobTest, AnInfeasibleJobWritesNothing) {
  PlanJob job = tiny_job();
  job.options.activation_budget_bytes = 1;
  const PlanRun run = run_plan_job(job);
  ASSERT_EQ(run.errors.size(), 1u);
  EXPECT_EQ(run.errors[0].kind, ErrorKind::infeasible) << run.errors[0].message;
  EXPECT_TRUE(entries().empty());
}

}  // namespace
}  // namespace pulse
