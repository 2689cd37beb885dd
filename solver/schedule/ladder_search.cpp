// The ladder (see ladder_search.hpp). Candidates, none of them shaped by the budget:
//   1. the staircase (staircase.hpp) of the published V schedules (v_seeds.cpp), of our
//      engine-timed ZB-V at its own room and at the wide one, and of every list schedule
//      the policy search scores at the wide room (its in-flight limits from the round
//      trip to all microbatches give schedules holding little to much);
//   2. a chain along that staircase, least memory first: at each member, the order search
//      from the better of the member and the previous step's schedule, within the
//      member's own peak, for a fixed share of the replays. Its k-th step depends on the
//      first k members alone, and it runs while they fit the budget.
// Each member and each step that fits the budget goes to the synthesizer. With more
// memory the members that fit are a superset and the chain runs further: the best can
// only get shorter. (The heuristic list schedule and the exact ILP are the synthesizer's,
// outside the ladder.)

#include "ladder_search.hpp"

#include <algorithm>

#include "order_search.hpp"
#include "pulse/schedule/v_families.hpp"
#include "staircase.hpp"
#include "v_seeds.hpp"

namespace pulse::detail {

namespace {

// Chain steps, and so shares of the order search's replays: enough to walk from V-Min's
// memory through V-Half's and ZB-V's to the list schedules holding more.
constexpr int kChainSteps = 6;

bool within(const std::vector<std::int64_t>& peaks, const std::vector<std::int64_t>& room) {
  for (std::size_t d = 0; d < peaks.size(); ++d) {
    if (peaks[d] > room[d]) return false;
  }
  return true;
}

Staircase candidates(const LadderInput& in, LadderResult& out) {
  const PipelineModel& m = *in.model;
  const int M = in.num_microbatches;
  Staircase stairs(m, M, in.wide_room);
  for (StairMember& s : v_seeds({&m, M, in.wide_room, in.building_blocks})) {
    stairs.add(std::move(s.schedule), s.method);
  }
  for (const std::vector<std::int64_t>& room : {zbv_room(m), in.wide_room}) {
    if (auto s = v_family_schedule({&m, M, VFamily::zb_v, room})) stairs.add(std::move(*s), "zb-v");
  }
  SearchInput list = in.list;
  list.seen = [&stairs](const Schedule& s) { stairs.add(s, "list-search"); };
  out.list_evaluations = search_list_schedules(m, list).evaluations;
  return stairs;
}

void chain(const LadderInput& in, const Staircase& stairs, LadderResult& out) {
  const int share = in.order_evaluations / kChainSteps;
  if (share <= 0) return;
  std::optional<Schedule> carried;
  double carried_s = 0;
  int steps = 0;
  for (const StairMember& member : stairs.members()) {
    if (steps == kChainSteps || !within(member.peaks, in.room) || (in.stop && in.stop())) return;
    ++steps;
    const bool from_carried = carried && carried_s < member.makespan_s;
    const Schedule start = from_carried ? *carried : member.schedule;
    std::vector<std::int64_t> room = in.wide_room;
    for (std::int64_t& r : room) r = std::min(r, member.peak);
    const OrderSearchInput search{in.num_microbatches, in.static_bytes,
                                  [room](const Timeline& t) {
                                    for (std::size_t d = 0; d < room.size(); ++d) {
                                      if (t.devices[d].resident_peak > room[d]) return false;
                                    }
                                    return true;
                                  },
                                  share, in.expired};
    OrderSearchResult found = search_orders(*in.model, search, start);
    out.order_evaluations += found.evaluations;
    if (found.improved) {
      carried = std::move(found.schedule);
      carried_s = found.makespan_s;
      in.offer(*carried, "order-search");
    } else if (!from_carried) {
      carried = start;
      carried_s = member.makespan_s;
    }
  }
}

}  // namespace

LadderResult ladder_search(const LadderInput& in) {
  LadderResult out;
  const Staircase stairs = candidates(in, out);
  for (const StairMember& member : stairs.members()) {
    if (within(member.peaks, in.room)) in.offer(member.schedule, member.method);
  }
  chain(in, stairs, out);
  return out;
}

}  // namespace pulse::detail
