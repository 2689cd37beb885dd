// The schedule synthesizer: the heuristic list schedule, the published V families, a search
// over list-schedule policies, a search over op orders from the best of them, then the exact
// ILP when the instance is small; every candidate is replayed by the simulator and the best
// kept (shortest, then holding the least). See include/pulse/schedule/synthesize.hpp.

#include "pulse/schedule/synthesize.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "answer_memo.hpp"
#include "dualpipev.hpp"
#include "exact_ilp.hpp"
#include "ladder_search.hpp"
#include "lower_bound.hpp"
#include "op_graph.hpp"
#include "order_search.hpp"
#include "policy_search.hpp"
#include "pulse/base/units.hpp"
#include "pulse/cost/memory.hpp"
#include "pulse/schedule/list_schedule.hpp"
#include "pulse/schedule/published.hpp"
#include "pulse/schedule/v_families.hpp"
#include "search_budget.hpp"
#include "synthesis_state.hpp"

namespace pulse {

namespace {

// The ladder's rungs share twice the op-replays of one policy search and of one order
// search (each rung within the request's own limits: small instances get them whole); the
// searches' own limits are in search_budget.hpp.
constexpr long kRungListOpReplays = 2 * detail::kListOpReplays;
constexpr long kRungOrderOpReplays = 2 * detail::kOrderOpReplays;

// The memory curve's budgets, as fractions of the answer's peak activation memory, and the
// work each smaller synthesis may spend (deterministic limits: a short policy search, no
// order search; the trim below uses the same): the curve shows what memory buys, roughly.
constexpr std::array<std::pair<int, int>, 3> kCurveFractions{{{3, 4}, {1, 2}, {1, 3}}};
constexpr int kCurveEvaluations = 60;
constexpr long kCurveOpReplays = 100'000;  // and at most this many op-replays each
// How many times the answer may be replaced by an equally fast one at 3/4 of its peak.
constexpr int kTrimSteps = 2;

using detail::adopt;
using detail::Best;
using detail::better;
using detail::compare;
using detail::Deadline;
using detail::footprint;
using detail::iteration;
using detail::Memory;
using detail::memory_of;

// The heuristic: issue 2's V 1F1B list schedule, the published 1F1B's rule (published.cpp's
// one_f_one_b: backward first, the round-trip minimum in flight) within what fits in any
// order. Run with its records, so that the policy search, whose first candidate it is, takes
// them instead of running it again, and with its replay (`replay`), which the synthesizer
// would otherwise make next (at pp 512 over 2048 layers each is about a second).
Schedule first_list_schedule(const ScheduleRequest& r, const Memory& mem, detail::FirstRun& run,
                             ListReplay& replay, AnswerTimeline timeline) {
  run = detail::first_candidate(*r.model, r.num_microbatches, mem.safe_cap);
  replay.static_bytes = &r.static_bytes;
  replay.last_ops_only = timeline == AnswerTimeline::last_ops;
  // The 1F1B family's answer is this schedule: its replay holds the bytes really held at
  // each peak as well, which synthesize_schedule would otherwise replay it again for.
  if (r.family == ScheduleFamily::one_f_one_b) replay.peaks = Peaks::held;
  // A fixed family's schedule is this one or GPipe's: no policy search takes its ties (at pp
  // 1024 over 2048 layers, chains of 1024 stages, recording them was a tenth of the run).
  ListTies* ties = r.family == ScheduleFamily::synthesized ? &run.ties : nullptr;
  return list_schedule(*r.model, r.num_microbatches, run.limits, r.split_backward, run.policy,
                       &run.makespan_s, &run.checked, ties, nullptr, nullptr, &replay);
}

// GPipe holds every microbatch in flight: where a device has room for fewer, say so, before
// any schedule is made (at pp 1024 over 2048 layers the heuristic's list schedule, which
// GPipe's replaces, took 1 s where GPipe fitted nowhere).
Status check_gpipe_room(const ScheduleRequest& r, const Memory& mem) {
  if (r.family != ScheduleFamily::gpipe) return Ok{};
  for (int d = 0; d < r.model->num_devices(); ++d) {
    if (mem.safe_cap[d] < r.num_microbatches) {
      return infeasible_error(fmt::format(
          "GPipe keeps all {} microbatches in flight; pipeline device {} has room for {}",
          r.num_microbatches, d, mem.safe_cap[d]));
    }
  }
  return Ok{};
}

// The baselines' own schedules: 1F1B is the heuristic list schedule itself; GPipe holds
// every microbatch in flight.
Result<ScheduleAnswer> fixed_schedule(const ScheduleRequest& r, const Memory& mem, Best& best,
                                      ScheduleAnswer& a) {
  if (r.family == ScheduleFamily::gpipe) {  // its room checked first (check_gpipe_room)
    best.have = false;
    auto gpipe = published_schedule(PublishedSchedule::gpipe,
                                    {r.model, r.num_microbatches, r.split_backward});
    if (!gpipe) return gpipe.error();
    if (!best.offer(std::move(*gpipe), r, mem, "gpipe")) {
      return internal_error("the GPipe schedule did not replay");
    }
  } else {
    best.method = "1f1b";
  }
  adopt(best, a);
  a.status = SolveStatus::fixed;
  a.stopped_by = "not run";
  return std::move(a);  // not a copy: at pp 1024, 218 MB of schedule and timeline
}

milp::Limits limits_for(const ScheduleRequest& r, const Deadline& deadline) {
  milp::Limits l;
  l.max_nodes = r.max_nodes;
  l.max_seconds = std::max(0.0, deadline.left());
  l.seed = r.seed;
  return l;
}

// Not even one microbatch fits some device: say where, and what stopped it.
Status check_room(const ScheduleRequest& r, const Memory& mem) {
  for (int d = 0; d < r.model->num_devices(); ++d) {
    if (mem.safe_cap[d] >= 1) continue;
    const std::int64_t left = r.memory_capacity - r.static_bytes[d].total();
    if (r.activation_budget > 0 && r.activation_budget < left) {
      return infeasible_error(fmt::format(
          "pipeline device {} cannot hold one microbatch in flight within the activation "
          "budget of {} (one microbatch holds {} there)",
          d, format_bytes(r.activation_budget),
          format_bytes(bytes_per_microbatch_at_most(*r.model)[d])));
    }
    return infeasible_error(
        fmt::format("pipeline device {} cannot hold one microbatch in flight within {}", d,
                    format_bytes(r.memory_capacity)));
  }
  return Ok{};
}

struct Search {
  const ScheduleRequest& r;
  const Memory& mem;
  const Deadline& deadline;
  Best& best;
  ScheduleAnswer& a;
  bool out_of_time = false;
  double known_bound_s = 0;  // a bound on every schedule here from the caller (synthesize)
  const detail::FirstRun* first = nullptr;  // the heuristic's run, the best's first schedule

