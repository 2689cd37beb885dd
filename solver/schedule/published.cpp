// The registry of published schedules (published.hpp): one row per schedule, its name and
// its generator behind one signature. The generators are the restatements beside this file;
// each row only turns the request into the generator's own arguments.

#include "pulse/schedule/published.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "dualpipev.hpp"
#include "pulse/schedule/list_schedule.hpp"
#include "pulse/schedule/v_families.hpp"
#include "slot_pattern.hpp"
#include "torch_zbv.hpp"
#include "v_auto.hpp"
#include "v_seeds.hpp"
#include "zbv_fill.hpp"
#include "zbv_greedy.hpp"

namespace pulse {

namespace {

using Generator = Result<Schedule> (*)(const PublishedRequest& request);

struct Row {
  PublishedSchedule schedule;
  const char* name;
  bool v_only;  ///< Needs the two-stage V and a split backward.
  Generator generate;
};

detail::ScalarCosts scalar_costs(const PublishedRequest& r) {
  if (!r.scalar_costs) return detail::authors_costs(*r.model);
  const ScalarStageCosts& c = *r.scalar_costs;
  return {c.forward_ms, c.input_grad_ms, c.weight_grad_ms, c.link_ms};
}

Result<Schedule> gpipe(const PublishedRequest& r) {
  return gpipe_schedule(*r.model, r.num_microbatches, r.split_backward);
}

Result<Schedule> one_f_one_b(const PublishedRequest& r) {
  const StageLayout& layout = r.model->layout;
  const std::vector<int> limits =
      r.inflight_limit.empty() ? default_inflight(layout, r.num_microbatches) : r.inflight_limit;
  if (static_cast<int>(limits.size()) != layout.num_devices) {
    return input_error(
        fmt::format("1f1b: {} in-flight limits for {} devices", limits.size(), layout.num_devices));
  }
  return list_schedule(*r.model, r.num_microbatches, limits, r.split_backward,
                       ListPolicy::backward_first(layout.num_stages()));
}

Result<Schedule> zb_v(const PublishedRequest& r) {
  const std::vector<std::int64_t> room =
      r.activation_room.empty() ? zbv_room(*r.model) : r.activation_room;
  if (static_cast<int>(room.size()) != r.model->num_devices()) {
    return input_error(fmt::format("zb-v: {} activation rooms for {} devices", room.size(),
                                   r.model->num_devices()));
  }
  if (auto s = detail::zbv_schedule(*r.model, r.num_microbatches, room)) return std::move(*s);
  return infeasible_error("zb-v: the activation room is too small for its warm-up");
}

Result<Schedule> zb_v_fill(const PublishedRequest& r) {
  const int P = r.model->num_devices();
  if (auto z = detail::zbv_fill_pick({P, r.num_microbatches, scalar_costs(r), r.max_mem, {}})) {
    return std::move(z->schedule);
  }
  return infeasible_error(fmt::format(
      "zb-v-fill: the authors' fill loop raises at a budget of {} stage activations", r.max_mem));
}

template <VFamily family>
Result<Schedule> slot_pattern(const PublishedRequest& r) {
  return detail::slot_pattern_schedule(*r.model, r.num_microbatches, family);
}

Result<Schedule> v_auto(const PublishedRequest& r) {
  const int P = r.model->num_devices();
  if (auto rows = detail::v_auto_pick(P, r.num_microbatches, scalar_costs(r), r.max_mem)) {
    return detail::slot_rows_schedule(*rows);
  }
  return infeasible_error(fmt::format(
      "v-auto: the authors' search raises or finds no block at a budget of {} stage activations",
      r.max_mem));
}

Result<Schedule> dualpipev(const PublishedRequest& r) {
  const int P = r.model->num_devices(), M = r.num_microbatches;
  if (auto s = detail::dualpipev_schedule(P, M)) return std::move(*s);
  return infeasible_error(
      fmt::format("dualpipev: needs at least 2P = {} microbatches, got {}", 2 * P, M));
}

Result<Schedule> zbv_zero_bubble(const PublishedRequest& r) {
  return detail::torch_zbv_schedule(r.model->num_devices(), r.num_microbatches);
}

// A split order without the split: each I a full backward in its place, the W ops dropped.
Schedule without_split(Schedule s) {
  for (std::vector<Op>& ops : s.device_ops) {
    std::erase_if(ops, [](const Op& op) { return op.kind == OpKind::backward_weight; });
    ops.shrink_to_fit();  // a third of the ops gone: at pp 512 that is 25 MB an order
    for (Op& op : ops) {
      if (op.kind == OpKind::backward_input) op.kind = OpKind::backward;
    }
  }
  s.split_backward = false;
  return s;
}

const std::vector<Row>& rows() {
  using S = PublishedSchedule;
  static const std::vector<Row> table = {
      {S::gpipe, "gpipe", false, gpipe},
      {S::one_f_one_b, "1f1b", false, one_f_one_b},
      {S::zb_v, "zb-v", true, zb_v},
      {S::zb_v_fill, "zb-v-fill", true, zb_v_fill},
      {S::v_half, "v-half", true, slot_pattern<VFamily::v_half>},
      {S::v_min, "v-min", true, slot_pattern<VFamily::v_min>},
      {S::v_auto, "v-auto", true, v_auto},
      {S::dualpipev, "dualpipev", true, dualpipev},
      {S::zbv_zero_bubble, "zbv-zero-bubble", true, zbv_zero_bubble},
  };
  return table;
}

const Row& row_of(PublishedSchedule schedule) {
  return rows()[static_cast<std::size_t>(schedule)];
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const std::vector<PublishedSchedule>& published_schedules() {
  static const std::vector<PublishedSchedule> all = [] {
    std::vector<PublishedSchedule> out;
    for (const Row& r : rows()) out.push_back(r.schedule);
    return out;
  }();
  return all;
}

const char* published_schedule_name(PublishedSchedule schedule) {
  return row_of(schedule).name;
}

Result<PublishedSchedule> published_schedule_named(std::string_view name) {
  const std::string wanted = lower(name);
  std::string known;
  for (const Row& r : rows()) {
    if (wanted == r.name) return r.schedule;
    known += fmt::format("{}{}", known.empty() ? "" : ", ", r.name);
  }
  return usage_error(
      fmt::format("unknown schedule \"{}\"; the published schedules are {}", name, known));
}

Result<Schedule> published_schedule(PublishedSchedule schedule, const PublishedRequest& r) {
  const Row& row = row_of(schedule);
  if (r.model == nullptr || r.num_microbatches < 1) {
    return input_error(
        fmt::format("{}: needs a pipeline model and at least one microbatch", row.name));
  }
  if (row.v_only && !is_two_stage_v(r.model->layout)) {
    return input_error(fmt::format(
        "{}: needs the V with two stages per device (stage d and 2P-1-d on device d)", row.name));
  }
  Result<Schedule> out = row.generate(r);
  if (out && row.v_only && !r.split_backward) return without_split(std::move(*out));
  return out;
}

}  // namespace pulse
