// The independent schedule checker. It restates the execution and memory rules on purpose,
// from the op times alone, rather than calling the engine or cost/memory.hpp's residency:
// a bug in either then shows up as a violation instead of agreeing with itself.
#include "pulse/simulate/schedule_check.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "pulse/cost/cost_model.hpp"
#include "pulse/cost/memory.hpp"

namespace pulse {

namespace {

// Slack for comparing times that went through different sums: one time quantum.
constexpr double kTimeSlack = kTimeQuantum_s;

std::string name(const Op& op) {
  return fmt::format("{}(stage {}, mb {})", op_letter(op.kind), op.stage, op.mb);
}

// Op kinds: F, B, I and W, each a slot of the op table.
constexpr int kKinds = 4;

class Checker {
 public:
  explicit Checker(const ScheduleCheckRequest& r)
      : request_(r),
        model_(*r.model),
        num_stages_(r.model->layout.num_stages()),
        num_microbatches_(r.num_microbatches) {}

  std::vector<std::string> run() {
    index_ops();
    if (!problems_.empty()) return problems_;  // later checks need every op present
    check_exclusive();
    check_dependencies();
    check_memory();
    return problems_;
  }

 private:
  void fail(std::string message) { problems_.push_back(std::move(message)); }

  // Where op (kind, s, mb) is in the table, for s and mb in range.
  std::size_t slot(OpKind kind, StageId s, int mb) const {
    return (static_cast<std::size_t>(kind) * num_stages_ + s) * num_microbatches_ + mb;
  }
  const TimedOp* find(OpKind kind, StageId s, int mb) const { return ops_[slot(kind, s, mb)]; }
  // The op whose end makes the input gradient of (s, mb) available: B, or I when split.
  const TimedOp* grad(StageId s, int mb) const {
    return find(request_.split_backward ? OpKind::backward_input : OpKind::backward, s, mb);
  }
  // The op after which (s, mb) frees its activations: B, or W when split.
  const TimedOp* last(StageId s, int mb) const {
    return find(request_.split_backward ? OpKind::backward_weight : OpKind::backward, s, mb);
  }

  void index_ops();
  void check_exclusive();
  void check_dependencies();
  void check_after(const TimedOp& later, const TimedOp& earlier, double transfer_s,
                   const char* why);
  void check_memory();

