#include "pulse/simulate/engine.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

namespace pulse::detail {

namespace {
bool done(double t) {
  return !std::isnan(t);
}
}  // namespace

ExecutionEngine::ExecutionEngine(const PipelineModel& model, int num_microbatches,
                                 bool record_sends)
    : model_(model), num_microbatches_(num_microbatches), record_sends_(record_sends) {
  const int S = model.layout.num_stages();
  out_of_.assign(S, {});
  into_.assign(S, {});
  std::map<std::pair<DeviceId, DeviceId>, std::uint32_t> links;
  const auto link = [&links](DeviceId from, DeviceId to) {
    return links.try_emplace({from, to}, static_cast<std::uint32_t>(links.size())).first->second;
  };
  for (std::size_t t = 0; t < model.transfers.size(); ++t) {
    const Transfer& x = model.transfers[t];
    out_of_[x.from].push_back(t);
    into_[x.to].push_back(t);
    const DeviceId from = model.layout.device[x.from], to = model.layout.device[x.to];
    hops_.push_back({from, to, x.forward_s, x.backward_s, link(from, to), link(to, from)});
  }
  receivers_.assign(static_cast<std::size_t>(S) * 3, {});
  for (StageId s = 0; s < S; ++s) {
    for (std::size_t t : out_of_[s])
      receivers_[s * 3].push_back(model.layout.device[model.transfers[t].to]);
    for (std::size_t t : into_[s])
      receivers_[s * 3 + 1].push_back(model.layout.device[model.transfers[t].from]);
  }
  const std::size_t P = model.num_devices();
  device_free_.assign(P, 0.0);
  sends_.assign(P, {});
  link_free_.assign(links.size(), 0.0);
  const std::size_t n = static_cast<std::size_t>(S) * num_microbatches_;
  times_.assign(n, Times{});
  const std::size_t T = model.transfers.size();
  for (auto* v : {&fwd_arrival_, &bwd_arrival_}) {
    v->assign(T * num_microbatches_, kNotYet);
  }
}

bool ExecutionEngine::executed(const Op& op) const {
  const Times& t = times_[idx(op.stage, op.mb)];
  switch (op.kind) {
    case OpKind::forward:
      return done(t.f_end);
    case OpKind::backward:
    case OpKind::backward_input:
      return done(t.g_end);
    case OpKind::backward_weight:
      return done(t.w_end);
  }
  return false;
}

double ExecutionEngine::inputs_ready(const Op& op) const {
  const StageId s = op.stage;
  const int m = op.mb;
  const int S = model_.layout.num_stages();
  double t = -std::numeric_limits<double>::infinity();
  auto need = [&t](double when) {
    if (!done(when)) return false;
    t = std::max(t, when);
    return true;
  };
  if (op.kind == OpKind::forward) {
    // The previous stage's output (a local hand-over or a transfer) and direct skips.
    if (s > 0 && model_.layout.device[s - 1] == model_.layout.device[s] &&
        !need(times_[idx(s - 1, m)].f_end)) {
      return kNotYet;
    }
    for (std::size_t tr : into_[s]) {
      if (!need(fwd_arrival_[tidx(tr, m)])) return kNotYet;
    }
    return t;
  }
  if (op.kind == OpKind::backward_weight) {
    if (!need(times_[idx(s, m)].g_end)) return kNotYet;
    return t;
  }
  // B or I: own forward, the next stage's gradient, and gradients of skips sent from here.
  if (!need(times_[idx(s, m)].f_end)) return kNotYet;
  if (s + 1 < S && model_.layout.device[s + 1] == model_.layout.device[s] &&
      !need(times_[idx(s + 1, m)].g_end)) {
    return kNotYet;
  }
  for (std::size_t tr : out_of_[s]) {
    if (!need(bwd_arrival_[tidx(tr, m)])) return kNotYet;
  }
  return t;
}

double ExecutionEngine::ready_at(const Op& op) const {
  const double in = inputs_ready(op);
  if (!done(in)) return kNotYet;
  return std::max(device_free_[model_.layout.device[op.stage]], in);
}

std::optional<double> ExecutionEngine::ready_time(const Op& op) const {
  const double t = ready_at(op);
  if (!done(t)) return std::nullopt;
  return t;
}

TimedOp ExecutionEngine::execute(const Op& op) {
  const double start = ready_at(op);
  if (!done(start)) throw std::logic_error("ExecutionEngine::execute: an input is missing");
  return execute_at(op, start);
}

void add_activation_runs(const PipelineModel& model, const ExecutionEngine& engine, DeviceId device,
                         int num_microbatches, std::int64_t skip_bytes, MemoryRuns& out) {
  const std::vector<StageId> stages = model.layout.stages_on(device);
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const StageId s = stages[k];
    const std::int64_t held = model.stages[s].activation_bytes;
    const bool admits = k == 0;
    const std::int64_t charged = held + (admits ? skip_bytes : 0);
    for (int m = 0; m < num_microbatches; ++m) out.runs.add(engine.forward_start(s, m));
    out.end_run({held, 0, charged, admits ? 1 : 0});
    for (int m = 0; m < num_microbatches; ++m) out.runs.add(engine.backward_done(s, m));
    out.end_run({-held, 0, -charged, admits ? -1 : 0});
  }
}

Residency residency_of(const PipelineModel& model, const ExecutionEngine& engine, DeviceId device,
                       int num_microbatches, MemoryRuns& scratch) {
  scratch.clear();
  add_activation_runs(model, engine, device, num_microbatches,
                      skip_bytes_per_microbatch(model)[device], scratch);
  return sweep_memory(scratch).charged;
}

}  // namespace pulse::detail
