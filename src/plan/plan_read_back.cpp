// encode_plan's read-back of a plan's ops (plan_codec_internal.hpp, read_back_ops).

#include <algorithm>
#include <cmath>
#include <vector>

#include "plan_codec_internal.hpp"
#include "pulse/base/limits.hpp"

namespace pulse::detail {

namespace {

// Whether the reader takes `op` (its times as written, to the nanosecond) without a word:
// a stage id and a microbatch in range, times finite, at least 0 and within the time limit.
// Reading its text then gives `op` itself: integers are written as they are, and a time's
// digits (the shortest that read back to the same double) read back to it.
bool reads_plainly(const PlanOp& op, int num_stages, int num_microbatches) {
  const auto time_ok = [](double t) { return std::isfinite(t) && t >= 0 && t <= kMaxSeconds; };
  return op.op.stage >= 0 && op.op.stage < num_stages && op.op.mb >= 0 &&
         op.op.mb < num_microbatches && time_ok(op.start_s) && time_ok(op.end_s);
}

}  // namespace

void read_back_ops(const Plan& plan, Plan& read, JsonChecker& check) {
  const int S = read.num_stages();
  const int M = read.parallelism.num_microbatches;
  const std::size_t devices = std::min(plan.schedule.size(), read.schedule.size());
  for (std::size_t d = 0; d < devices; ++d) {
    const std::vector<PlanOp>& ops = plan.schedule[d];
    std::vector<PlanOp>& out = read.schedule[d];
    out.reserve(ops.size());
    for (std::size_t k = 0; k < ops.size(); ++k) {
      PlanOp op = ops[k];
      op.start_s = rounded(op.start_s, Format::seconds);
      op.end_s = rounded(op.end_s, Format::seconds);
      if (reads_plainly(op, S, M)) {
        out.push_back(op);
        continue;
      }
      // The op's object as the plan's text holds it, read by the reader's own keys.
      PlanText written;
      PlanWriter::object_text(written, 0, [&](PlanWriter& io) { op_keys(io, ops[k]); });
      const json text = json::parse(written.text);
      PlanOp back;
      back.op.stage = -1;
      back.op.mb = -1;
      PlanReader io(check, text, JsonPath{}.key("schedule").at(d).key("ops").at(k), read);
      op_keys(io, back);
      if (back.op.stage >= 0 && back.op.mb >= 0) out.push_back(back);
    }
  }
}

}  // namespace pulse::detail