  bool at_bound() const { return best.timeline.makespan_s <= a.lower_bound_s * (1 + 1e-9); }
  bool go_on() const { return !out_of_time && !deadline.expired() && !at_bound(); }

  // The policy search's input at `room`: its work limit in list schedules
  // (search_budget.hpp).
  detail::SearchInput list_input(const Memory& room) const {
    const int budget = detail::list_budget(r);
    return detail::SearchInput{
        r.num_microbatches,
        room.reach_cap,
        room.safe_cap,
        room.room,
        r.split_backward,
        budget,
        3,
        [this] { return deadline.expired(); },
        [&room](const std::vector<std::int64_t>& resident_peaks) {
          return room.fits(resident_peaks);
        },
        {},
        0,
        // Shared with the job's other searches over this model (list_outcomes.hpp).
        detail::list_outcomes(r.memo, *r.model, r.num_microbatches, r.split_backward)};
  }

  // The policy search at the request's room, which ends once its best is at the bound
  // (nothing after could be kept); not the ladder's, whose rooms the bound is not for.
  void list_policies() {
    if (!go_on()) return;
    detail::SearchInput in = list_input(mem);
    in.stop_at = std::max(a.lower_bound_s, known_bound_s);
    in.first = first;
    const detail::SearchResult found = detail::search_list_schedules(*r.model, in);
    a.list_evaluations = found.evaluations;
    // The heuristic's own schedule is the best already (it would replay to a tie, not kept).
    if (found.found && !found.first) best.offer(found.schedule, r, mem, "list-search");
  }

  // Local search over explicit op orders, from the best so far.
  void orders() {
    const int budget = detail::order_budget(r);
    if (!go_on() || budget <= 0) return;
    detail::OrderSearchInput in{r.num_microbatches, r.static_bytes,
                                [&](const Timeline& t) { return mem.fits(t); }, budget,
                                [&] { return deadline.expired(); }};
    detail::OrderSearchResult found = detail::search_orders(*r.model, in, best.schedule);
    a.order_evaluations = found.evaluations;
    if (found.improved) best.offer(std::move(found.schedule), r, mem, "order-search");
  }

