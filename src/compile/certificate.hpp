// The "certificate" pass (plan/certificate.hpp): on the plan kept, the bounds on its
// iteration that hold for every schedule of its stages, the synthesizer's bound under memory
// among them, and the partition's against every partition of its family. Private to
// src/compile.
#pragma once

#include "compile_internal.hpp"

namespace pulse::detail {

/// Fills `plan.certificate` (its `published[]` too: each published schedule of the registry
/// that fits the plan's stages, replayed on them).
Status certificate_pass(const CompileInputs& in, CompiledPlan& plan, PassClock& clock);

}  // namespace pulse::detail
