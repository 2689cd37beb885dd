#include "pulse/cost/memory.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

#include <fmt/format.h>

namespace pulse {

bool MemoryModel::set_precision(const std::string& name) {
  // {name, weights, gradients, optimizer state} per parameter (memory.hpp says whence); an
  // alias is written as the name it stands for.
  struct Row {
    const char* name;
    const char* written;
    double weights, gradients, optimizer;
  };
  static constexpr Row kRows[] = {
      {"mixed", "mixed", 2, 2, 12},
      {"bf16-mixed", "mixed", 2, 2, 12},
      {"fp16-mixed", "fp16-mixed", 2, 2, 12},
      {"bf16", "bf16", 2, 2, 4},
      {"fp32", "fp32", 4, 4, 8},
      {"fp64", "fp64", 8, 8, 16},
  };
  for (const Row& row : kRows) {
    if (name != row.name) continue;
    weight_bytes_per_param = row.weights, gradient_bytes_per_param = row.gradients,
    optimizer_bytes_per_param = row.optimizer;
    precision = row.written;
    return true;
  }
  return false;
}

std::string MemoryModel::precision_contradiction() const {
  MemoryModel named;
  if (!named.set_precision(precision)) {
    return fmt::format("precision \"{}\" is not one of the names pulse-plan plans", precision);
  }
  const auto bytes = [](const MemoryModel& m) {
    return std::tuple{m.weight_bytes_per_param, m.gradient_bytes_per_param,
                      m.optimizer_bytes_per_param};
  };
  if (bytes(named) == bytes(*this)) return "";
  return fmt::format(
      "precision \"{}\" holds {:g} + {:g} + {:g} bytes per parameter (weights, gradients, "
      "optimizer state), not the {:g} + {:g} + {:g} stated beside it",
      precision, named.weight_bytes_per_param, named.gradient_bytes_per_param,
      named.optimizer_bytes_per_param, weight_bytes_per_param, gradient_bytes_per_param,
      optimizer_bytes_per_param);
}

std::vector<MemoryBreakdown> static_memory(const PipelineModel& model, const MemoryModel& memory,
                                           int dp) {
  std::vector<MemoryBreakdown> out(model.num_devices());
  const std::vector<std::int64_t> params = model.device_params();
  for (int d = 0; d < model.num_devices(); ++d) {
    out[d].weights = memory.weight_share(params[d], dp);
    out[d].gradients = memory.gradient_share(params[d], dp);
    out[d].optimizer = memory.optimizer_bytes(params[d], dp);
    std::int64_t rebuilt = 0, largest_layer = 0;
    for (StageId s : model.layout.stages_on(d)) {
      rebuilt = std::max(rebuilt, model.stages[s].recompute_workspace_bytes);
      largest_layer = std::max(largest_layer, model.stages[s].largest_layer_params);
    }
    // FSDP gathers one layer while the next is prefetched: two unsharded layers at once.
    const bool gathers = memory.zero_stage >= 3 && dp > 1;
    out[d].workspace = rebuilt + (gathers ? 2 * memory.weight_bytes(largest_layer) : 0);
  }
  return out;
}

std::vector<std::int64_t> skip_bytes_per_microbatch(const PipelineModel& model) {
  const StageLayout& layout = model.layout;
  std::vector<std::int64_t> bytes(model.num_devices(), 0);
  for (const SkipPlacement& s : model.skips) {
    if (s.local) bytes[layout.device[s.producer_stage]] += s.bytes;
  }
  for (const Transfer& t : model.transfers) {
    bytes[layout.device[t.from]] += t.forward.skip;
    bytes[layout.device[t.to]] += t.forward.skip;
  }
  return bytes;
}

std::vector<std::int64_t> bytes_per_microbatch_at_most(const PipelineModel& model) {
  std::vector<std::int64_t> bytes = skip_bytes_per_microbatch(model);
  for (StageId s = 0; s < model.layout.num_stages(); ++s) {
    bytes[model.layout.device[s]] += model.stages[s].activation_bytes;
  }
  return bytes;
}

std::vector<std::int64_t> bytes_per_microbatch_staying(const PipelineModel& model) {
  std::vector<std::int64_t> bytes = skip_bytes_per_microbatch(model);
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    const std::vector<StageId> mine = model.layout.stages_on(d);
    if (!mine.empty()) bytes[d] += model.stages[mine.front()].activation_bytes;
  }
  return bytes;
}