  // On a two-stage V with a split backward: the ladder (ladder_search.hpp), whose
  // candidates the activation budget does not shape, in place of the families, the policy
  // search and the order search at the budget's room. (Screening gets it too: a plan keeps
  // the faster of a configuration's screen and its full synthesis.)
  bool ladder_applies() const { return r.split_backward && is_two_stage_v(r.model->layout); }
  void ladder() {
    if (!go_on()) return;
    ScheduleRequest open = r;
    open.activation_budget = 0;
    const Memory wide = memory_of(open);
    detail::LadderInput in;
    in.model = r.model;
    in.num_microbatches = r.num_microbatches;
    in.static_bytes = r.static_bytes;
    in.wide_room = wide.room;
    in.room = mem.room;
    in.list = list_input(wide);
    // The rungs and the wide room's policy search where the order search runs (full
    // effort): a screen or a memory trim takes the seeds and the heuristic alone.
    std::deque<Memory> rooms;  // the rungs' rooms, alive while their inputs are
    in.wide_list = r.max_order_evaluations > 0;
    if (r.max_order_evaluations > 0) {
      in.rung_list_op_replays = kRungListOpReplays;
      in.rung_order_op_replays = kRungOrderOpReplays;
      in.max_list_evaluations = in.list.max_evaluations;
      in.max_order_evaluations = r.max_order_evaluations;
      in.list_at = [&open, &rooms, this](std::int64_t budget) {
        ScheduleRequest at = open;
        at.activation_budget = budget;
        rooms.push_back(memory_of(at));
        return list_input(rooms.back());
      };
    }
    // The staircase's key: the request without what the staircase does not depend on (the
    // budget, the curve, the order search's limit, the probe at 3/4 of the peak, which asks
    // for this staircase again; the integer program's limits and the wall clock, which the
    // ladder does not use: a staircase the clock cut short is not kept).
    open.memory_curve_points = open.max_order_evaluations = 0;
    open.probe_smaller_budget = false;
    open.max_nodes = open.exact_max_ops = open.seed = 0;
    open.max_seconds = 0;
    in.memo = r.memo;
    in.key = {detail::schedule_key(open), in.wide_list};
    in.stop = [this] { return !go_on(); };
    in.expired = [this] { return deadline.expired(); };
    in.offer = [this](Schedule s, const std::string& how) {
      best.offer(std::move(s), r, mem, how);
    };
    const detail::LadderResult found = detail::ladder_search(in);
    a.list_evaluations = found.list_evaluations;
    a.order_evaluations = found.order_evaluations;
  }

  // The exact integer program, when the instance is small enough to prove optimality; its
  // memory rows count bytes, so its optimum is optimal under the memory rule. Where memory
  // binds (the rows are there), CBC takes about 20 ms a node on these models, so the
  // instance must be half as large for the node limit, not the clock, to end the solve.
  // solve_exact also refuses a model of too many rows and caps the nodes by them
  // (exact_ilp.hpp): nodes alone do not bound CBC's work.
  void exact(const detail::OpGraph& graph) {
    const std::vector<std::int64_t> most = bytes_per_microbatch_at_most(*r.model);
    bool binds = false;
    for (std::size_t d = 0; d < most.size(); ++d)
      binds = binds || most[d] * r.num_microbatches > mem.room[d];
    const int largest = binds ? r.exact_max_ops / 2 : r.exact_max_ops;
    if (!go_on() || detail::exact_model_size(graph, r.num_microbatches) > largest) return;
    const detail::EngineInput in{r.model, r.num_microbatches, mem.reach_cap, r.split_backward,
                                 mem.room};
    // The warm start reads every op's start: a best replayed for its figures alone
    // (KeptOps::last) is replayed whole first (the same replay: the same figures, to the bit).
    if (best.timeline.last_ops_only) {
      auto whole =
          simulate(*r.model, best.schedule, r.num_microbatches, r.static_bytes, Peaks::rule_only);
      if (!whole) return;
      best.timeline = std::move(*whole);
    }
    const auto found = detail::solve_exact(graph, in, best.timeline, limits_for(r, deadline));
    if (!found.solved) return;  // too many rows for its work to be bounded (exact_ilp.hpp)
    ++a.milp_solves;
    a.milp_nodes += found.milp.nodes;
    a.stopped_by = found.milp.stopped_by;
    out_of_time = out_of_time || found.milp.stopped_by == "time limit";
    if (found.found) best.offer(found.schedule, r, mem, "exact-ilp");
    // The model's timing is the engine's only with blocking sends; then its proven bound is
    // a bound on every schedule and may beat the one-machine bound.
    if (!r.model->overlap_comm && found.milp.bound > a.lower_bound_s) {
      a.lower_bound_s = std::min(found.milp.bound, best.timeline.makespan_s);
    }
  }

