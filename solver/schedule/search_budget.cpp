// The searches' work limits (see search_budget.hpp).

#include "search_budget.hpp"

#include <algorithm>

#include "pulse/schedule/v_families.hpp"

namespace pulse::detail {

long ops_per_replay(const ScheduleRequest& r) {
  return r.model->layout.num_stages() * (r.split_backward ? 3L : 2L) * r.num_microbatches;
}

int list_budget(const ScheduleRequest& r) {
  const long ops = ops_per_replay(r);
  return static_cast<int>(std::min<long>({static_cast<long>(r.max_evaluations),
                                          std::max<long>(kMinListEvaluations, kListOpReplays / ops),
                                          kMaxListOpReplays / ops}));
}

int order_budget(const ScheduleRequest& r) {
  return static_cast<int>(
      std::min<long>(r.max_order_evaluations, kOrderOpReplays / ops_per_replay(r)));
}

ScheduleRequest searched_request(const ScheduleRequest& r) {
  ScheduleRequest s = r;
  if (r.family != ScheduleFamily::synthesized) {
    s.max_evaluations = s.max_order_evaluations = s.exact_max_ops = 0;
    s.probe_smaller_budget = false;
    return s;
  }
  if (r.memory_curve_points > 0 || (r.split_backward && is_two_stage_v(r.model->layout))) return s;
  s.max_evaluations = list_budget(r);
  s.max_order_evaluations = std::max(0, order_budget(r));
  if (ops_per_replay(r) > r.exact_max_ops) s.exact_max_ops = 0;
  return s;
}

}  // namespace pulse::detail
