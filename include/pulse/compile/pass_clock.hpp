// How long each pass took, for --stats (never written into a plan).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace pulse {

/// One pass's time.
struct PassTime {
  std::string pass;
  double seconds = 0;    ///< All runs of the pass together.
  double longest_s = 0;  ///< The longest single run (how far the schedule is from its limit).
  int runs = 0;
};

/// Times passes by name, adding up when a pass runs many times (the tuner runs the pass list
/// per candidate). A pass times itself, as ninja's METRIC_RECORD does: its first line opens a
/// PassClock::Run, which charges the time to the pass when it goes out of scope.
class PassClock {
 public:
  class Run {
   public:
    Run(PassClock& clock, const char* pass)
        : clock_(clock), pass_(pass), start_(std::chrono::steady_clock::now()) {}
    ~Run();
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;

   private:
    PassClock& clock_;
    const char* pass_;
    std::chrono::steady_clock::time_point start_;
  };

  /// Charges one run of `seconds` to `pass`; passes are listed in the order they first ran.
  void record(const std::string& pass, double seconds);
  const std::vector<PassTime>& times() const { return times_; }

 private:
  std::vector<PassTime> times_;
};

}  // namespace pulse
