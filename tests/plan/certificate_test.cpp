#include "pulse/plan/certificate.hpp"

#include <gtest/gtest.h>

#include "pulse/schedule/published.hpp"
#include "pulse/schedule/synthesize.hpp"
#include "pulse/simulate/evaluate.hpp"
#include "pulse/simulate/simulate.hpp"

namespace pulse {
namespace {

// A V over 2 devices, stages 0 and 3 on device 0, 1 and 2 on device 1; every stage F 1 s,
// B 2 s (W 1 s of it); transfers 0 -> 1 and 2 -> 3 of 0.5 s each way (stages 1 and 2 hand
// over on device 1).
PipelineModel small_v(bool overlap) {
  PipelineModel m;
  m.layout = v_layout({0, 1, 2, 3, 4}, 2);
  m.overlap_comm = overlap;
  for (int s = 0; s < 4; ++s) m.stages.push_back({1.0, 2.0, 1.0, 100, 1000});
  for (StageId from : {0, 2}) {
    Transfer t;
    t.from = from;
    t.to = from + 1;
    t.main_path = true;
    t.forward_s = 0.5;
    t.backward_s = 0.5;
    t.forward_messages = t.backward_messages = 1;
    m.transfers.push_back(t);
  }
  return m;
}

// The iteration of `schedule` on `m` as the planner evaluates it.
double iteration_of(const PipelineModel& m, const Schedule& schedule, int M,
                    const std::vector<double>& allreduce) {
  const std::vector<MemoryBreakdown> none(m.num_devices());
  const Result<Timeline> t = simulate(m, schedule, M, none, Peaks::rule_only);
  EXPECT_TRUE(t.ok()) << t.error().message;
  return evaluate(m, *t, allreduce, M, MemoryModel{}).iteration_s;
}

// Every published schedule of the registry and the synthesizer's answer on `m`: none beats
// the bound.
void expect_no_schedule_beats(const PipelineModel& m, int M, bool split,
                              const std::vector<double>& allreduce, double bound) {
  int generated = 0;
  for (PublishedSchedule which : published_schedules()) {
    PublishedRequest r;
    r.model = &m;
    r.num_microbatches = M;
    r.split_backward = split;
    const Result<Schedule> s = published_schedule(which, r);
    if (!s) continue;
    ++generated;
    EXPECT_GE(iteration_of(m, *s, M, allreduce) + 1e-12, bound) << published_schedule_name(which);
  }
  EXPECT_GE(generated, 5);
  ScheduleRequest r;
  r.model = &m;
  r.num_microbatches = M;
  r.static_bytes.assign(m.num_devices(), {});
  r.memory_capacity = std::int64_t{1} << 40;
  r.allreduce_s = allreduce;
  r.split_backward = split;
  const Result<ScheduleAnswer> a = synthesize_schedule(r);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_GE(iteration_of(m, a->schedule, M, allreduce) + 1e-12, bound);
}

TEST(Certificate, BlockingSendsWholeBackwardByHand) {
  // M = 4, sends block, no split. Per microbatch each device computes 2 x 3 = 6 s and sends
  // 2 x 0.5 (device 0: F of 0 -> 1, B into 3; device 1: B into 1, F of 2 -> 3): work 7 s.
  //   device_work   4 x 7 = 28
  //   critical path F0 1, +0.5, F1 1, F2 1, +0.5 = 4 to stage 3; B3 ends 7, +0.5, B2 9.5,
  //                 B1 11.5, +0.5, B0 14
  //   fill_drain    device 1: head 1.5 (F0 + 0.5), 28, then after its last B(1) the send
  //                 0.5 (already in its work) and B0 2: tail 2.5 - 0.5 = 2; 31.5
  //   allreduce     1 s on device 0, none on device 1: max(0 + 28 + 1, 1.5 + 28 + 0) = 29.5
  const PipelineModel m = small_v(false);
  const std::vector<double> allreduce{1.0, 0.0};
  const PlanCertificate c = iteration_bounds(m, 4, false, allreduce);
  EXPECT_DOUBLE_EQ(c.device_work_s, 28);
  EXPECT_DOUBLE_EQ(c.critical_path_s, 14);
  EXPECT_DOUBLE_EQ(c.fill_drain_s, 31.5);
  EXPECT_DOUBLE_EQ(c.allreduce_s, 29.5);
  EXPECT_FALSE(c.memory_s);
  EXPECT_DOUBLE_EQ(c.bound_s, 31.5);
  EXPECT_EQ(c.binding, "fill_drain");
  expect_no_schedule_beats(m, 4, false, allreduce, c.bound_s);
}

TEST(Certificate, OverlappedSendsSplitBackwardByHand) {
  // Sends overlap compute: work is compute alone, 6 s; the link 0 -> 1 carries 0.5 + 0.5 a
  // microbatch. A split backward leaves no tail (a W may end a device's work anywhere).
  //   device_work   4 x 6 = 24
  //   critical path to stage 3 at 4 as above; I = 1: I3 ends 6, +0.5, I2 7.5, I1 8.5, +0.5,
  //                 I0 10, W0 11
  //   fill_drain    device 1: 1.5 + 24 = 25.5
  //   allreduce     max(0 + 24 + 1, 1.5 + 24) = 25.5
  const PipelineModel m = small_v(true);
  const std::vector<double> allreduce{1.0, 0.0};
  const PlanCertificate c = iteration_bounds(m, 4, true, allreduce, 20.0);
  EXPECT_DOUBLE_EQ(c.device_work_s, 24);
  EXPECT_DOUBLE_EQ(c.critical_path_s, 11);
  EXPECT_DOUBLE_EQ(c.fill_drain_s, 25.5);
  EXPECT_DOUBLE_EQ(c.allreduce_s, 25.5);
  EXPECT_DOUBLE_EQ(*c.memory_s, 20);
  EXPECT_DOUBLE_EQ(c.bound_s, 25.5);
  EXPECT_EQ(c.binding, "fill_drain");  // the first of two equal terms
  expect_no_schedule_beats(m, 4, true, allreduce, c.bound_s);
  // A memory term above the others binds; the gap is iteration over bound.
  const PlanCertificate tight = with_gap(iteration_bounds(m, 4, true, allreduce, 30.0), 33.0);
  EXPECT_EQ(tight.binding, "memory");
  EXPECT_DOUBLE_EQ(tight.gap, 1.1);
}

TEST(Certificate, SlowLinkBindsWithOverlap) {
  // Sends overlap, but the link 0 -> 1 carries 2 x 4 s a microbatch: 8 x 4 = 32 s over M = 4.
  PipelineModel m = small_v(true);
  for (Transfer& t : m.transfers) t.forward_s = t.backward_s = 4.0;
  const PlanCertificate c = iteration_bounds(m, 4, false, {0.0, 0.0});
  EXPECT_DOUBLE_EQ(c.device_work_s, 32);
  expect_no_schedule_beats(m, 4, false, {0.0, 0.0}, c.bound_s);
}

TEST(Certificate, LineNamesBoundBindingAndGaps) {
  PlanCertificate c = with_gap(iteration_bounds(small_v(false), 4, false, {1.0, 0.0}), 35.0);
  c.published.push_back({"1f1b", true, 40.0, 40.0 / 31.5, std::nullopt});
  EXPECT_EQ(certificate_line(c),
            "certificate: no schedule of these stages beats 31.500 s (fill drain); the plan is "
            "1.111x of it; 1f1b 1.270x");
}

TEST(Certificate, LineSaysWhatTheMemoryCostsWhereItBinds) {
  // The same V with the synthesizer's bound under memory at 40 s: it binds, and the line
  // says the bound without it (the fill and drain's 31.5 s). Below 31.5 s it does not bind.
  PlanCertificate c = with_gap(iteration_bounds(small_v(false), 4, false, {1.0, 0.0}, 40.0), 44.0);
  EXPECT_EQ(c.binding, "memory");
  EXPECT_EQ(certificate_line(c),
            "certificate: no schedule of these stages beats 40.000 s (memory); the plan is "
            "1.100x of it; with no memory limit 31.500 s");
  c = with_gap(iteration_bounds(small_v(false), 4, false, {1.0, 0.0}, 30.0), 35.0);
  EXPECT_EQ(c.binding, "fill_drain");
  EXPECT_EQ(certificate_line(c).find("memory limit"), std::string::npos);
}

}  // namespace
}  // namespace pulse
