// The lower bound: every device alone, with release times and tails from the op graph, the
// stage order and memory, solved exactly as a preemptive one-machine problem.
//
// The warm-up cut. Before the first moment T0 at which device d can free any memory (the
// earliest end of the first releasing op of any of its stages), its held bytes only grow,
// so the forwards that start before T0 fit the room together. They are a prefix of each
// stage's microbatches: F(s1, m < a) and F(s2, m < b) with b <= a (F(s2, m) follows
// F(s1, m)) and a * b1 + b * b2 <= room. Every other forward starts at T0 or later. The
// schedule's own (a, b) is one of these splits, so the smallest one-machine bound over them
// (each taking the largest b that fits beside a: fewer raised releases) is a bound too. It
// is what makes a bound see that a device with room for few microbatches idles while its
// first microbatch makes the round trip (a two-stage V with 2P stage activations, small M).

#include "lower_bound.hpp"

#include <algorithm>
#include <limits>

#include "pulse/cost/memory.hpp"

namespace pulse::detail {

// Jackson's rule (lower_bound.hpp) over chains of M jobs (jobs_of: one op type's
// microbatches in order). Along a chain the releases never fall and the tails never rise
// (propagate: release[t][m] is at least release[t][m - 1] plus the occupancy, tail[t][m] at
// least the occupancy plus tail[t][m + 1]; a raised release is the larger of it and one
// time, from some microbatch on), and the work is one. So a chain's first released job that
// is not done has the largest tail of its released jobs: the rule picks among a few chain
// heads, not the top of a heap of all M x ops jobs (pp 512 over 2048 layers: 8192 jobs a
// device, solved up to 65 times each with the warm-up cut, were 10% of the plan).
double jackson_preemptive(const std::vector<OneMachineJob>& jobs, int M) {
  if (M <= 0 || jobs.empty()) return 0;
  const double never = std::numeric_limits<double>::infinity();
  // Each chain keeps the two figures every step reads, its next release and its head's
  // tail, beside its indices: a step compares them across the chains without reading the
  // jobs (the jobs are read when a release or a head moves).
  struct Chain {
    std::size_t head, released, end;  // [head, released): released, not done
    double left;                      // the head's work left
    double head_tail;                 // jobs[head].tail while head < end
    double next_release;              // jobs[released].release, never once all are released
  };
  std::vector<Chain> chains;
  for (std::size_t c = 0; c < jobs.size(); c += static_cast<std::size_t>(M)) {
    const std::size_t end = std::min(jobs.size(), c + static_cast<std::size_t>(M));
    chains.push_back({c, c, end, jobs[c].work, jobs[c].tail, jobs[c].release});
  }
  double t = 0, value = 0;
  for (;;) {
    Chain* run = nullptr;  // the released head with the largest tail (the first of a tie)
    double next = never;   // the next release after t
    for (Chain& c : chains) {
      while (c.released < c.end && c.next_release <= t) {
        c.next_release = ++c.released < c.end ? jobs[c.released].release : never;
      }
      next = std::min(next, c.next_release);
      if (c.head < c.released && (!run || c.head_tail > run->head_tail)) run = &c;
    }
    if (!run) {
      if (next == never) return value;  // every job done
      t = next;
      continue;
    }
    // Every step either finishes the head or advances to the next release, which lies
    // strictly after t (releases up to t were just taken): no step can stall on rounding.
    const double finish = t + run->left;
    if (next < finish) {
      run->left = finish - next;
      t = next;
    } else {
      t = finish;
      value = std::max(value, t + run->head_tail);
      if (++run->head < run->end) {
        run->left = jobs[run->head].work;
        run->head_tail = jobs[run->head].tail;
      }
    }
  }
}

namespace {

// release[t][m]: earliest start of op type t of microbatch m; tail[t][m]: least time from
// its end to the end of the schedule.
struct Timing {
  std::vector<std::vector<double>> release, tail;
};

Timing propagate(const OpGraph& g, int M, const std::vector<MemoryEdge>& memory) {
  const std::size_t n = g.ops.size();
  Timing tm{std::vector<std::vector<double>>(n, std::vector<double>(M, 0.0)),
            std::vector<std::vector<double>>(n, std::vector<double>(M, 0.0))};
  auto& release = tm.release;
  auto& tail = tm.tail;
  std::vector<OpEdge> edges = g.edges;
  std::sort(edges.begin(), edges.end(),
            [](const OpEdge& a, const OpEdge& b) { return a.from < b.from; });
  for (int m = 0; m < M; ++m) {
    for (std::size_t t = 0; t < n && m > 0; ++t) {
      release[t][m] = std::max(release[t][m], release[t][m - 1] + g.ops[t].occupancy);
    }
    for (const MemoryEdge& e : memory) {
      if (m < e.lag) continue;
      release[e.to][m] =
          std::max(release[e.to][m], release[e.from][m - e.lag] + g.ops[e.from].occupancy);
    }
    for (const OpEdge& e : edges) {
      release[e.to][m] = std::max(release[e.to][m], release[e.from][m] + e.latency);
    }
  }
  for (int m = M - 1; m >= 0; --m) {
    for (std::size_t t = 0; t < n && m + 1 < M; ++t) {
      tail[t][m] = std::max(tail[t][m], g.ops[t].occupancy + tail[t][m + 1]);
    }
    for (const MemoryEdge& e : memory) {
      if (m + e.lag >= M) continue;
      tail[e.from][m] = std::max(tail[e.from][m], g.ops[e.to].occupancy + tail[e.to][m + e.lag]);
    }
    for (auto it = edges.rbegin(); it != edges.rend(); ++it) {
      const double after =
          it->latency - g.ops[it->from].occupancy + g.ops[it->to].occupancy + tail[it->to][m];
      tail[it->from][m] = std::max(tail[it->from][m], after);
    }
  }
  return tm;
}

// The device's jobs, forwards of stage k from microbatch from_mb[k] on released at `t0`
// at the earliest (empty from_mb: none raised).
std::vector<OneMachineJob> jobs_of(const OpGraph& g, int M, const Timing& tm,
                                   const std::vector<int>& ops, const DeviceMemory* dm,
                                   const std::vector<int>& from_mb, double t0) {
  std::vector<OneMachineJob> jobs;
  jobs.reserve(ops.size() * M);
  for (int t : ops) {
    int raised_from = M;
    for (std::size_t k = 0; dm && k < from_mb.size(); ++k) {
      if (dm->forward[k] == t) raised_from = from_mb[k];
    }
    for (int m = 0; m < M; ++m) {
      const double release = m >= raised_from ? std::max(tm.release[t][m], t0) : tm.release[t][m];
      jobs.push_back({release, g.ops[t].occupancy, tm.tail[t][m]});
    }
  }
  return jobs;
}

// The warm-up cut tries every split a = 0..most, each a one-machine problem of all the
// device's M x ops jobs: O(most x M log M) work. Past this many splits (a device with room for
// many microbatches, where the cut seldom binds) it is left out; the bound stays a bound.
// Without the cap, SD2 on 8 DGX-1 nodes at global batch 8192 (M up to 1024) spent 25 s here.
constexpr std::int64_t kMaxWarmUpSplits = 64;

// The warm-up cut of one device (see the top of the file); 0 when it does not apply. Its
// caller keeps max(`bound`, cut): once one split's value is at most `bound`, the smallest is
// too and the cut cannot raise the bound, so the rest are not solved (the value returned is
// then that split's, not the smallest, and the caller's maximum is `bound` either way). The
// splits go from the most forwards before T0 down: the schedule's own split usually fills
// the room, and its value is the one most likely under the bound.
double warm_up_cut(const OpGraph& g, int M, const Timing& tm, const std::vector<int>& ops,
                   const DeviceMemory& dm, double bound) {
  const std::size_t n = dm.forward.size();
  if (n == 0 || n > 2 || dm.holds[0] <= 0) return 0;
  std::int64_t all = 0;
  for (std::int64_t h : dm.holds) all += h * M;
  if (all <= dm.room) return 0;
  double t0 = std::numeric_limits<double>::infinity();
  for (int r : dm.releasing) t0 = std::min(t0, tm.release[r][0] + g.ops[r].occupancy);
  double best = std::numeric_limits<double>::infinity();
  const std::int64_t most = std::min<std::int64_t>(M, dm.room / dm.holds[0]);
  if (most > kMaxWarmUpSplits) return 0;
  for (std::int64_t a = most; a >= 0 && best > bound; --a) {
    std::vector<int> from_mb{static_cast<int>(a)};
    if (n == 2) {
      const std::int64_t left = dm.room - a * dm.holds[0];
      const std::int64_t b = dm.holds[1] > 0 ? std::min(a, left / dm.holds[1]) : a;
      from_mb.push_back(static_cast<int>(b));
    }
    best = std::min(best, jackson_preemptive(jobs_of(g, M, tm, ops, &dm, from_mb, t0), M));
  }
  return best;
}

}  // namespace

MemoryRelaxation inflight_relaxation(const OpGraph& g, const std::vector<int>& inflight_limit) {
  MemoryRelaxation r;
  for (std::size_t d = 0; d < g.by_device.size(); ++d) {
    if (g.admitting[d] >= 0) r.edges.push_back({g.releasing[d], g.admitting[d], inflight_limit[d]});
  }
  return r;
}

MemoryRelaxation memory_relaxation(const OpGraph& g, const PipelineModel& model,
                                   const std::vector<std::int64_t>& room) {
  const std::vector<std::int64_t> skip = skip_bytes_per_microbatch(model);
  const bool split = std::any_of(g.ops.begin(), g.ops.end(), [](const OpType& op) {
    return op.kind == OpKind::backward_weight;
  });
  const OpKind input = split ? OpKind::backward_input : OpKind::backward;
  const OpKind last = split ? OpKind::backward_weight : OpKind::backward;
  MemoryRelaxation r;
  auto add = [&](int from, int to, std::int64_t room_left, std::int64_t per_microbatch) {
    if (per_microbatch <= 0 || room_left < per_microbatch) return;
    const std::int64_t lag = room_left / per_microbatch;
    if (lag < (std::int64_t{1} << 30)) r.edges.push_back({from, to, static_cast<int>(lag)});
  };
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    const std::vector<StageId> stages = model.layout.stages_on(d);
    DeviceMemory dm{room[d], {}, {}, {}};
    std::int64_t held = 0;
    for (std::size_t k = 0; k < stages.size(); ++k) {
      const StageId s = stages[k];
      dm.forward.push_back(g.find(OpKind::forward, s));
      dm.releasing.push_back(g.find(last, s));
      dm.holds.push_back(model.stages[s].activation_bytes + (k == 0 ? skip[d] : 0));
      held += dm.holds.back();
      if (k == 0) {
        add(g.releasing[d], g.admitting[d], room[d], held);  // (a)
        continue;
      }
      add(g.find(input, s), dm.forward.back(), room[d], held);                              // (b)
      add(g.releasing[d], dm.forward.back(), room[d] - (held - dm.holds[0]), dm.holds[0]);  // (c)
    }
    r.devices.push_back(std::move(dm));
  }
  return r;
}

double schedule_lower_bound(const OpGraph& g, int M, const std::vector<int>& inflight_limit) {
  return schedule_lower_bound(g, M, inflight_relaxation(g, inflight_limit));
}

double schedule_lower_bound(const OpGraph& g, int M, const MemoryRelaxation& memory) {
  const Timing tm = propagate(g, M, memory.edges);
  double bound = g.critical_path;
  for (std::size_t d = 0; d < g.by_device.size(); ++d) {
    const std::vector<int>& ops = g.by_device[d];
    bound = std::max(bound, jackson_preemptive(jobs_of(g, M, tm, ops, nullptr, {}, 0), M));
    if (d < memory.devices.size())
      bound = std::max(bound, warm_up_cut(g, M, tm, ops, memory.devices[d], bound));
  }
  return bound;
}

}  // namespace pulse::detail
