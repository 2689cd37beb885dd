// PyTorch's ZB-V order (see torch_zbv.hpp for the source). Rank r's ops, its first stage
// c0 = r (chunk 0) and its second c1 = 2P-1-r (chunk 1), with PyTorch's counters per kind:
//   1. 2(P-r)-1 forwards of c0 (the warm-up);
//   2. r pairs: a forward of c1, a forward of c0;
//   3. P-r triples of c1: F, I, W;
//   4. while c1 has fewer forwards than c0, or c0 fewer than the microbatches: F of c0 (while
//      some are left), I and W of c0, then F, I and W of c1;
//   5. r pairs of input gradients: c0, then c1; then P-r pairs of c0: I, W;
//   6. the weight gradients left, of c1 first, then of c0.
// Microbatches are padded to 2P-1 and the ops of the padding dropped afterwards, as PyTorch
// does.

#include "torch_zbv.hpp"

#include <algorithm>

namespace pulse::detail {

namespace {

std::vector<Op> zbv_rank_order(int P, int M, int rank) {
  const int n_micro = std::max(2 * P - 1, M);
  const int c0 = rank, c1 = 2 * P - 1 - rank;
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  std::vector<Op> ops;
  ops.reserve(6 * static_cast<std::size_t>(n_micro));  // F, I and W of two stages each
  auto add = [&](OpKind kind, int stage, int& counter) { ops.push_back({kind, stage, counter++}); };
  auto input = [&](int stage, int mb) { ops.push_back({OpKind::backward_input, stage, mb}); };
  for (int i = 0; i < 2 * (P - rank) - 1; ++i) add(OpKind::forward, c0, f0);
  for (int i = 0; i < rank; ++i) {
    add(OpKind::forward, c1, f1);
    add(OpKind::forward, c0, f0);
  }
  for (int i = 0; i < P - rank; ++i) {
    add(OpKind::forward, c1, f1);
    input(c1, b1);
    add(OpKind::backward_weight, c1, b1);
  }
  while (f1 < f0 || f0 < n_micro) {
    if (f0 < n_micro) add(OpKind::forward, c0, f0);
    input(c0, b0);
    add(OpKind::backward_weight, c0, b0);
    add(OpKind::forward, c1, f1);
    input(c1, b1);
    add(OpKind::backward_weight, c1, b1);
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < rank; ++i) {
    add(OpKind::backward_input, c0, b0);
    add(OpKind::backward_input, c1, b1);
  }
  for (int i = 0; i < P - rank; ++i) {
    add(OpKind::backward_input, c0, b0);
    add(OpKind::backward_weight, c0, w0);
  }
  while (w1 < b1) add(OpKind::backward_weight, c1, w1);
  while (w0 < b0) add(OpKind::backward_weight, c0, w0);
  std::erase_if(ops, [M](const Op& op) { return op.mb >= M; });
  ops.shrink_to_fit();  // the padding's room: a schedule of pp 512 is 50 MB or more
  return ops;
}

}  // namespace

Schedule torch_zbv_schedule(int P, int M) {
  Schedule s;
  s.split_backward = true;
  s.policy = "zbv-zero-bubble";
  for (int r = 0; r < P; ++r) s.device_ops.push_back(zbv_rank_order(P, M, r));
  return s;
}

}  // namespace pulse::detail
