#include "pulse/simulate/trace.hpp"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pulse/cost/cost_model.hpp"

namespace pulse {

namespace {

using ojson = nlohmann::ordered_json;

// Microseconds, rounded to the nanosecond like every time in a plan.
double us(double seconds) {
  return std::round(seconds * kTimeTicksPerSecond) / (kTimeTicksPerSecond / 1e6);
}

ojson metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

std::string chrome_trace(const PipelineModel& model, const Timeline& timeline,
                         const std::vector<AllReduce>& allreduce, int dp) {
  ojson events = ojson::array();
  for (std::size_t d = 0; d < timeline.devices.size(); ++d) {
    const int pid = static_cast<int>(d);
    events.push_back(metadata("process_name", pid, 0, fmt::format("device {}", d)));
    events.push_back(metadata("thread_name", pid, 0, "compute"));
    events.push_back(metadata("thread_name", pid, 1, "send"));
    const DeviceTimeline& dev = timeline.devices[d];
    for (const TimedOp& t : dev.ops) {
      const char kind = op_letter(t.op.kind);
      events.push_back(
          {{"name", fmt::format("{} stage {} mb {}", kind, t.op.stage, t.op.mb)},
           {"cat", "compute"},
           {"ph", "X"},
           {"ts", us(t.start_s)},
           {"dur", us(t.end_s - t.start_s)},
           {"pid", pid},
           {"tid", 0},
           {"args", {{"op", std::string(1, kind)}, {"stage", t.op.stage}, {"mb", t.op.mb}}}});
    }
    for (const TimedSend& s : dev.sends) {
      const Transfer& x = model.transfers[s.transfer];
      const StageId from = s.forward ? x.from : x.to, to = s.forward ? x.to : x.from;
      const Bytes& b = s.forward ? x.forward : x.backward;
      events.push_back({{"name", fmt::format("{} stage {} -> {} mb {}",
                                             s.forward ? "send" : "send grad", from, to, s.mb)},
                        {"cat", x.main_path ? "activation" : "skip"},
                        {"ph", "X"},
                        {"ts", us(s.start_s)},
                        {"dur", us(s.end_s - s.start_s)},
                        {"pid", pid},
                        {"tid", 1},
                        {"args", {{"to_device", s.to}, {"bytes", b.total()}, {"mb", s.mb}}}});
    }
    if (d < allreduce.size() && allreduce[d].seconds > 0) {
      const AllReduce& a = allreduce[d];
      events.push_back({{"name", "gradient all-reduce"},
                        {"cat", "allreduce"},
                        {"ph", "X"},
                        {"ts", us(a.start_s)},
                        {"dur", us(a.seconds)},
                        {"pid", pid},
                        {"tid", 1},
                        {"args", {{"bytes", a.bytes}, {"replicas", dp}}}});
    }
  }
  const ojson trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return trace.dump(1, ' ', false, ojson::error_handler_t::replace) + "\n";
}

}  // namespace pulse