  const ScheduleCheckRequest& request_;
  const PipelineModel& model_;
  const int num_stages_;
  const int num_microbatches_;
  // Each op's run by kind, stage and microbatch (slot()); null where it never runs. A table,
  // not a map: at pp 1024 over 2048 layers (4.2 million ops) the map's lookups were two
  // thirds of `validate`'s 20 s.
  std::vector<const TimedOp*> ops_;
  std::vector<std::string> problems_;
};

void Checker::index_ops() {
  const int S = num_stages_, M = num_microbatches_;
  ops_.assign(static_cast<std::size_t>(kKinds) * S * std::max(M, 0), nullptr);
  for (std::size_t d = 0; d < request_.timeline->devices.size(); ++d) {
    for (const TimedOp& t : request_.timeline->devices[d].ops) {
      if (t.op.stage < 0 || t.op.stage >= S || t.op.mb < 0 || t.op.mb >= M) {
        fail(fmt::format("device {}: {} does not exist", d, name(t.op)));
        continue;
      }
      if (model_.layout.device[t.op.stage] != static_cast<int>(d)) {
        fail(fmt::format("device {}: {} belongs to device {}", d, name(t.op),
                         model_.layout.device[t.op.stage]));
      }
      const TimedOp*& at = ops_[slot(t.op.kind, t.op.stage, t.op.mb)];
      if (at) {
        fail(fmt::format("device {}: {} runs twice", d, name(t.op)));
      } else {
        at = &t;
      }
    }
  }
  const std::vector<OpKind> kinds =
      request_.split_backward
          ? std::vector<OpKind>{OpKind::forward, OpKind::backward_input, OpKind::backward_weight}
          : std::vector<OpKind>{OpKind::forward, OpKind::backward};
  for (OpKind k : kinds) {
    for (StageId s = 0; s < S; ++s) {
      for (int mb = 0; mb < M; ++mb) {
        if (!find(k, s, mb)) fail(fmt::format("{} never runs", name(Op{k, s, mb})));
      }
    }
  }
}

void Checker::check_exclusive() {
  for (std::size_t d = 0; d < request_.timeline->devices.size(); ++d) {
    std::vector<const TimedOp*> ops;
    for (const TimedOp& t : request_.timeline->devices[d].ops) ops.push_back(&t);
    std::sort(ops.begin(), ops.end(),
              [](const TimedOp* a, const TimedOp* b) { return a->start_s < b->start_s; });
    for (std::size_t i = 1; i < ops.size(); ++i) {
      if (ops[i]->start_s < ops[i - 1]->busy_until_s - kTimeSlack) {
        fail(fmt::format("device {}: {} starts at {:.9f} s while {} occupies it until {:.9f} s", d,
                         name(ops[i]->op), ops[i]->start_s, name(ops[i - 1]->op),
                         ops[i - 1]->busy_until_s));
      }
    }
  }
}

void Checker::check_after(const TimedOp& later, const TimedOp& earlier, double transfer_s,
                          const char* why) {
  if (later.start_s < earlier.end_s + transfer_s - kTimeSlack) {
    fail(fmt::format("{} starts at {:.9f} s, before {} ends at {:.9f} s plus {:.9f} s of {}",
                     name(later.op), later.start_s, name(earlier.op), earlier.end_s, transfer_s,
                     why));
  }
}

void Checker::check_dependencies() {
  const int S = model_.layout.num_stages(), M = request_.num_microbatches;
  for (int mb = 0; mb < M; ++mb) {
    for (StageId s = 0; s < S; ++s) {
      const TimedOp& f = *find(OpKind::forward, s, mb);
      const TimedOp& g = *grad(s, mb);
      check_after(g, f, 0.0, "its own forward");
      if (request_.split_backward) check_after(*last(s, mb), g, 0.0, "its input gradient");
      if (s > 0 && model_.layout.device[s - 1] == model_.layout.device[s]) {
        check_after(f, *find(OpKind::forward, s - 1, mb), 0.0, "local hand-over");
      }
      if (s + 1 < S && model_.layout.device[s + 1] == model_.layout.device[s]) {
        check_after(g, *grad(s + 1, mb), 0.0, "local hand-over");
      }
    }
    for (const Transfer& t : model_.transfers) {
      check_after(*find(OpKind::forward, t.to, mb), *find(OpKind::forward, t.from, mb), t.forward_s,
                  "transfer");
      check_after(*grad(t.from, mb), *grad(t.to, mb), t.backward_s, "gradient transfer");
    }
  }
}

void Checker::check_memory() {
  // Skip tensors cached, sent or received on a device, charged for a microbatch's whole stay.
  const std::vector<std::int64_t> skip = skip_bytes_per_microbatch(model_);
  for (int d = 0; d < model_.num_devices(); ++d) {
    const std::vector<StageId> stages = model_.layout.stages_on(d);
    if (stages.empty()) continue;  // an idle device holds nothing
    // A stage holds its activations from its forward's start to its last backward's end;
    // a microbatch is on the device from its first stage's forward to that stage's last
    // backward. Byte deltas in time order, frees before allocations at one instant.
    std::vector<std::tuple<double, std::int64_t, int>> events;  // time, bytes, microbatches
    for (int mb = 0; mb < request_.num_microbatches; ++mb) {
      for (StageId s : stages) {
        const bool first = s == stages.front();
        const std::int64_t bytes = model_.stages[s].activation_bytes + (first ? skip[d] : 0);
        events.push_back({find(OpKind::forward, s, mb)->start_s, bytes, first ? 1 : 0});
        events.push_back({last(s, mb)->end_s, -bytes, first ? -1 : 0});
      }
    }
    std::sort(events.begin(), events.end());
    std::int64_t held = 0, peak = 0;
    int inflight = 0, inflight_at_peak = 0;
    double when = 0;
    for (const auto& [time, bytes, microbatches] : events) {
      held += bytes;
      inflight += microbatches;
      if (held > peak) std::tie(peak, when, inflight_at_peak) = std::tuple{held, time, inflight};
    }
    const std::int64_t total = request_.static_bytes[d].total() + peak;
    if (total > request_.memory_capacity) {
      fail(
          fmt::format("device {}: {} microbatches in flight hold {} bytes with the static state "
                      "at {:.9f} s, over the {} byte capacity",
                      d, inflight_at_peak, total, when, request_.memory_capacity));
    }
  }
}

}  // namespace

std::vector<std::string> check_schedule(const ScheduleCheckRequest& request) {
  return Checker(request).run();
}

}  // namespace pulse
