// The published V families (see include/pulse/schedule/v_families.hpp): ZB-V by its greedy
// (zbv_greedy.cpp), V-Half and V-Min from their repeating patterns (slot_pattern.cpp), each
// through the registry of published schedules (published.cpp).

#include "pulse/schedule/v_families.hpp"

#include <algorithm>

#include "pulse/cost/memory.hpp"
#include "pulse/schedule/published.hpp"

namespace pulse {

const char* v_family_name(VFamily family) {
  switch (family) {
    case VFamily::zb_v:
      return "zb-v";
    case VFamily::v_half:
      return "v-half";
    case VFamily::v_min:
      return "v-min";
  }
  return "?";
}

bool is_two_stage_v(const StageLayout& layout) {
  const int P = layout.num_devices;
  if (P < 1 || layout.num_stages() != 2 * P) return false;
  for (StageId s = 0; s < 2 * P; ++s) {
    if (layout.device[s] != std::min(s, 2 * P - 1 - s)) return false;
  }
  return true;
}

std::vector<std::int64_t> zbv_room(const PipelineModel& model) {
  const int P = model.num_devices();
  const std::vector<std::int64_t> skip = skip_bytes_per_microbatch(model);
  std::vector<std::int64_t> room(P);
  for (DeviceId d = 0; d < P; ++d) {
    const std::int64_t down = model.stages[d].activation_bytes + skip[d];
    const std::int64_t up = model.stages[2 * P - 1 - d].activation_bytes;
    room[d] = 2 * P * std::max(down, up);
  }
  return room;
}

std::optional<Schedule> v_family_schedule(const VFamilyRequest& r) {
  static constexpr PublishedSchedule kPublished[] = {
      PublishedSchedule::zb_v, PublishedSchedule::v_half, PublishedSchedule::v_min};
  PublishedRequest request{r.model, r.num_microbatches, true, r.activation_room};
  auto s = published_schedule(kPublished[static_cast<int>(r.family)], request);
  if (!s) return std::nullopt;
  return std::move(*s);
}

}  // namespace pulse
