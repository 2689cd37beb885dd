#include "pulse/compile/pass_clock.hpp"

#include <algorithm>

namespace pulse {

PassClock::Run::~Run() {
  clock_.record(pass_,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
}

void PassClock::record(const std::string& pass, double seconds) {
  for (PassTime& t : times_) {
    if (t.pass == pass) {
      t.seconds += seconds;
      t.longest_s = std::max(t.longest_s, seconds);
      ++t.runs;
      return;
    }
  }
  times_.push_back({pass, seconds, seconds, 1});
}

}  // namespace pulse
