// The job's list-schedule outcomes (list_outcomes.hpp). Keyed by value: the pipeline model
// by its defaulted operator== (as the memo's other keys), a candidate by its three vectors.

#include "list_outcomes.hpp"

#include <functional>
#include <utility>

#include "answer_memo.hpp"

namespace pulse::detail {

namespace {

std::size_t mix(std::size_t seed, std::size_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

std::size_t hash_ints(std::size_t h, const std::vector<int>& values) {
  for (int v : values) h = mix(h, std::hash<int>{}(v));
  return h;
}

template <class T>
std::size_t vector_bytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

std::size_t candidate_bytes(const ListCandidate& c) {
  return vector_bytes(c.ranks) + vector_bytes(c.windows) + vector_bytes(c.limits);
}

}  // namespace

std::size_t ListOutcome::bytes() const {
  return sizeof(ListOutcome) + vector_bytes(checked) + vector_bytes(ties.pairs);
}

std::size_t ListOutcomes::Hash::operator()(const ListCandidate& c) const {
  return hash_ints(hash_ints(hash_ints(c.limits.size(), c.ranks), c.windows), c.limits);
}

std::optional<ListOutcome> ListOutcomes::find(const ListCandidate& candidate) const {
  const std::lock_guard<std::mutex> hold(lock_);
  const auto it = kept_.find(candidate);
  if (it == kept_.end()) return std::nullopt;
  return it->second;
}

void ListOutcomes::keep(const ListCandidate& candidate, ListOutcome outcome) {
  const std::lock_guard<std::mutex> hold(lock_);
  const auto it = kept_.find(candidate);
  if (it == kept_.end()) {
    // One set alone is held to the cap too: the table drops only the sets asked for before
    // (a record not kept costs a replay, never a different answer).
    if (bytes_ > kListOutcomeBytes) return;
    bytes_ += sizeof(ListCandidate) + candidate_bytes(candidate) + outcome.bytes();
    kept_.emplace(candidate, std::move(outcome));
    return;
  }
  ListOutcome& old = it->second;
  // A complete run says everything; of two stopped ones, the later stop decides more.
  const bool more = old.stopped && (!outcome.stopped || outcome.at_s > old.at_s);
  if (!more) return;
  bytes_ = bytes_ - old.bytes() + outcome.bytes();
  old = std::move(outcome);
}

std::size_t ListOutcomes::bytes() const {
  const std::lock_guard<std::mutex> hold(lock_);
  return bytes_;
}

ScheduleMemo::Counts ListOutcomes::counts() const {
  const std::lock_guard<std::mutex> hold(lock_);
  return counts_;
}

void ListOutcomes::count(bool recalled) {
  const std::lock_guard<std::mutex> hold(lock_);
  ++(recalled ? counts_.recalled : counts_.computed);
}

std::shared_ptr<ListOutcomes> ListOutcomeTable::of(const PipelineModel& model, int num_microbatches,
                                                   bool split_backward) {
  const std::lock_guard<std::mutex> hold(lock_);
  auto it = entries_.begin();
  while (it != entries_.end() && !(it->num_microbatches == num_microbatches &&
                                   it->split_backward == split_backward && it->model == model)) {
    ++it;
  }
  if (it == entries_.end()) {
    entries_.push_front(
        Entry{model, num_microbatches, split_backward, std::make_shared<ListOutcomes>()});
  } else {
    entries_.splice(entries_.begin(), entries_, it);
  }
  // Drop the sets asked for longest ago while all of them hold more than the cap (the one
  // just asked for stays; a search holding a dropped one keeps it until it ends).
  std::size_t total = 0;
  for (const Entry& e : entries_) total += e.outcomes->bytes();
  while (total > kListOutcomeBytes && entries_.size() > 1) {
    const ScheduleMemo::Counts c = entries_.back().outcomes->counts();
    evicted_.computed += c.computed;
    evicted_.recalled += c.recalled;
    total -= entries_.back().outcomes->bytes();
    entries_.pop_back();
  }
  return entries_.front().outcomes;
}

ScheduleMemo::Counts ListOutcomeTable::counts() const {
  const std::lock_guard<std::mutex> hold(lock_);
  ScheduleMemo::Counts all = evicted_;
  for (const Entry& e : entries_) {
    const ScheduleMemo::Counts c = e.outcomes->counts();
    all.computed += c.computed;
    all.recalled += c.recalled;
  }
  return all;
}

std::shared_ptr<ListOutcomes> list_outcomes(ScheduleMemo* memo, const PipelineModel& model,
                                            int num_microbatches, bool split_backward) {
  if (memo == nullptr) return nullptr;
  return memo->tables().list_outcomes.of(model, num_microbatches, split_backward);
}

}  // namespace pulse::detail