namespace {

// How many microbatches, each holding per_mb[d] bytes, fit beside the static state.
std::vector<int> fitting(const std::vector<std::int64_t>& per_mb,
                         const std::vector<std::int64_t>& static_bytes, std::int64_t capacity,
                         const std::vector<int>& wanted) {
  std::vector<int> limits(per_mb.size(), 0);
  for (std::size_t d = 0; d < per_mb.size(); ++d) {
    const std::int64_t free = capacity - static_bytes[d];
    if (free <= 0) continue;
    const std::int64_t fits = per_mb[d] > 0 ? free / per_mb[d] : wanted[d];
    limits[d] = static_cast<int>(std::min<std::int64_t>(wanted[d], fits));
  }
  return limits;
}

}  // namespace

std::vector<int> memory_inflight_limits(const PipelineModel& model,
                                        const std::vector<std::int64_t>& static_bytes,
                                        std::int64_t capacity, const std::vector<int>& wanted) {
  return fitting(bytes_per_microbatch_at_most(model), static_bytes, capacity, wanted);
}

std::vector<int> resident_inflight_limits(const PipelineModel& model,
                                          const std::vector<std::int64_t>& static_bytes,
                                          std::int64_t capacity, const std::vector<int>& wanted) {
  return fitting(bytes_per_microbatch_staying(model), static_bytes, capacity, wanted);
}

namespace {

// Sorts `v`, made of a few ascending runs, by merging neighbouring runs until one is left:
// the sequence std::sort gives (equal elements are alike). With many runs, std::sort.
template <class T>
void sort_runs(std::vector<T>& v) {
  constexpr std::size_t kFewRuns = 64;
  std::vector<std::size_t> ends{0};  // run k is [ends[k], ends[k + 1])
  for (std::size_t k = 1; k < v.size(); ++k) {
    if (v[k] < v[k - 1]) {
      if (ends.size() > kFewRuns) {
        std::sort(v.begin(), v.end());
        return;
      }
      ends.push_back(k);
    }
  }
  ends.push_back(v.size());
  while (ends.size() > 2) {
    std::vector<std::size_t> merged{0};
    std::size_t r = 0;
    for (; r + 2 < ends.size(); r += 2) {
      std::inplace_merge(v.begin() + ends[r], v.begin() + ends[r + 1], v.begin() + ends[r + 2]);
      merged.push_back(ends[r + 2]);
    }
    if (r + 1 < ends.size()) merged.push_back(ends.back());  // an odd run, carried over
    ends = std::move(merged);
  }
}

}  // namespace

Residency residency(const PipelineModel& model, DeviceId device,
                    const std::vector<ActivationHold>& holds) {
  const std::vector<StageId> stages = model.layout.stages_on(device);
  const std::int64_t skip = skip_bytes_per_microbatch(model)[device];
  // (time, bytes, microbatches) deltas; at one instant releases (negative) come first. Every
  // allocation, then every release: a schedule runs each stage's microbatches in order and
  // simulate lists a stage's holds by microbatch, so each stage's allocations and each
  // stage's releases are an ascending run, merged rather than sorted (a few runs instead of
  // log n passes: most of this function). Holds in another order only make more runs.
  std::vector<std::tuple<double, std::int64_t, int>> events(2 * holds.size());
  for (std::size_t k = 0; k < holds.size(); ++k) {
    const ActivationHold& h = holds[k];
    const bool admits = !stages.empty() && h.stage == stages.front();
    const std::int64_t bytes = model.stages[h.stage].activation_bytes + (admits ? skip : 0);
    events[k] = {h.from_s, bytes, admits ? 1 : 0};
    events[holds.size() + k] = {h.until_s, -bytes, admits ? -1 : 0};
  }
  sort_runs(events);
  Residency r;
  std::int64_t held = 0;
  int inflight = 0;
  for (const auto& [time, bytes, microbatches] : events) {
    held += bytes;
    inflight += microbatches;
    r.peak_bytes = std::max(r.peak_bytes, held);
    r.max_inflight = std::max(r.max_inflight, inflight);
  }
  return r;
}

bool within_memory(std::int64_t static_bytes, std::int64_t resident_bytes, std::int64_t capacity) {
  return static_bytes + resident_bytes <= capacity;
}

}  // namespace pulse