  void finish() {
    const bool proven = at_bound();
    adopt(best, a);
    if (proven) {
      a.status = SolveStatus::optimal;
    } else if (out_of_time || deadline.expired()) {
      a.status = SolveStatus::time_limit;
    } else {
      a.status = best.method == "list" ? SolveStatus::heuristic : SolveStatus::feasible;
    }
    if (a.milp_solves == 0) {
      a.stopped_by = out_of_time ? "time limit" : proven ? "lower bound" : "not run";
    }
  }
};

Result<ScheduleAnswer> synthesize(const ScheduleRequest& r, bool with_bound,
                                  double known_bound_s = 0,
                                  AnswerTimeline timeline = AnswerTimeline::whole);

// The one-machine relaxations' bound under the memory rule (lower_bound.hpp), from the job's
// memo when it has it: it depends on the model, the split, M and the room alone.
double relaxed_bound(const detail::OpGraph& graph, const ScheduleRequest& r, const Memory& mem) {
  const auto relaxation = detail::memory_relaxation(graph, *r.model, mem.room);
  return detail::schedule_lower_bound(graph, r.num_microbatches, relaxation);
}

double memory_bound(const ScheduleRequest& r, const Memory& mem, const detail::OpGraph* graph) {
  const detail::RoomKey key{*r.model, r.split_backward, r.num_microbatches, mem.room};
  return detail::recall_bound(r.memo, key, [&] {
    if (graph) return relaxed_bound(*graph, r, mem);
    return relaxed_bound(detail::build_op_graph(*r.model, r.split_backward), r, mem);
  });
}

// A smaller synthesis of the same request with at most `budget` bytes of activations per
// device (the curve's effort, or with `full` the request's own, as `plan --activation-budget`
// would search); nullopt when nothing fits it or no time is left.
std::optional<ScheduleAnswer> at_budget(const ScheduleRequest& r, std::int64_t budget,
                                        const Deadline& deadline, ScheduleAnswer& a,
                                        bool full = false, double known_bound_s = 0,
                                        AnswerTimeline full_timeline = AnswerTimeline::whole) {
  ScheduleRequest sub = r;
  sub.activation_budget = budget;
  sub.memory_curve_points = 0;
  sub.probe_smaller_budget = false;
  if (!full) {
    const long ops = detail::ops_per_replay(r);
    sub.max_evaluations = static_cast<int>(std::min<long>(
        {r.max_evaluations, kCurveEvaluations, std::max(1L, kCurveOpReplays / ops)}));
    sub.max_order_evaluations = 0;
    sub.exact_max_ops = 0;
  }
  sub.max_seconds = deadline.left();
  if (sub.max_seconds <= 0) {
    a.status = SolveStatus::time_limit;
    return std::nullopt;
  }
  // A point of the curve reads the answer's figures alone, and a trim that adopts it replays
  // the answer whole after (trim_memory, hold_peaks): its replays keep each device's last ops
  // only. Where the first list schedule is the answer, as at pp 1024 over 2048 layers (one
  // list schedule a point), 4.2 million ops were recorded and dropped. The probe's answer
  // may become the synthesis's: it keeps what the synthesis keeps (`full_timeline`).
  auto found =
      synthesize(sub, false, known_bound_s, full ? full_timeline : AnswerTimeline::last_ops);
  if (!found) return std::nullopt;
  if (found->status == SolveStatus::time_limit) a.status = SolveStatus::time_limit;
  a.list_evaluations += found->list_evaluations;
  return std::move(*found);
}

// Whether `t` is exactly as short as `than` in makespan and iteration (times are on the
// nanosecond quantum, so no tolerance: a plan trimmed after the choice keeps its figures to
// the last bit).
bool as_fast(const Timeline& t, const Timeline& than, const std::vector<double>& allreduce_s) {
  return t.makespan_s == than.makespan_s &&
         iteration(t, allreduce_s) == iteration(than, allreduce_s);
}

// `b`'s schedule replaces the answer's.
void adopt(ScheduleAnswer& a, ScheduleAnswer&& b) {
  a.schedule = std::move(b.schedule);
  a.timeline = std::move(b.timeline);
  a.method = b.method;
  a.schedule.policy = a.method;
  a.makespan_s = a.timeline.makespan_s;
  a.peak_activation_bytes = b.peak_activation_bytes;
}

// The second objective, once more: while a synthesis at 3/4 of the answer's peak is better
// (or, with `keep_times`, exactly as fast), its schedule, holding less, replaces the
// answer's. Then the memory curve (request's memory_curve_points): the makespans at 3/4,
// 1/2 and 1/3 of the final peak.
void trim_and_curve(const ScheduleRequest& r, const Deadline& deadline, ScheduleAnswer& a,
                    bool keep_times) {
  const int points = std::min<int>(r.memory_curve_points, kCurveFractions.size());
  if (points <= 0) return;
  std::optional<ScheduleAnswer> three_quarters;
  for (int step = 0; step < kTrimSteps && !three_quarters; ++step) {
    auto smaller = at_budget(r, a.peak_activation_bytes * 3 / 4, deadline, a);
    if (!smaller) break;
    const bool replaces = keep_times ? as_fast(smaller->timeline, a.timeline, r.allreduce_s)
                                     : better(smaller->timeline, a.timeline, r.allreduce_s);
    if (!replaces) {
      three_quarters = std::move(smaller);
      break;
    }
    adopt(a, std::move(*smaller));
  }
  for (int i = 0; i < points; ++i) {
    const auto [num, den] = kCurveFractions[i];
    const std::int64_t budget = a.peak_activation_bytes * num / den;
    auto point =
        i == 0 && three_quarters ? std::move(three_quarters) : at_budget(r, budget, deadline, a);
    if (point) a.memory_curve.push_back({budget, point->makespan_s});
  }
}

// The bound the synthesis certifies with (lower_bound.hpp) at `budget` bytes of activations
// per device: no schedule within that budget is shorter. 0 where that budget leaves no room
// (the synthesis says so itself, at once).
double bound_at_budget(const ScheduleRequest& r, std::int64_t budget,
                       const detail::OpGraph* graph) {
  ScheduleRequest at = r;
  at.activation_budget = budget;
  const Memory mem = memory_of(at);
  if (!check_room(at, mem)) return 0;
  return memory_bound(at, mem, graph);
}

// The published V orders a plan's certificate sets beside it (plan/certificate.hpp):
// PyTorch's ZBVZeroBubble and DeepSeek's DualPipeV, with the request's split of the backward
// (without one, each I a whole backward and the W ops dropped), each replayed and kept where
// it is within memory. None for other layouts, or once the CPU-time limit has passed. Each
// keeps its makespan and iteration beside its timeline, whose ops the probe at 3/4 of the
// peak releases while it searches (at pp 128 over 2048 layers the outer and the inner
// orders' timelines were 42 MB of a tuned plan's 243 MB peak, in the probe): an order
// adopted after a probe is replayed again (the same replay: the same timeline, to the bit).
// Where no probe runs the last order's timeline stays: at pp 512 over 2048 layers the
// orders mostly decide the answer without one, and replaying each one adopted took the
// synthesis from 42 to 47 s. An earlier order is released while a later one is made, and
// only the order adopted last is made again (adopt_published). Where the job's memo has
// the orders' replays already (OrderReplay, answer_memo.hpp) only their figures are taken,
// and an order is generated and replayed once adopted: at pp 512 over 2048 layers the
// memory curve's syntheses generated and replayed both orders at each of four budgets that
// neither fitted.
using OrderFigures = SearchedFigures::Order;
struct PublishedOrder {
  PublishedSchedule which;
  OrderFigures figures;
  std::optional<Schedule> schedule;
  std::optional<Timeline> timeline;
};

// iteration() of the order's timeline, from its replay's figures.
OrderFigures figures_of(const detail::OrderReplay& o, const std::vector<double>& allreduce_s) {
  double end = o.makespan_s;
  for (std::size_t d = 0; d < allreduce_s.size() && d < o.last_end_s.size(); ++d)
    end = std::max(end, o.last_end_s[d] + allreduce_s[d]);
  return {o.makespan_s, end};
}

// Makes the order's schedule and timeline where it has none: published_orders makes each
// order so, and adopt_published the one it adopts where they were released (the memo's
// figures, the probe, an earlier order released while a later one replayed): the same
// generation and replay, so the same timeline, to the bit. False where either fails (never
// for an order whose figures came from both succeeding).
bool materialize(const ScheduleRequest& r, PublishedOrder& o, KeptOps kept) {
  if (!o.schedule) {
    auto made = published_schedule(o.which, {r.model, r.num_microbatches, r.split_backward});
    if (!made) return false;
    o.schedule = std::move(*made);
  }
  if (!o.timeline) {
    // With the bytes really held at each peak: the order adopted is the answer, which
    // synthesize_schedule would otherwise replay once more for them (hold_peaks; at pp 1024
    // over 2048 layers, 0.5 s where ZBV's order is adopted). The figures every choice
    // reads (makespan, last ends, the rule's residency) are the same either way.
    auto replayed = simulate(*r.model, *o.schedule, r.num_microbatches, r.static_bytes, Peaks::held,
                             Sends::dropped, kept);
    if (!replayed) return false;
    o.timeline = std::move(*replayed);
  }
  return true;
}

std::vector<PublishedOrder> published_orders(const ScheduleRequest& r, const Memory& mem,
                                             const Deadline& deadline, KeptOps kept) {
  std::vector<PublishedOrder> out;
  if (!is_two_stage_v(r.model->layout) || deadline.expired()) return out;
  const detail::RoomKey key =
      detail::order_replays_key(*r.model, r.split_backward, r.num_microbatches);
  if (r.memo) {
    if (auto kept = r.memo->tables().order_replays.recall(key)) {
      for (const detail::OrderReplay& o : **kept) {
        if (mem.fits(o.resident_peak))
          out.push_back({o.which, figures_of(o, r.allreduce_s), std::nullopt, std::nullopt});
      }
      return out;
    }
  }
  auto replays = std::make_shared<std::vector<detail::OrderReplay>>();
  for (PublishedSchedule f : {PublishedSchedule::zbv_zero_bubble, PublishedSchedule::dualpipev}) {
    // An order with none for this M releases nothing: below M = 2P, ZBV adopted was made and
    // replayed again (pp 1024 over 2048 layers, M 1024: 0.45 s).
    if (f == PublishedSchedule::dualpipev &&
        !detail::dualpipev_applies(r.model->num_devices(), r.num_microbatches)) {
      continue;
    }
    // An earlier order is held by its figures alone while this one is generated and
    // replayed, and made again only where it is the one adopted (adopt_published): at pp
    // 512 over 2048 layers its schedule and timeline were 218 MB of a 1.27 GB peak.
    // A timeline of figures alone (KeptOps::last) is a few ops a device, and stays: the
    // order adopted is then generated again, not replayed.
    for (PublishedOrder& o : out) {
      o.schedule.reset();
      if (kept == KeptOps::all) o.timeline.reset();
    }
    PublishedOrder o{f, {}, std::nullopt, std::nullopt};
    if (!materialize(r, o, kept)) continue;
    replays->push_back(published_replay(f, *o.timeline));
    if (!mem.fits(*o.timeline)) continue;
    o.figures = {o.timeline->makespan_s, iteration(*o.timeline, r.allreduce_s)};
    out.push_back(std::move(o));
  }
  if (r.memo) r.memo->tables().order_replays.keep(key, std::move(replays));
  return out;
}

// Whether a published order replaces an answer of makespan `makespan_s` and iteration
// `iteration_s`: faster (its makespan, else its iteration; one as fast that holds less is
// left).
bool replaces(const OrderFigures& o, double makespan_s, double iteration_s) {
  const int makespan = compare(o.makespan_s, makespan_s);
  return makespan < 0 || (makespan == 0 && compare(o.iteration_s, iteration_s) < 0);
}

// Whether the published orders decide the answer whatever the probe at 3/4 of the peak
// finds, `bound` being that budget's bound. The probe runs only where the bound is no
// longer than the answer's makespan (by better()'s tie), and whatever it keeps is within
// that budget: its answer's makespan is at least the bound, past the rounding of the sums,
// and no longer than the answer's but for that tie. So an order shorter than the bound (by
// a relative 3e-9, past both ties) replaces any answer the probe leaves, and one longer
// than the answer's makespan (by as much) replaces none. Taking the orders as
// adopt_published does, the answer is then known once one order replaces it whatever it
// is: each later one is weighed against that order. Where an order between the two is met
// first, the answer depends on the probe, which runs.
bool published_decide(const std::vector<OrderFigures>& orders, double answer_makespan_s,
                      double bound) {
  const OrderFigures* known = nullptr;  // the answer once it no longer depends on the probe
  for (const OrderFigures& o : orders) {
    if (known) {
      if (replaces(o, known->makespan_s, known->iteration_s)) known = &o;
    } else if (o.makespan_s < bound * (1 - 3e-9)) {
      known = &o;
    } else if (!(o.makespan_s > answer_makespan_s * (1 + 3e-9))) {
      return false;
    }
  }
  return known != nullptr;
}

// A budget narrows the search to other schedules, and sometimes to a faster one (SD2 at 512
// px, pp 4 on a DGX-1: 0.6639 s at 3/4 of the peak against 0.6771 s without): the synthesis
// searches once more, with its own effort, at 3/4 of the peak it found, and keeps what is
// better. So a plan is never slower than `plan --activation-budget` at that point. Not where
// the bound at that point is longer than the answer: nothing found there could be better
// (nor can the CPU-time limit cut that search short, so the answer's status stays as it is).
// Nor where no caller weighs the searches' answer beside a published order
// (ScheduleRequest::weighs_searched) and the published orders decide the answer whatever
// the probe finds (published_decide): then it would change nothing but the count of list
// evaluations. At pp 512 over 2048 layers each probe took 6-7 s, and DualPipeV's order
// replaced its answer (0.966 s against 0.596 s, the bound at 3/4 of the peak 0.626 s).
// The bound at 3/4 of the searches' peak where the probe there runs, from what the searches
// found (`searched`: synthesis_repeats asks it of a screen's figures); nothing where it
// does not run. The bound is computed where time is left (else 0, and the probe runs to
// find the CPU-time limit passed); `graph` may be null (built where the memo lacks it).
std::optional<double> probe_bound(const ScheduleRequest& r, const SearchedFigures& searched,
                                  const detail::OpGraph* graph, bool time_left) {
  if (searched.peak_activation_bytes <= 0) return std::nullopt;
  const std::int64_t budget = searched.peak_activation_bytes * 3 / 4;
  const double bound = time_left ? bound_at_budget(r, budget, graph) : 0.0;
  if (compare(bound, searched.makespan_s) > 0) return std::nullopt;
  if (!r.weighs_searched && published_decide(searched.orders, searched.makespan_s, bound))
    return std::nullopt;
  return bound;
}

void probe_smaller_budget(const ScheduleRequest& r, const Deadline& deadline, ScheduleAnswer& a,
                          const detail::OpGraph& graph, std::vector<PublishedOrder>& orders,
                          AnswerTimeline timeline) {
  // A schedule within the smaller budget is one within the request's too, so the answer's
  // bound holds there as well as that budget's own. Past better()'s tie beyond the
  // answer, the probe is not run; otherwise its policy search ends at the bound, which
  // changes nothing that search finds (policy_search.hpp, SearchInput::stop_at).
  const auto bound = probe_bound(r, *a.before_published, &graph, deadline.left() > 0);
  if (!bound) return;
  if (timeline == AnswerTimeline::whole) {
    for (PublishedOrder& o : orders) o.timeline.reset();  // adopt_published replays them
  }
  // From here the searches' answer is weighed by its figures alone (better(), the orders'
  // chain), and the answer is replayed whole once chosen (hold_peaks); only a caller that
  // weighs it beside an order (ScheduleAnswer::searched) reads its ops. At pp 512 over
  // 4096 layers its timeline was 168 MB of the peak, held through the probe.
  if (!r.weighs_searched) keep_last_ops(a.timeline);
  const std::int64_t budget = a.peak_activation_bytes * 3 / 4;
  auto smaller =
      at_budget(r, budget, deadline, a, true, std::max(*bound, a.lower_bound_s), timeline);
  if (smaller && better(smaller->timeline, a.timeline, r.allreduce_s))
    adopt(a, std::move(*smaller));
}

// The orders adopt_published adopts one after another, by their figures (an order's
// figures are its timeline's, to the bit): each replaces the one before, the first the
// searches' answer. Only the last one's schedule is needed.
std::vector<std::size_t> adoption_chain(const std::vector<PublishedOrder>& orders,
                                        const ScheduleAnswer& a, const ScheduleRequest& r) {
  std::vector<std::size_t> chain;
  OrderFigures now{a.timeline.makespan_s, iteration(a.timeline, r.allreduce_s)};
  for (std::size_t i = 0; i < orders.size(); ++i) {
    if (!replaces(orders[i].figures, now.makespan_s, now.iteration_s)) continue;
    chain.push_back(i);
    now = orders[i].figures;
  }
  return chain;
}

// Where one of the published orders (published_orders) is faster than the answer the
// searches found (replaces), it replaces the answer, so no plan is behind a published
// schedule its certificate lists. Without a split backward they were in no pool the
// searches start from: flux1-dev-1024 on dgx-h200-4n at pp 4 x dp 8 planned 6.4438 s where
// ZBVZeroBubble's order ran 6.4318 s. Offered as seeds before the searches, they moved the
// answer's peak and with it the probe at 3/4 of it, and SD2 at 512 px on a DGX-1 planned
// 0.6846 s where it plans 0.6651 s: so after the searches and the probe. Not once the
// CPU-time limit has passed (the answer is then the searches' so far). Where the request
// says its caller weighs it, the searches' answer is kept beside it
// (ScheduleAnswer::searched): a faster iteration can leave less idle time for the frozen
// encoders, and the compiler keeps whichever step is shorter.
void adopt_published(const ScheduleRequest& r, std::vector<PublishedOrder>&& orders,
                     const Deadline& deadline, ScheduleAnswer& a, KeptOps kept) {
  if (deadline.expired()) return;
  // Each order of the chain replaces the one before (as adopting them in turn did); only
  // the last is made, and an order that cannot be made is left out as if absent.
  std::vector<std::size_t> chain;
  while (true) {
    chain = adoption_chain(orders, a, r);
    if (chain.empty()) return;
    for (std::size_t i = 0; i < orders.size(); ++i) {  // not held while the last is made
      if (i != chain.back()) orders[i].schedule.reset(), orders[i].timeline.reset();
    }
    if (materialize(r, orders[chain.back()], kept)) break;
    orders.erase(orders.begin() + static_cast<std::ptrdiff_t>(chain.back()));
  }
  if (!a.searched && r.weighs_searched) {
    auto searched = std::make_shared<ScheduleAnswer>();
    static_cast<ScheduleSearch&>(*searched) = a;
    searched->schedule = std::move(a.schedule);
    searched->timeline = std::move(a.timeline);
    searched->status = a.status;
    searched->activation_budget = a.activation_budget;
    a.searched = std::move(searched);
  }
  // The status as each adoption in turn left it.
  for (std::size_t i : chain) {
    if (a.status == SolveStatus::heuristic) a.status = SolveStatus::feasible;
    if (orders[i].figures.makespan_s <= a.lower_bound_s * (1 + 1e-9)) {
      a.status = SolveStatus::optimal;  // as Search::finish() says it
      if (a.milp_solves == 0) a.stopped_by = "lower bound";
    }
  }
  PublishedOrder& last = orders[chain.back()];
  Best published{std::move(*last.schedule), std::move(*last.timeline),
                 published_schedule_name(last.which), true};
  adopt(published, a);
}

// The synthesis; without the bound (the memory curve's points need only the makespan), no
// schedule is proven optimal and every search runs to its budget. `timeline` says what the
// replays that may become the answer's timeline keep: the first list schedule's
// (ListReplay::last_ops_only) and the published orders' (KeptOps). With the last ops alone
// the answer's timeline is figures (Timeline::last_ops_only).
Result<ScheduleAnswer> synthesize(const ScheduleRequest& r, bool with_bound, double known_bound_s,
                                  AnswerTimeline timeline) {
  const KeptOps kept = timeline == AnswerTimeline::whole ? KeptOps::all : KeptOps::last;
  const Deadline deadline(r.max_seconds);
  const Memory mem = memory_of(r);
  if (auto room = check_room(r, mem); !room) return room.error();
  if (auto room = check_gpipe_room(r, mem); !room) return room.error();
  // The heuristic first: everything after it can only replace it with something better.
  Best best;
  detail::FirstRun first;
  ListReplay replay;
  Schedule heuristic = first_list_schedule(r, mem, first, replay, timeline);
  if (with_bound) detail::keep_one_f_one_b(r, first.limits, replay.timeline);
  if (!best.offer(std::move(heuristic), std::move(replay.timeline), r, mem, "list")) {
    return internal_error("the list schedule did not replay");
  }
  ScheduleAnswer a;
  a.activation_budget = r.activation_budget;
  a.heuristic_makespan_s = best.timeline.makespan_s;
  const detail::OpGraph graph = detail::build_op_graph(*r.model, r.split_backward);
  if (with_bound) a.lower_bound_s = memory_bound(r, mem, &graph);
  if (r.family != ScheduleFamily::synthesized) return fixed_schedule(r, mem, best, a);
  Search search{r, mem, deadline, best, a, r.max_seconds <= 0, known_bound_s, &first};
  if (search.ladder_applies()) {
    search.ladder();
  } else {
    search.list_policies();
    search.orders();
  }
  search.exact(graph);
  search.finish();
  std::vector<PublishedOrder> orders = published_orders(r, mem, deadline, kept);
  a.before_published = SearchedFigures{a.peak_activation_bytes, a.timeline.makespan_s, {}};
  for (const PublishedOrder& o : orders) a.before_published->orders.push_back(o.figures);
  if (with_bound && r.probe_smaller_budget) {
    probe_smaller_budget(r, deadline, a, graph, orders, timeline);
  }
  adopt_published(r, std::move(orders), deadline, a, kept);
  trim_and_curve(r, deadline, a, false);
  return a;
}

// The searches replay with the rule's figures only (Peaks::rule_only); the answer's timeline
// gets the bytes really held at each device's peak too, from one more replay (of its last
// ops alone with KeptOps::last).
Status hold_peaks(const ScheduleRequest& r, ScheduleAnswer& a, KeptOps kept = KeptOps::all) {
  auto t = simulate(*r.model, a.schedule, r.num_microbatches, r.static_bytes, Peaks::held,
                    Sends::dropped, kept);
  if (!t) return t.error();
  a.timeline = std::move(*t);
  return Ok{};
}

}  // namespace

Result<ScheduleAnswer> synthesize_schedule(const ScheduleRequest& r) {
  return synthesize_schedule(r, AnswerTimeline::whole, nullptr);
}

Result<ScheduleAnswer> synthesize_schedule(const ScheduleRequest& r, AnswerTimeline timeline,
                                           bool* ops_released) {
  if (ops_released) *ops_released = false;
  if (auto kept = detail::recall_answer(r)) {
    if (timeline == AnswerTimeline::last_ops) {
      if (ops_released) *ops_released = true;
      return std::move(*kept);
    }
    if (auto held = hold_peaks(r, *kept); !held) return held.error();
    return std::move(*kept);
  }
  // A caller that weighs the answer by its figures (AnswerTimeline::last_ops) gets them
  // alone, and its ops are never recorded: not the first list schedule's nor the published
  // orders' (at pp 512 over 2048 layers, 6.3 million ops each), and an order released while
  // another was replayed is generated again, not replayed (synthesize). Not where the
  // request weighs the searches' answer beside an order: its caller reads their ops.
  const AnswerTimeline made = timeline == AnswerTimeline::last_ops && !r.weighs_searched
                                  ? AnswerTimeline::last_ops
                                  : AnswerTimeline::whole;
  const KeptOps kept = made == AnswerTimeline::whole ? KeptOps::all : KeptOps::last;
  auto a = synthesize(r, true, 0, made);
  if (!a) return a;
  // Not where the answer's replay held them already: 1F1B's (first_list_schedule) and an
  // adopted published order's (materialize), with the ops the caller asked for.
  if (!a->timeline.peaks_held || (kept == KeptOps::all && a->timeline.last_ops_only)) {
    if (auto held = hold_peaks(r, *a, kept); !held) return held.error();
  }
  // A search's answer (Best::offer) was replayed whole: its ops go too.
  if (kept == KeptOps::last && !a->timeline.last_ops_only) keep_last_ops(a->timeline);
  if (ops_released) *ops_released = a->timeline.last_ops_only;
  // The memo keeps the answer with its timeline's last ops alone (with_last_ops), which a
  // recall replays whole (the same schedule, model and static state: the same timeline, to
  // the bit). The caller keeps this one, and at pp 512 over 2048 layers a timeline is 170 MB.
  Timeline whole = std::exchange(a->timeline, with_last_ops(a->timeline));
  detail::remember_answer(r, *a);
  a->timeline = std::move(whole);
  return a;
}

double synthesis_lower_bound(const ScheduleRequest& r) {
  const Memory mem = memory_of(r);
  if (!check_room(r, mem)) return std::numeric_limits<double>::infinity();
  return memory_bound(r, mem, nullptr);
}

bool synthesis_repeats(const ScheduleRequest& r, const ScheduleRequest& screen,
                       const ScheduleAnswer& screened) {
  if (r.family != ScheduleFamily::synthesized || r.memory_curve_points > 0 ||
      screen.memory_curve_points > 0 || screened.status == SolveStatus::time_limit ||
      !screened.before_published) {
    return false;
  }
  ScheduleRequest asked = detail::searched_request(r);
  ScheduleRequest screen_asked = detail::searched_request(screen);
  asked.probe_smaller_budget = screen_asked.probe_smaller_budget = false;
  if (!(detail::schedule_key(asked) == detail::schedule_key(screen_asked))) return false;
  return !r.probe_smaller_budget || !probe_bound(r, *screened.before_published, nullptr, true);
}

Status trim_memory(const ScheduleRequest& r, ScheduleAnswer& answer) {
  if (r.family != ScheduleFamily::synthesized) return Ok{};
  trim_and_curve(r, Deadline(r.max_seconds), answer, true);
  return hold_peaks(r, answer);
}

}  // namespace pulse
