#include "pulse/simulate/frozen.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "pulse/base/units.hpp"
#include "pulse/cost/cost_model.hpp"

namespace pulse {

std::string_view frozen_placement_name(FrozenPlacement placement) {
  switch (placement) {
    case FrozenPlacement::cached:
      return "cached";
    case FrozenPlacement::before_step:
      return "before_step";
    case FrozenPlacement::bubbles:
      return "bubbles";
  }
  return "before_step";
}

std::optional<FrozenPlacement> parse_frozen_placement(std::string_view text) {
  for (FrozenPlacement p :
       {FrozenPlacement::cached, FrozenPlacement::before_step, FrozenPlacement::bubbles}) {
    if (frozen_placement_name(p) == text) return p;
  }
  return std::nullopt;
}

std::vector<std::vector<IdleGap>> idle_gaps(const Timeline& timeline) {
  std::vector<std::vector<IdleGap>> gaps(timeline.devices.size());
  for (std::size_t d = 0; d < timeline.devices.size(); ++d) {
    double free_from = 0;
    auto add = [&](double until) {
      if (until - free_from >= kTimeQuantum_s) gaps[d].push_back({free_from, until});
    };
    for (const TimedOp& op : timeline.devices[d].ops) {
      add(op.start_s);
      free_from = std::max(free_from, std::max(op.end_s, op.busy_until_s));
    }
    add(timeline.makespan_s);
  }
  return gaps;
}

double frozen_piece_seconds(const FrozenRequest& request, const FrozenComponent& c, DeviceId device,
                            int samples) {
  const double forward =
      interpolate_time(c.forward_s[request.device_type], request.model->microbatch_sizes, samples);
  const double send =
      device == 0 ? 0.0
                  : transfer_time(request.link_to_first[device], 1,
                                  static_cast<std::int64_t>(samples) * c.output_bytes_per_sample);
  return quantize_time(forward + send);
}

double frozen_work_lower_bound(const ModelProfile& model, int device_type, int samples) {
  double seconds = 0;
  for (const FrozenComponent& c : model.frozen) {
    const std::vector<double>& times = c.forward_s[device_type];
    double per_sample = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < times.size(); ++k) {
      per_sample = std::min(per_sample, times[k] / model.microbatch_sizes[k]);
    }
    // At most `samples` pieces, each rounded to the quantum by at most half of one.
    seconds += std::max(0.0, samples * (per_sample - kTimeQuantum_s));
  }
  return seconds;
}

