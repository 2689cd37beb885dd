// Schedules by memory (internal to the schedule synthesizer): the staircase of a set of
// candidates, those strictly faster than every candidate holding no more, ordered by what
// they hold. Its members are judged cheaply: the makespan by the execution engine's rules
// on flat arrays (`OrderTimer`), the memory from the order alone (`OrderHolds`). See
// staircase.cpp.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "pulse/cost/pipeline_model.hpp"
#include "pulse/simulate/schedule.hpp"

namespace pulse::detail {

/// The makespan of an op order under the engine's rules (src/simulate/engine.cpp): every
/// op at the latest of its device's free time and its inputs' arrivals, each send on its
/// link after the link's previous one; infinity when the order deadlocks, or as soon as a
/// device is busy until `beyond` or later (the caller wants only shorter ones).
class OrderTimer {
 public:
  OrderTimer(const PipelineModel& model, int num_microbatches);
  double makespan(const Schedule& schedule,
                  double beyond = std::numeric_limits<double>::infinity());

 private:
  double ready(const Op& op) const;
  double send(DeviceId d, double t, const std::vector<std::size_t>& transfers, int mb,
              bool forward);
  bool run(const Op& op);
  std::size_t at(StageId s, int mb) const { return static_cast<std::size_t>(s) * M_ + mb; }
  std::size_t tat(std::size_t t, int mb) const { return t * M_ + mb; }

  const PipelineModel& m_;
  const int M_, S_;
  std::vector<std::vector<std::size_t>> out_of_, into_;
  std::vector<double> f_end_, g_end_, fwd_, bwd_, free_, link_;
};

/// Per device, the bytes an order with a split backward holds at its fullest under the
/// memory rule: a stage's activations from its forward to its W, the device's skip bytes
/// with its first stage's.
class OrderHolds {
 public:
  explicit OrderHolds(const PipelineModel& model);
  std::vector<std::int64_t> peaks(const Schedule& schedule) const;
  /// Each stage's bytes per microbatch, skip bytes included on a device's first stage.
  const std::vector<std::int64_t>& per_stage() const { return hold_; }

 private:
  std::vector<std::int64_t> hold_;
};

struct StairMember {
  Schedule schedule;
  std::string method;
  double makespan_s = 0;
  std::vector<std::int64_t> peaks;  ///< Per device.
  std::int64_t peak = 0;            ///< The fullest device's.
};

/// Candidates in, the staircase kept: sorted by `peak`, each strictly faster than all
/// before it. A candidate that deadlocks, or that some device's `room` cannot hold, is
/// left out; of two alike, the first stays.
class Staircase {
 public:
  Staircase(const PipelineModel& model, int num_microbatches, std::vector<std::int64_t> room);
  void add(Schedule schedule, const std::string& method);
  const std::vector<StairMember>& members() const { return members_; }
  const OrderHolds& holds() const { return holds_; }

 private:
  OrderTimer timer_;
  OrderHolds holds_;
  std::vector<std::int64_t> room_;
  std::vector<StairMember> members_;
};

}  // namespace pulse::detail
