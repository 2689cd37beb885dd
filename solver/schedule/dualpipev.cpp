// DualPipeV's steps for rank r of P, M microbatches (see dualpipev.hpp for the source):
//   1. 2(P-r-1) forwards of phase 0;
//   2. r+1 pairs: forward of phase 0, forward of phase 1;
//   3. P-r-1 triples: backward of phase 1 with its weight gradient deferred, one deferred
//      weight gradient, forward of phase 1;
//   4. M-2P+r+1 times: forward 0, backward 1, forward 1, backward 0;
//   5. P-r-1 times: backward 1, forward 1, backward 0;
//   6. r+1 pairs: backward 1, backward 0, deferring weight gradients from the middle pair
//      on (from backward 1 on odd ranks, from backward 0 on even ones);
//   7. P-r-1 pairs: one deferred weight gradient, backward 0 (deferred);
//   8. the r+1 deferred weight gradients left.
// A backward not deferred is I then W at once; deferred W ops run first in, first out.

#include "dualpipev.hpp"

#include <deque>

namespace pulse::detail {

namespace {

class RankOrder {
 public:
  RankOrder(int P, int M, int rank) : stage_{rank, 2 * P - 1 - rank} {
    ops_.reserve(6 * static_cast<std::size_t>(M));  // F, I and W of two stages each
  }

  void forward(int phase) { ops_.push_back({OpKind::forward, stage_[phase], f_[phase]++}); }
  void backward(int phase, bool defer) {
    const int mb = b_[phase]++;
    ops_.push_back({OpKind::backward_input, stage_[phase], mb});
    if (defer) {
      deferred_.push_back({OpKind::backward_weight, stage_[phase], mb});
    } else {
      ops_.push_back({OpKind::backward_weight, stage_[phase], mb});
    }
  }
  void weight() {
    ops_.push_back(deferred_.front());
    deferred_.pop_front();
  }
  std::vector<Op> take() { return std::move(ops_); }

 private:
  int stage_[2];
  int f_[2] = {0, 0}, b_[2] = {0, 0};
  std::vector<Op> ops_;
  std::deque<Op> deferred_;
};

std::vector<Op> rank_order(int P, int M, int r) {
  RankOrder o(P, M, r);
  for (int i = 0; i < 2 * (P - r - 1); ++i) o.forward(0);
  for (int i = 0; i < r + 1; ++i) o.forward(0), o.forward(1);
  for (int i = 0; i < P - r - 1; ++i) o.backward(1, true), o.weight(), o.forward(1);
  for (int i = 0; i < M - 2 * P + r + 1; ++i) {
    o.forward(0), o.backward(1, false);
    o.forward(1), o.backward(0, false);
  }
  for (int i = 0; i < P - r - 1; ++i) o.backward(1, false), o.forward(1), o.backward(0, false);
  bool defer = false;
  for (int i = 0; i < r + 1; ++i) {
    if (i == (r + 1) / 2 && r % 2 == 1) defer = true;
    o.backward(1, defer);
    if (i == (r + 1) / 2 && r % 2 == 0) defer = true;
    o.backward(0, defer);
  }
  for (int i = 0; i < P - r - 1; ++i) o.weight(), o.backward(0, true);
  for (int i = 0; i < r + 1; ++i) o.weight();
  return o.take();
}

}  // namespace

bool dualpipev_applies(int P, int M) {
  return P >= 1 && M >= 2 * P;
}

std::optional<Schedule> dualpipev_schedule(int P, int M) {
  if (!dualpipev_applies(P, M)) return std::nullopt;
  Schedule s;
  s.split_backward = true;
  s.policy = "dualpipev";
  for (int r = 0; r < P; ++r) s.device_ops.push_back(rank_order(P, M, r));
  return s;
}

}  // namespace pulse::detail
