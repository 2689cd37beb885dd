// libFuzzer target: the plan reader (parse_plan: the JSON decoder and its structural checks)
// on any bytes. It must return, never crash, leak or run into undefined behaviour; a refusal
// is an input error naming the file. A plan it accepts has every index in range (plan.hpp's
// promise, which validate, replay and export rely on), answers the Plan's own queries, and
// round-trips: what write_plan makes of it reads back, and writes the same bytes again (the
// codec's one key list drives both directions, plan_codec.hpp). Seeds: the golden cases'
// plans (tests/cli/fixtures/plans, scripts/fuzz_corpus.py).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "pulse/plan/plan_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pulse;
  constexpr const char* kFile = "fuzz.plan.json";
  const auto plan = parse_plan(fuzz::as_text(data, size), kFile);
  if (!plan) {
    fuzz::require_input_error(plan.error(), kFile);
    return 0;
  }
  fuzz::require_indices_in_range(*plan);
  // The queries the tools start with; their answers do not matter here, only that they hold.
  (void)plan->shape();
  (void)plan->is_v();
  (void)plan->split_backward();
  (void)plan->layer_stages();
  (void)plan->num_ops();

  const std::string written = write_plan(*plan);
  const auto again = parse_plan(written, "rewritten.plan.json");
  fuzz::require(
      again.ok(),
      again ? "" : "a plan the reader accepts writes back readable:\n" + again.error().message);
  fuzz::require(write_plan(*again) == written, "write, read, write gives the same bytes");
  return 0;
}
