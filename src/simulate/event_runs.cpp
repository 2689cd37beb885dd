// A device's memory over its runs of events (see event_runs.hpp).

#include "pulse/simulate/event_runs.hpp"

#include <algorithm>

namespace pulse::detail {

MemorySweep sweep_memory(MemoryRuns& runs) {
  MemorySweep out;
  std::int64_t activations = 0, skips = 0, charged = 0, most = 0;
  int inflight = 0;
  const std::vector<MemoryChange>& changes = runs.changes;
  runs.runs.sweep(
      [&](std::uint32_t r) {
        const MemoryChange& c = changes[r];
        activations += c.activations;
        skips += c.skips;
        charged += c.charged;
        inflight += c.inflight;
      },
      [&] {
        if (!out.any || activations + skips > most) {
          most = activations + skips;
          out.activations = activations;
          out.skips = skips;
          out.any = true;
        }
        out.charged.peak_bytes = std::max(out.charged.peak_bytes, charged);
        out.charged.max_inflight = std::max(out.charged.max_inflight, inflight);
      });
  return out;
}

}  // namespace pulse::detail