namespace {

struct Work {
  FrozenAnswer answer;
  std::vector<int> next_sample;  // [component]: the first sample no op has encoded yet
  std::int64_t weights = 0;      // every component's, resident on a device that runs one
};

// The largest piece of component c device d may run with `free` bytes (after the weights):
// at least 1, at most `wanted`; 0 when not even one sample fits.
int largest_fitting(const FrozenComponent& c, std::int64_t free, int wanted) {
  if (c.activation_bytes_per_sample <= 0) return free >= 0 ? wanted : 0;
  if (free < c.activation_bytes_per_sample) return 0;
  return static_cast<int>(std::min<std::int64_t>(wanted, free / c.activation_bytes_per_sample));
}

void record(Work& w, const FrozenRequest& r, std::size_t ci, DeviceId d, int k) {
  const FrozenComponent& c = r.model->frozen[ci];
  w.answer.activation_bytes[d] =
      std::max(w.answer.activation_bytes[d], k * c.activation_bytes_per_sample);
  w.answer.weight_bytes[d] = w.weights;
  w.next_sample[ci] += k;
}

// Fills device d's gaps with pieces of whatever is left, component by component, each piece
// the largest that fits the rest of the gap and the memory left beside the step's peak.
void fill_gaps(Work& w, const FrozenRequest& r, DeviceId d) {
  std::int64_t free = r.free_step_bytes[d] - w.weights;
  if (free < 0) return;
  for (const IdleGap& gap : r.gaps[d]) {
    double at = gap.start_s;
    for (std::size_t ci = 0; ci < r.model->frozen.size(); ++ci) {
      const FrozenComponent& c = r.model->frozen[ci];
      while (w.next_sample[ci] < r.samples) {
        // Device 0 holds the next iteration's encoded outputs until the step reads them.
        const std::int64_t held = d == 0 ? c.output_bytes_per_sample : 0;
        const int most = largest_fitting(c, free, r.samples - w.next_sample[ci]);
        int lo = 0;
        for (int hi = most; lo < hi;) {  // the largest k with t(k) within the gap
          const int mid = (lo + hi + 1) / 2;
          if (at + frozen_piece_seconds(r, c, d, mid) <= gap.end_s &&
              (held == 0 || mid * held <= free - mid * c.activation_bytes_per_sample)) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        if (lo == 0) break;
        const double end = at + frozen_piece_seconds(r, c, d, lo);
        w.answer.ops.push_back(
            {c.name, d, "bubble", at, end, w.next_sample[ci], lo, gap.start_s, gap.end_s});
        w.answer.bubble_s += end - at;
        if (held > 0) free -= lo * held;
        record(w, r, ci, d, lo);
        at = end;
      }
    }
  }
}

// What no gap took: every device its share (S' / P, the first S' mod P one more) of each
// component's rest, in pieces as large as its memory before the step allows.
bool run_before_step(Work& w, const FrozenRequest& r) {
  std::vector<double> clock(r.pp, 0.0);
  for (std::size_t ci = 0; ci < r.model->frozen.size(); ++ci) {
    const FrozenComponent& c = r.model->frozen[ci];
    const int rest = r.samples - w.next_sample[ci];
    for (DeviceId d = 0; d < r.pp; ++d) {
      int share = rest / r.pp + (d < rest % r.pp ? 1 : 0);
      const std::int64_t free =
          std::min(r.free_before_bytes[d] - w.weights, r.free_step_bytes[d] - w.weights);
      while (share > 0) {
        const int k = largest_fitting(c, r.free_before_bytes[d] - w.weights, share);
        if (free < 0 || k == 0) {
          w.answer.reason = fmt::format(
              "device {}: {} of frozen weights and one sample of {} ({}) do not fit beside "
              "the step ({} free during it, {} before it)",
              d, format_bytes(w.weights), c.name, format_bytes(c.activation_bytes_per_sample),
              format_bytes(std::max<std::int64_t>(0, r.free_step_bytes[d])),
              format_bytes(std::max<std::int64_t>(0, r.free_before_bytes[d])));
          return false;
        }
        const double seconds = frozen_piece_seconds(r, c, d, k);
        w.answer.ops.push_back({c.name, d, "before_step", clock[d], clock[d] + seconds,
                                w.next_sample[ci], k, std::nullopt, std::nullopt});
        clock[d] += seconds;
        record(w, r, ci, d, k);
        share -= k;
      }
    }
  }
  w.answer.before_step_s = *std::max_element(clock.begin(), clock.end());
  return true;
}

}  // namespace

FrozenAnswer place_frozen(const FrozenRequest& request, FrozenPlacement placement) {
  Work w;
  w.answer.placement = placement;
  w.answer.weight_bytes.assign(request.pp, 0);
  w.answer.activation_bytes.assign(request.pp, 0);
  w.next_sample.assign(request.model->frozen.size(), 0);
  for (const FrozenComponent& c : request.model->frozen) {
    w.weights += c.weight_bytes;
    w.answer.cached_bytes_per_sample += c.output_bytes_per_sample;
  }
  if (placement == FrozenPlacement::cached) {
    w.answer.feasible = true;
    return w.answer;
  }
  if (placement == FrozenPlacement::bubbles) {
    for (DeviceId d = 0; d < request.pp && d < static_cast<int>(request.gaps.size()); ++d) {
      fill_gaps(w, request, d);
    }
  }
  w.answer.feasible = run_before_step(w, request);
  // Device by device, in time order: before-step ops (their own clock) first.
  std::stable_sort(w.answer.ops.begin(), w.answer.ops.end(),
                   [](const FrozenOp& a, const FrozenOp& b) {
                     if (a.device != b.device) return a.device < b.device;
                     if (a.in_bubble() != b.in_bubble()) return !a.in_bubble();
                     return a.start_s < b.start_s;
                   });
  return w.answer;
}

}  // namespace pulse
