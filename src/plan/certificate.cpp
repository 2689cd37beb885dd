#include "pulse/plan/certificate.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "pulse/base/units.hpp"
#include "pulse/cost/cost_model.hpp"

namespace pulse {

namespace {

// What links stage s to s + 1 (a device, or transfers), and the transfers' times.
struct Hops {
  std::vector<char> linked;               // [s]: s -> s + 1 is a dependency
  std::vector<double> forward, backward;  // [s]: the longest transfer s -> s + 1, each way
};

Hops hops_of(const PipelineModel& m) {
  const int S = m.layout.num_stages();
  Hops h{std::vector<char>(std::max(0, S - 1), 0), std::vector<double>(std::max(0, S - 1), 0.0),
         std::vector<double>(std::max(0, S - 1), 0.0)};
  for (StageId s = 0; s + 1 < S; ++s) h.linked[s] = m.layout.device[s] == m.layout.device[s + 1];
  for (const Transfer& t : m.transfers) {
    if (t.to != t.from + 1) continue;
    h.linked[t.from] = 1;
    h.forward[t.from] = std::max(h.forward[t.from], t.forward_s);
    h.backward[t.from] = std::max(h.backward[t.from], t.backward_s);
  }
  return h;
}

// The op graph of one microbatch: its longest path, forward up and (input) gradient down.
double critical_path(const PipelineModel& m, const Hops& h, bool split) {
  const int S = m.layout.num_stages();
  std::vector<double> arrive(S, 0.0), done(S, 0.0);
  for (StageId s = 1; s < S; ++s) {
    if (h.linked[s - 1]) arrive[s] = arrive[s - 1] + m.stages[s - 1].forward_s + h.forward[s - 1];
  }
  double path = 0;
  for (StageId s = S - 1; s >= 0; --s) {
    const StageCost& c = m.stages[s];
    double start = arrive[s] + c.forward_s;
    if (s + 1 < S && h.linked[s]) start = std::max(start, done[s + 1] + h.backward[s]);
    done[s] = start + c.backward_s - (split ? c.backward_weight_s : 0.0);
    path = std::max(path, done[s] + (split ? c.backward_weight_s : 0.0));
  }
  return path;
}

struct DeviceTerms {
  double work = 0, head = 0, tail = 0;
  std::vector<double> links;  // [to device]: this device's sends on that link
};

std::vector<DeviceTerms> device_terms(const PipelineModel& m, const Hops& h, bool split) {
  const int S = m.layout.num_stages(), P = m.num_devices();
  const auto& dev = m.layout.device;
  std::vector<DeviceTerms> d(P, DeviceTerms{0, 0, 0, std::vector<double>(P, 0.0)});
  std::vector<double> arrive(S, 0.0), drain(S, 0.0), sends_after_backward(S, 0.0);
  for (StageId s = 1; s < S; ++s) {
    if (!h.linked[s - 1]) continue;
    arrive[s] = arrive[s - 1] + m.stages[s - 1].forward_s + h.forward[s - 1];
    drain[s] = h.backward[s - 1] + m.stages[s - 1].backward_s + drain[s - 1];
  }
  for (const Transfer& t : m.transfers) {
    d[dev[t.from]].links[dev[t.to]] += t.forward_s;
    d[dev[t.to]].links[dev[t.from]] += t.backward_s;
    if (m.overlap_comm) continue;
    d[dev[t.from]].work += t.forward_s;
    d[dev[t.to]].work += t.backward_s;
    sends_after_backward[t.to] += t.backward_s;
  }
  std::vector<StageId> first(P, S);
  std::vector<double> head(P, 1e300);
  for (StageId s = 0; s < S; ++s) {
    d[dev[s]].work += m.stages[s].forward_s + m.stages[s].backward_s;
    first[dev[s]] = std::min(first[dev[s]], s);
    head[dev[s]] = std::min(head[dev[s]], arrive[s]);
  }
  for (DeviceId x = 0; x < P; ++x) {
    if (first[x] == S) continue;
    d[x].head = head[x];
    // Every stage of x reaches x's first stage by the backward chain.
    bool chained = !split;
    for (StageId s = first[x]; chained && s < S; ++s) {
      if (dev[s] != x) continue;
      for (StageId k = first[x]; chained && k < s; ++k) chained = h.linked[k];
    }
    if (chained) d[x].tail = std::max(0.0, drain[first[x]] - sends_after_backward[first[x]]);
  }
  return d;
}

}  // namespace

PlanCertificate iteration_bounds(const PipelineModel& model, int num_microbatches,
                                 bool split_backward, const std::vector<double>& allreduce_s,
                                 std::optional<double> memory_s) {
  const double M = num_microbatches;
  const Hops h = hops_of(model);
  PlanCertificate c;
  const std::vector<DeviceTerms> devices = device_terms(model, h, split_backward);
  for (DeviceId x = 0; x < model.num_devices(); ++x) {
    const DeviceTerms& d = devices[x];
    const double links = *std::max_element(d.links.begin(), d.links.end());
    c.device_work_s = std::max(c.device_work_s, M * std::max(d.work, links));
    c.fill_drain_s = std::max(c.fill_drain_s, d.head + M * d.work + d.tail);
    c.allreduce_s = std::max(c.allreduce_s, d.head + M * d.work + allreduce_s[x]);
  }
  c.critical_path_s = critical_path(model, h, split_backward);
  // Every time above is a sum of whole nanoseconds: rounding removes the sums' float error.
  for (double* t : {&c.device_work_s, &c.critical_path_s, &c.fill_drain_s, &c.allreduce_s}) {
    *t = quantize_time(*t);
  }
  if (memory_s) c.memory_s = quantize_time(*memory_s);
  const std::pair<const char*, double> terms[] = {{"device_work", c.device_work_s},
                                                  {"critical_path", c.critical_path_s},
                                                  {"fill_drain", c.fill_drain_s},
                                                  {"allreduce", c.allreduce_s},
                                                  {"memory", c.memory_s.value_or(0.0)}};
  for (const auto& [name, value] : terms) {
    if (value > c.bound_s) {
      c.bound_s = value;
      c.binding = name;
    }
  }
  return c;
}

double gap_to(const PlanCertificate& bounds, double iteration_s) {
  // Both on the quantum: an iteration that meets the bound has a gap of exactly 1.
  return bounds.bound_s > 0 ? quantize_time(iteration_s) / bounds.bound_s : 1.0;
}

PlanCertificate with_gap(PlanCertificate bounds, double iteration_s) {
  bounds.gap = gap_to(bounds, iteration_s);
  return bounds;
}

std::string certificate_line(const PlanCertificate& c) {
  std::string binding = c.binding;
  std::replace(binding.begin(), binding.end(), '_', ' ');
  std::string line = fmt::format(
      "certificate: no schedule of these stages beats {} ({}); the plan is {:.3f}x of it",
      format_seconds(c.bound_s), binding, c.gap);
  if (c.binding == "memory") {
    // What the memory costs: the bound of the same stages with no memory limit.
    const double free =
        std::max({c.device_work_s, c.critical_path_s, c.fill_drain_s, c.allreduce_s});
    line += fmt::format("; with no memory limit {}", format_seconds(free));
  }
  if (c.partition) {
    line += fmt::format("; the partition is {:.3f}x of any partition's bound", c.partition->gap);
  }
  for (const PublishedGap& p : c.published) {
    if (p.gap) line += fmt::format("; {} {:.3f}x", p.schedule, *p.gap);
  }
  return line;
}

}  // namespace pulse
