// The ladder (see ladder_search.hpp). Candidates, none of them shaped by the budget:
//   1. the staircase (staircase.hpp) of the published V schedules (v_seeds.cpp), of our
//      engine-timed ZB-V at its own room, and of every list schedule the policy search
//      scores at the wide room;
//   2. rungs: up to kRungs members of that staircase, spread over it from the one holding
//      least. At each rung, least memory first: the policy search within the rung's own
//      peak, then the order search from the best of the rung, that search and the previous
//      rung's result, within the same peak, each for a fixed share of the work. A rung's
//      result depends on the rungs below it alone, and the rungs run while they fit the
//      budget.
// Every member and every rung's result that fits the budget goes to the synthesizer. With
// more memory the members that fit are a superset and more rungs run: the best can only get
// shorter. (The heuristic list schedule and the exact ILP are the synthesizer's, outside
// the ladder.) The staircase of a request is kept in the job's memo: a plan's screen, full
// synthesis and memory trims ask for it again with other budgets.

#include "ladder_search.hpp"

#include <algorithm>
#include <memory>

#include "order_search.hpp"
#include "pulse/schedule/v_families.hpp"
#include "v_seeds.hpp"

namespace pulse::detail {

// The staircase of one request, and the policy search's work it took.
struct LadderCandidates {
  std::vector<StairMember> members;
  int list_evaluations = 0;
};

namespace {

// Rungs at most: every member of a short staircase (V-Min's memory through V-Half's,
// V-auto's and ZB-V's to the list schedules holding more), else this many spread over it.
constexpr int kRungs = 12;

bool within(const std::vector<std::int64_t>& peaks, const std::vector<std::int64_t>& room) {
  for (std::size_t d = 0; d < peaks.size(); ++d) {
    if (peaks[d] > room[d]) return false;
  }
  return true;
}

LadderCandidates staircase_of(const LadderInput& in) {
  const PipelineModel& m = *in.model;
  const int M = in.num_microbatches;
  Staircase stairs(m, M, in.wide_room);
  for (StairMember& s : v_seeds({&m, M, in.wide_room, in.memo})) {
    stairs.add(std::move(s.schedule), s.method);
  }
  if (auto s = v_family_schedule({&m, M, VFamily::zb_v, zbv_room(m)}))
    stairs.add(std::move(*s), "zb-v");
  LadderCandidates out;
  if (in.wide_list) {
    SearchInput list = in.list;
    list.seen = [&stairs](const Schedule& s) { stairs.add(s, "list-search"); };
    out.list_evaluations = search_list_schedules(m, list).evaluations;
  }
  out.members = stairs.members();
  return out;
}

// The staircase, from the job's memo when it has it, as computing one is most of a synthesis
// and a plan asks for the same several times.
std::shared_ptr<const LadderCandidates> candidates(const LadderInput& in) {
  if (in.memo) {
    if (auto kept = in.memo->tables().ladders.recall(in.key)) return *kept;
  }
  auto found = std::make_shared<const LadderCandidates>(staircase_of(in));
  if (!in.memo || (in.expired && in.expired())) return found;  // cut short: not kept
  in.memo->tables().ladders.keep(in.key, found);
  return found;
}

std::vector<const StairMember*> rungs_of(const std::vector<StairMember>& members) {
  std::vector<const StairMember*> out;
  const std::size_t n = members.size();
  for (int i = 0; i < kRungs && n > 0; ++i) {
    const std::size_t k =
        n <= kRungs ? static_cast<std::size_t>(i) : (i * (n - 1) + (kRungs - 1) / 2) / (kRungs - 1);
    if (k >= n) break;
    if (out.empty() || out.back() != &members[k]) out.push_back(&members[k]);
  }
  return out;
}

struct Carried {
  std::optional<Schedule> schedule;
  double makespan_s = 0;
  void consider(const Schedule& s, double t) {
    if (!schedule || t < makespan_s) schedule = s, makespan_s = t;
  }
};

// What one rung may spend: its share of the work, within the request's limits.
struct Share {
  int list = 0, order = 0;
};

// Below these a rung's search is left out: a share of the policy search that does not
// cover its portfolio of uniform rules, or a handful of order moves, found nothing in
// bench_v_families (P = 16, M = 64: 10 list schedules and 27 replays a rung).
constexpr int kLeastListShare = 16;
constexpr int kLeastOrderShare = 40;

Share share_of(const LadderInput& in, std::size_t rungs) {
  const long ops = 3L * in.model->layout.num_stages() * in.num_microbatches;
  const long per = static_cast<long>(std::max<std::size_t>(1, rungs)) * ops;
  Share s{
      static_cast<int>(std::min<long>(in.max_list_evaluations, in.rung_list_op_replays / per)),
      static_cast<int>(std::min<long>(in.max_order_evaluations, in.rung_order_op_replays / per))};
  if (s.list < kLeastListShare) s.list = 0;
  if (s.order < kLeastOrderShare) s.order = 0;
  return s;
}

// One rung: the policy search and the order search within its peak, from the best so far.
void climb(const LadderInput& in, const StairMember& rung, Share share, Carried& carried,
           LadderResult& out) {
  carried.consider(rung.schedule, rung.makespan_s);
  if (share.list > 0) {
    SearchInput list = in.list_at(rung.peak);
    list.max_evaluations = share.list;
    const SearchResult found = search_list_schedules(*in.model, list);
    out.list_evaluations += found.evaluations;
    if (found.found) {
      in.offer(found.schedule, "list-search");
      carried.consider(found.schedule, found.makespan_s);
    }
  }
  if (share.order <= 0) return;
  std::vector<std::int64_t> room = in.wide_room;
  for (std::int64_t& r : room) r = std::min(r, rung.peak);
  const OrderSearchInput search{in.num_microbatches, in.static_bytes,
                                [room](const Timeline& t) {
                                  for (std::size_t d = 0; d < room.size(); ++d) {
                                    if (t.devices[d].resident_peak > room[d]) return false;
                                  }
                                  return true;
                                },
                                share.order, in.expired};
  OrderSearchResult found = search_orders(*in.model, search, *carried.schedule);
  out.order_evaluations += found.evaluations;
  if (found.improved) {
    in.offer(found.schedule, "order-search");
    carried.consider(found.schedule, found.makespan_s);
  }
}

}  // namespace

LadderResult ladder_search(const LadderInput& in) {
  LadderResult out;
  const std::shared_ptr<const LadderCandidates> stairs = candidates(in);
  out.list_evaluations = stairs->list_evaluations;
  for (const StairMember& member : stairs->members) {
    if (within(member.peaks, in.room)) in.offer(member.schedule, member.method);
  }
  if (!in.list_at) return out;
  const std::vector<const StairMember*> rungs = rungs_of(stairs->members);
  const Share share = share_of(in, rungs.size());
  Carried carried;
  for (const StairMember* rung : rungs) {
    if (!within(rung->peaks, in.room) || (in.stop && in.stop())) break;
    climb(in, *rung, share, carried, out);
  }
  return out;
}

}  // namespace pulse::detail
