// The synthesizer's answers to the last few requests of this process (internal). A plan
// synthesizes the same request more than once: families that cut the model alike (v,
// v-released and v-naive on a model whose cuts have one choice; chain and chain-relayed
// without skips) give equal pipeline models. A synthesis is a pure function of its request
// (deterministic work limits, a fixed seed), so an equal request gets the answer again;
// an answer the wall-clock safety limit cut short is not kept. See answer_memo.cpp.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "pulse/schedule/synthesize.hpp"

namespace pulse::detail {

/// Every field of `request` and of its model, as bytes (doubles by their bits): equal
/// images, equal requests.
std::string request_image(const ScheduleRequest& request);

/// The answer kept for a request equal to `request` in every field and in its model.
std::optional<ScheduleAnswer> recall_answer(const ScheduleRequest& request);

/// Keeps `answer` for `request` (not when its status is time_limit).
void remember_answer(const ScheduleRequest& request, const ScheduleAnswer& answer);

/// The lower bound kept for a request whose model, microbatches and memory are those of
/// `request` (a plan's screen and full synthesis of a configuration share it), else
/// `compute()`'s, then kept.
double recall_bound(const ScheduleRequest& request, const std::function<double()>& compute);

}  // namespace pulse::detail
