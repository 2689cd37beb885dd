#include "pulse/plan/strategy.hpp"

#include <algorithm>
#include <iterator>

namespace pulse {

namespace {

using S = SkipTreatment;
using R = SkipRouting;
using F = ScheduleFamily;

// The baselines, each one family; pulse tries these too.
const Family kVNaive{"v-naive", 1, S::blind, R::direct, F::synthesized, "v-naive"};
const Family kOneFOneB{"1f1b", 0, S::local_first, R::forwarded, F::one_f_one_b, "1f1b"};
const Family kOneFOneBDirect{"1f1b-direct", 0, S::local_first, R::direct, F::one_f_one_b,
                             "1f1b-direct"};
const Family kGPipe{"gpipe", 0, S::local_first, R::forwarded, F::gpipe, "gpipe"};

const std::vector<Family>& pulse_families() {
  static const std::vector<Family> f = {
      {"v", 1, S::local_first, R::direct, F::synthesized},
      {"v-released", 1, S::released, R::direct, F::synthesized},
      {"w2", 2, S::local_first, R::direct, F::synthesized},
      {"w2-released", 2, S::released, R::direct, F::synthesized},
      {"w3", 3, S::local_first, R::direct, F::synthesized},
      {"w3-released", 3, S::released, R::direct, F::synthesized},
      // The baselines' partitions with the synthesized schedule...
      {"chain", 0, S::local_first, R::direct, F::synthesized},
      {"chain-relayed", 0, S::local_first, R::forwarded, F::synthesized},
      // ... and the baselines' own plans.
      kVNaive,
      kOneFOneB,
      kOneFOneBDirect,
      kGPipe,
  };
  return f;
}

struct Named {
  const char* name;
  Strategy strategy;
};

// Indexed by Strategy.
constexpr Named kStrategies[] = {
    {"pulse", Strategy::pulse},      {"v-naive", Strategy::v_naive},
    {"1f1b", Strategy::one_f_one_b}, {"1f1b-direct", Strategy::one_f_one_b_direct},
    {"gpipe", Strategy::gpipe},
};

}  // namespace

const char* strategy_name(Strategy s) {
  return kStrategies[static_cast<int>(s)].name;
}

std::optional<Strategy> parse_strategy(std::string_view name) {
  if (name == "sequential") return Strategy::one_f_one_b;
  for (const Named& n : kStrategies) {
    if (name == n.name) return n.strategy;
  }
  return std::nullopt;
}

std::string strategy_names() {
  std::string out;
  for (const Named& n : kStrategies) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

const std::vector<Family>& families(Strategy s) {
  static const std::vector<Family> v_naive = {kVNaive}, one_f_one_b = {kOneFOneB},
                                   direct = {kOneFOneBDirect}, gpipe = {kGPipe};
  switch (s) {
    case Strategy::pulse:
      return pulse_families();
    case Strategy::v_naive:
      return v_naive;
    case Strategy::one_f_one_b:
      return one_f_one_b;
    case Strategy::one_f_one_b_direct:
      return direct;
    case Strategy::gpipe:
      return gpipe;
  }
  return pulse_families();
}

const Family* find_family(std::string_view name) {
  for (const Family& f : pulse_families()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

}  // namespace pulse
