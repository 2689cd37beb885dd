#include "pulse/tools/frozen_check.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "pulse/cost/cost_model.hpp"

namespace pulse {

namespace {

// Plans round times to the nanosecond.
constexpr double kSlack = 2e-9;

std::string where(const FrozenOp& o, std::size_t i) {
  return fmt::format("frozen.ops[{}] ({} on device {}, {})", i, o.component, o.device, o.slot);
}

// (b): the op against the gap it names and the schedule of its device.
void check_bubble(const FrozenOp& o, std::size_t i, const Timeline& t,
                  std::vector<std::string>& out) {
  const double gs = o.gap_start_s.value_or(-1), ge = o.gap_end_s.value_or(-1);
  if (!o.gap_start_s || !o.gap_end_s) {
    out.push_back(fmt::format("{}: a bubble op states no gap", where(o, i)));
  } else if (o.start_s < gs - kSlack || o.end_s > ge + kSlack) {
    out.push_back(fmt::format("{}: runs [{:.9f}, {:.9f}] s, outside its gap [{:.9f}, {:.9f}] s",
                              where(o, i), o.start_s, o.end_s, gs, ge));
  }
  if (o.start_s < -kSlack || o.end_s > t.makespan_s + kSlack) {
    out.push_back(fmt::format("{}: runs [{:.9f}, {:.9f}] s, outside the iteration's [0, {:.9f}] s",
                              where(o, i), o.start_s, o.end_s, t.makespan_s));
  }
  for (const TimedOp& op : t.devices[o.device].ops) {
    const double busy_end = std::max(op.end_s, op.busy_until_s);
    if (o.start_s < busy_end - kSlack && op.start_s < o.end_s - kSlack) {
      out.push_back(fmt::format(
          "{}: runs [{:.9f}, {:.9f}] s while the device is busy with an op "
          "of stage {} (mb {}) [{:.9f}, {:.9f}] s",
          where(o, i), o.start_s, o.end_s, op.op.stage, op.op.mb, op.start_s, busy_end));
      return;
    }
  }
}

// (c): per device and clock, sorted by start: each starts after the one before ends.
void check_overlaps(const PlanFrozen& f, std::vector<std::string>& out) {
  std::map<std::pair<DeviceId, std::string>, std::vector<std::size_t>> by;
  for (std::size_t i = 0; i < f.ops.size(); ++i) by[{f.ops[i].device, f.ops[i].slot}].push_back(i);
  for (auto& [key, list] : by) {
    std::sort(list.begin(), list.end(),
              [&](std::size_t a, std::size_t b) { return f.ops[a].start_s < f.ops[b].start_s; });
    for (std::size_t k = 1; k < list.size(); ++k) {
      const FrozenOp& a = f.ops[list[k - 1]];
      const FrozenOp& b = f.ops[list[k]];
      if (b.start_s < a.end_s - kSlack) {
        out.push_back(fmt::format("{}: starts at {:.9f} s, before frozen.ops[{}] ends ({:.9f} s)",
                                  where(b, list[k]), b.start_s, list[k - 1], a.end_s));
      }
    }
  }
}

// (d): per component, how often each sample is encoded.
void check_coverage(const PlanFrozen& f, std::vector<std::string>& out) {
  for (const std::string& c : f.components) {
    std::vector<int> times(f.samples, 0);
    for (const FrozenOp& o : f.ops) {
      if (o.component != c) continue;
      for (int s = o.first_sample; s < o.first_sample + o.samples; ++s) {
        if (s >= 0 && s < f.samples) ++times[s];
      }
      if (o.first_sample + o.samples > f.samples) {
        out.push_back(
            fmt::format("frozen: {} encodes samples up to {}, beyond the {} of an "
                        "iteration",
                        c, o.first_sample + o.samples - 1, f.samples));
      }
    }
    for (int s = 0; s < f.samples; ++s) {
      if (times[s] != 1 && f.placement != "cached") {
        out.push_back(
            fmt::format("frozen: {} encodes sample {} {} times, not once", c, s, times[s]));
        break;
      }
    }
  }
}

// (e) and (f).
void check_figures(const FrozenCheckRequest& r, const PlanFrozen& f,
                   std::vector<std::string>& out) {
  double before = 0, bubble = 0;
  for (std::size_t i = 0; i < f.ops.size(); ++i) {
    const FrozenOp& o = f.ops[i];
    if (o.slot == "before_step") before = std::max(before, o.end_s);
    if (o.slot == "bubble") bubble += o.end_s - o.start_s;
    if (!r.model || r.device_type < 0 || !r.cluster) continue;
    const auto c = std::find_if(r.model->frozen.begin(), r.model->frozen.end(),
                                [&](const FrozenComponent& x) { return x.name == o.component; });
    if (c == r.model->frozen.end()) continue;
    const auto& group = r.plan->rank_map.pipeline_groups;
    double want =
        interpolate_time(c->forward_s[r.device_type], r.model->microbatch_sizes, o.samples);
    if (o.device != 0 && !group.empty()) {
      want += transfer_time(r.cluster->link(group[0][o.device], group[0][0]), 1,
                            static_cast<std::int64_t>(o.samples) * c->output_bytes_per_sample);
    }
    if (std::fabs((o.end_s - o.start_s) - want) > kSlack + 1e-9 * want) {
      out.push_back(fmt::format("{}: runs {:.9f} s, the profile says {:.9f} s for {} samples",
                                where(o, i), o.end_s - o.start_s, want, o.samples));
    }
  }
  if (std::fabs(before - f.before_step_s) > kSlack) {
    out.push_back(
        fmt::format("frozen.before_step_s is {:.9f} s, its before-step ops end at "
                    "{:.9f} s",
                    f.before_step_s, before));
  }
  if (std::fabs(bubble - f.bubble_s) > kSlack * (1 + f.ops.size())) {
    out.push_back(fmt::format("frozen.bubble_s is {:.9f} s, its bubble ops add up to {:.9f} s",
                              f.bubble_s, bubble));
  }
  const double step = r.plan->predicted.iteration_s + f.before_step_s;
  if (std::fabs(step - f.step_s) > kSlack) {
    out.push_back(
        fmt::format("frozen.step_s is {:.9f} s, predicted.iteration_s + before_step_s "
                    "is {:.9f} s",
                    f.step_s, step));
  }
}

}  // namespace

std::vector<std::string> check_frozen_plan(const FrozenCheckRequest& r) {
  std::vector<std::string> out;
  if (!r.plan->frozen) return out;
  const PlanFrozen& f = *r.plan->frozen;
  for (std::size_t i = 0; i < f.ops.size(); ++i) {  // (a), then (b)
    const FrozenOp& o = f.ops[i];
    if (std::find(f.components.begin(), f.components.end(), o.component) == f.components.end()) {
      out.push_back(fmt::format("{}: not a frozen component of the plan", where(o, i)));
    }
    if (o.device < 0 || o.device >= r.plan->pp() || o.end_s < o.start_s) {
      out.push_back(
          fmt::format("{}: no pipeline device of the plan, or ends before it starts", where(o, i)));
      continue;
    }
    if (o.slot == "bubble" && o.device < static_cast<int>(r.timeline->devices.size())) {
      check_bubble(o, i, *r.timeline, out);
    }
  }
  check_overlaps(f, out);
  check_coverage(f, out);
  check_figures(r, f, out);
  return out;
}

}  // namespace pulse
