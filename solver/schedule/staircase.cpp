// The staircase and its judges (see staircase.hpp). OrderTimer restates the engine's
// timing on flat arrays without recording sends: a replay through the simulator costs
// several times more, and V-auto alone gives hundreds of candidates. The synthesizer
// replays the members it offers, so the engine has the last word.

#include "staircase.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "pulse/cost/memory.hpp"

namespace pulse::detail {

namespace {
constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
}  // namespace

OrderTimer::OrderTimer(const PipelineModel& m, int M) : m_(m), M_(M), S_(m.layout.num_stages()) {
  out_of_.assign(S_, {});
  into_.assign(S_, {});
  for (std::size_t t = 0; t < m.transfers.size(); ++t) {
    out_of_[m.transfers[t].from].push_back(t);
    into_[m.transfers[t].to].push_back(t);
  }
}

double OrderTimer::makespan(const Schedule& s, double beyond) {
  const std::size_t n = static_cast<std::size_t>(S_) * M_;
  f_end_.assign(n, kUnknown);
  g_end_.assign(n, kUnknown);
  fwd_.assign(m_.transfers.size() * M_, kUnknown);
  bwd_.assign(m_.transfers.size() * M_, kUnknown);
  free_.assign(m_.num_devices(), 0.0);
  link_.assign(static_cast<std::size_t>(m_.num_devices()) * m_.num_devices(), 0.0);
  const int P = m_.num_devices();
  std::vector<std::size_t> next(P, 0);
  std::size_t left = 0;
  for (const auto& ops : s.device_ops) left += ops.size();
  for (bool moved = true; moved && left > 0;) {
    moved = false;
    for (int d = 0; d < P; ++d) {
      const auto& ops = s.device_ops[d];
      for (; next[d] < ops.size() && run(ops[next[d]]); ++next[d], --left) moved = true;
      if (free_[d] >= beyond) return std::numeric_limits<double>::infinity();
    }
  }
  if (left > 0) return std::numeric_limits<double>::infinity();
  return *std::max_element(free_.begin(), free_.end());
}

double OrderTimer::ready(const Op& op) const {
  const StageId s = op.stage;
  const auto& dev = m_.layout.device;
  double t = free_[dev[s]];
  auto need = [&t](double when) {
    t = std::max(t, when);
    return !std::isnan(when);
  };
  if (op.kind == OpKind::forward) {
    if (s > 0 && dev[s - 1] == dev[s] && !need(f_end_[at(s - 1, op.mb)])) return kUnknown;
    for (std::size_t tr : into_[s]) {
      if (!need(fwd_[tat(tr, op.mb)])) return kUnknown;
    }
    return t;
  }
  if (op.kind == OpKind::backward_weight) return need(g_end_[at(s, op.mb)]) ? t : kUnknown;
  if (!need(f_end_[at(s, op.mb)])) return kUnknown;
  if (s + 1 < S_ && dev[s + 1] == dev[s] && !need(g_end_[at(s + 1, op.mb)])) return kUnknown;
  for (std::size_t tr : out_of_[s]) {
    if (!need(bwd_[tat(tr, op.mb)])) return kUnknown;
  }
  return t;
}

double OrderTimer::send(DeviceId d, double t, const std::vector<std::size_t>& transfers, int mb,
                        bool forward) {
  double busy = t;
  for (std::size_t tr : transfers) {
    const Transfer& x = m_.transfers[tr];
    const DeviceId to = m_.layout.device[forward ? x.to : x.from];
    double& link = link_[static_cast<std::size_t>(d) * m_.num_devices() + to];
    const double start = m_.overlap_comm ? std::max(t, link) : std::max(busy, link);
    link = start + (forward ? x.forward_s : x.backward_s);
    (forward ? fwd_ : bwd_)[tat(tr, mb)] = link;
    if (!m_.overlap_comm) busy = link;
  }
  return busy;
}

bool OrderTimer::run(const Op& op) {
  const double start = ready(op);
  if (std::isnan(start)) return false;
  const DeviceId d = m_.layout.device[op.stage];
  const double end = start + op_compute_s(m_.stages[op.stage], op.kind);
  double busy = end;
  if (op.kind == OpKind::forward) {
    f_end_[at(op.stage, op.mb)] = end;
    busy = send(d, end, out_of_[op.stage], op.mb, true);
  } else if (op.kind != OpKind::backward_weight) {
    g_end_[at(op.stage, op.mb)] = end;
    busy = send(d, end, into_[op.stage], op.mb, false);
  }
  free_[d] = busy;
  return true;
}

OrderHolds::OrderHolds(const PipelineModel& m) : hold_(m.stages.size(), 0) {
  const std::vector<std::int64_t> skip = skip_bytes_per_microbatch(m);
  std::vector<bool> seen(m.num_devices(), false);
  for (StageId s = 0; s < m.layout.num_stages(); ++s) {
    const DeviceId d = m.layout.device[s];
    hold_[s] = m.stages[s].activation_bytes + (seen[d] ? 0 : skip[d]);
    seen[d] = true;
  }
}

std::vector<std::int64_t> OrderHolds::peaks(const Schedule& s) const {
  std::vector<std::int64_t> out;
  for (const auto& ops : s.device_ops) {
    std::int64_t held = 0, peak = 0;
    for (const Op& op : ops) {
      if (op.kind == OpKind::forward) held += hold_[op.stage];
      if (op.kind == OpKind::backward_weight) held -= hold_[op.stage];
      peak = std::max(peak, held);
    }
    out.push_back(peak);
  }
  return out;
}

Staircase::Staircase(const PipelineModel& model, int M, std::vector<std::int64_t> room)
    : timer_(model, M), holds_(model), room_(std::move(room)) {}

void Staircase::add(Schedule s, const std::string& method) {
  std::vector<std::int64_t> peaks = holds_.peaks(s);
  for (std::size_t d = 0; d < peaks.size(); ++d) {
    if (peaks[d] > room_[d]) return;
  }
  const std::int64_t peak = *std::max_element(peaks.begin(), peaks.end());
  // Only a candidate shorter than every member holding no more can join.
  double beyond = std::numeric_limits<double>::infinity();
  for (const StairMember& m : members_) {
    if (m.peak <= peak) beyond = std::min(beyond, m.makespan_s);
  }
  const double t = timer_.makespan(s, beyond);
  if (!std::isfinite(t) || t >= beyond) return;
  std::erase_if(members_,
                [&](const StairMember& m) { return m.peak >= peak && m.makespan_s >= t; });
  const auto at = std::find_if(members_.begin(), members_.end(),
                               [&](const StairMember& m) { return m.peak > peak; });
  s.policy = method;
  members_.insert(at, StairMember{std::move(s), method, t, std::move(peaks), peak});
}

}  // namespace pulse::detail
