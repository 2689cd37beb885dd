// Requests are compared by a byte image of every field and of the model they point to
// (doubles by their bits). The static_asserts below fail when one of these structs gains a
// member: the member must then be added to the image, or two requests that differ in it
// would share an answer.

#include "answer_memo.hpp"

#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

namespace pulse::detail {

namespace {

static_assert(sizeof(ScheduleRequest) == 128,
              "a new ScheduleRequest field: add it to request_image()");
static_assert(sizeof(PipelineModel) == 160, "a new PipelineModel field: add it to request_image()");
static_assert(sizeof(StageLayout) == 56, "a new StageLayout field: add it to request_image()");
static_assert(sizeof(StageCost) == 56, "a new StageCost field: add it to request_image()");
static_assert(sizeof(Transfer) == 136, "a new Transfer field: add it to request_image()");
static_assert(sizeof(SkipPlacement) == 24, "a new SkipPlacement field: add it to request_image()");
static_assert(sizeof(MemoryBreakdown) == 48,
              "a new MemoryBreakdown field: add it to request_image()");

class Image {
 public:
  template <typename T>
  Image& operator<<(const T& value) {
    static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>);
    char raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    bytes_.append(raw, sizeof(T));
    return *this;
  }
  Image& operator<<(const std::string& s) {
    *this << s.size();
    bytes_ += s;
    return *this;
  }
  template <typename T>
  Image& operator<<(const std::vector<T>& v) {
    *this << v.size();
    for (const T& x : v) *this << x;
    return *this;
  }
  Image& operator<<(const StageCost& s) {
    return *this << s.forward_s << s.backward_s << s.backward_weight_s << s.params
                 << s.activation_bytes << s.recompute_workspace_bytes << s.largest_layer_params;
  }
  Image& operator<<(const Bytes& b) { return *this << b.activation << b.skip << b.carried; }
  Image& operator<<(const Transfer& t) {
    return *this << t.from << t.to << t.main_path << t.forward << t.backward << t.forward_messages
                 << t.backward_messages << t.forward_s << t.backward_s << t.skips << t.carried;
  }
  Image& operator<<(const SkipPlacement& k) {
    return *this << k.skip << k.producer_stage << k.consumer_stage << k.local << k.bytes;
  }
  Image& operator<<(const LinkClass& l) {
    return *this << l.name << l.bandwidth_bytes_per_s << l.latency_s;
  }
  Image& operator<<(const MemoryBreakdown& m) {
    return *this << m.weights << m.gradients << m.optimizer << m.activations << m.skip_cache
                 << m.workspace;
  }
  Image& operator<<(const PipelineModel& m) {
    return *this << m.layout.first_layer << m.layout.device << m.layout.num_devices << m.routing
                 << m.overlap_comm << m.stages << m.transfers << m.skips << m.links;
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

}  // namespace

std::string request_image(const ScheduleRequest& r) {
  Image i;
  i << *r.model << r.family << r.num_microbatches << r.static_bytes << r.memory_capacity
    << r.activation_budget << r.memory_curve_points << r.allreduce_s << r.split_backward
    << r.max_nodes << r.max_seconds << r.exact_max_ops << r.max_evaluations
    << r.max_order_evaluations << r.seed << r.probe_smaller_budget;
  return i.take();
}

namespace {

// A handful: the equal requests of one plan come close together.
constexpr std::size_t kKept = 4;

std::mutex& lock() {
  static std::mutex m;
  return m;
}
std::deque<std::pair<std::string, ScheduleAnswer>>& kept() {
  static std::deque<std::pair<std::string, ScheduleAnswer>> k;
  return k;
}

}  // namespace

std::optional<ScheduleAnswer> recall_answer(const ScheduleRequest& request) {
  if (request.model == nullptr) return std::nullopt;
  const std::string key = request_image(request);
  const std::lock_guard<std::mutex> hold(lock());
  for (const auto& [k, answer] : kept()) {
    if (k == key) return answer;
  }
  return std::nullopt;
}

void remember_answer(const ScheduleRequest& request, const ScheduleAnswer& answer) {
  if (request.model == nullptr || answer.status == SolveStatus::time_limit) return;
  std::string key = request_image(request);
  const std::lock_guard<std::mutex> hold(lock());
  kept().emplace_back(std::move(key), answer);
  if (kept().size() > kKept) kept().pop_front();
}

double recall_bound(const ScheduleRequest& request, const std::function<double()>& compute) {
  // What the bound depends on: the model, M, the split, the memory (capacity, static state,
  // budget); not the searches' limits.
  ScheduleRequest same = request;
  same.family = ScheduleFamily::synthesized;
  same.memory_curve_points = same.max_nodes = same.exact_max_ops = same.seed = 0;
  same.max_evaluations = same.max_order_evaluations = 0;
  same.max_seconds = 0;
  same.allreduce_s.clear();
  const std::string key = request_image(same);
  static std::mutex lock;
  static std::deque<std::pair<std::string, double>> kept;
  {
    const std::lock_guard<std::mutex> hold(lock);
    for (const auto& [k, bound] : kept) {
      if (k == key) return bound;
    }
  }
  const double bound = compute();
  const std::lock_guard<std::mutex> hold(lock);
  kept.emplace_back(key, bound);
  if (kept.size() > kKept) kept.pop_front();
  return bound;
}

}  // namespace pulse::detail
