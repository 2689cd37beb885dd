// libFuzzer target: the model profile loader (parse_model_profile) on any bytes. Whatever
// the input, it must return, never crash, leak or run into undefined behaviour; a refusal is
// an input error naming the file, and a profile it accepts keeps profile.hpp's promises
// (fuzz_support.hpp). Seeds: profiles/models and the golden cases' model files
// (scripts/fuzz_corpus.py).
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "pulse/profile/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pulse;
  constexpr const char* kFile = "fuzz.model.json";
  const auto model = parse_model_profile(fuzz::as_text(data, size), kFile);
  if (!model) {
    fuzz::require_input_error(model.error(), kFile);
    return 0;
  }
  fuzz::require_valid_model(*model);
  return 0;
}
