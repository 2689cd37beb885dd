#include <algorithm>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "engine.hpp"
#include "pulse/schedule.hpp"

namespace pulse {

char op_letter(OpKind kind) {
  switch (kind) {
    case OpKind::forward:
      return 'F';
    case OpKind::backward:
      return 'B';
    case OpKind::backward_input:
      return 'I';
    case OpKind::backward_weight:
      return 'W';
  }
  return '?';
}

std::vector<int> memory_inflight_limits(const PipelineModel& model,
                                        const std::vector<std::int64_t>& static_bytes,
                                        std::int64_t capacity, const std::vector<int>& wanted) {
  const std::vector<std::int64_t> per_mb = model.per_microbatch_bytes();
  std::vector<int> limits(model.num_devices(), 0);
  for (int d = 0; d < model.num_devices(); ++d) {
    const std::int64_t free = capacity - static_bytes[d];
    if (free <= 0) continue;
    const std::int64_t fits = per_mb[d] > 0 ? free / per_mb[d] : wanted[d];
    limits[d] = static_cast<int>(std::min<std::int64_t>(wanted[d], fits));
  }
  return limits;
}

std::vector<int> default_inflight(const StageLayout& layout, int num_microbatches) {
  // A microbatch admitted by device d's first stage returns for its last backward after
  // passing every later stage; to keep d busy meanwhile, admit about as many microbatches
  // as there are stages from d's first to the end, divided by the stages d itself runs
  // (1F1B's "P - s" warm-up on a chain; about P - d on the V).
  std::vector<int> k(layout.num_devices, 1);
  for (DeviceId d = 0; d < layout.num_devices; ++d) {
    const std::vector<StageId> mine = layout.stages_on(d);
    const int span = layout.num_stages() - mine.front();
    const int per_device = static_cast<int>(mine.size());
    k[d] = std::clamp((span + per_device - 1) / per_device, 1, num_microbatches);
  }
  return k;
}

namespace {

// Candidate order: earliest start, then backward before forward before weight-gradient,
// then the oldest microbatch, then the later stage, then the lower device.
using Key = std::tuple<double, int, int, int, int>;

int kind_rank(OpKind k) {
  return k == OpKind::forward ? 1 : (k == OpKind::backward_weight ? 2 : 0);
}

struct DeviceQueue {
  std::vector<StageId> stages;
  StageId admitting = 0;  // the device's first stage: a microbatch enters the device there
  int inflight = 0;
};

}  // namespace

Schedule list_schedule(const PipelineModel& model, int num_microbatches,
                       const std::vector<int>& inflight_limit, bool split_backward) {
  const int S = model.layout.num_stages(), M = num_microbatches;
  const int P = model.num_devices();
  detail::ExecutionEngine engine(model, M);
  std::vector<int> next_f(S, 0), next_b(S, 0), next_w(S, 0);
  std::vector<DeviceQueue> queues(P);
  for (DeviceId d = 0; d < P; ++d) {
    queues[d].stages = model.layout.stages_on(d);
    queues[d].admitting = queues[d].stages.front();
  }
  Schedule schedule;
  schedule.device_ops.assign(P, {});
  schedule.split_backward = split_backward;
  const OpKind back = split_backward ? OpKind::backward_input : OpKind::backward;
  const std::size_t total = static_cast<std::size_t>(S) * M * (split_backward ? 3 : 2);
  for (std::size_t done = 0; done < total; ++done) {
    std::optional<Key> best_key;
    Op best_op;
    auto consider = [&](DeviceId d, const Op& op) {
      const auto ready = engine.ready_time(op);
      if (!ready) return;
      const Key key{*ready, kind_rank(op.kind), op.microbatch, -op.stage, d};
      if (!best_key || key < *best_key) {
        best_key = key;
        best_op = op;
      }
    };
    for (DeviceId d = 0; d < P; ++d) {
      const DeviceQueue& q = queues[d];
      for (StageId s : q.stages) {
        const bool admits = s == q.admitting;
        if (next_f[s] < M && (!admits || q.inflight < inflight_limit[d])) {
          consider(d, Op{OpKind::forward, s, next_f[s]});
        }
        if (next_b[s] < next_f[s]) consider(d, Op{back, s, next_b[s]});
        if (split_backward && next_w[s] < next_b[s]) {
          consider(d, Op{OpKind::backward_weight, s, next_w[s]});
        }
      }
    }
    if (!best_key) throw std::logic_error("list_schedule: no operation is ready (deadlock)");
    const DeviceId d = std::get<4>(*best_key);
    engine.execute(best_op);
    schedule.device_ops[d].push_back(best_op);
    DeviceQueue& q = queues[d];
    const StageId s = best_op.stage;
    if (best_op.kind == OpKind::forward) {
      ++next_f[s];
      if (s == q.admitting) ++q.inflight;
    } else if (best_op.kind == OpKind::backward_weight) {
      ++next_w[s];
      if (s == q.admitting) --q.inflight;
    } else {
      ++next_b[s];
      if (s == q.admitting && !split_backward) --q.inflight;
    }
  }
  schedule.policy = "1f1b-list";
  return schedule;
}

}  // namespace pulse
