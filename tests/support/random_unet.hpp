// Seeded random UNet-like models for property tests and benchmarks: an encoder whose
// activations shrink as it goes down, a middle, a decoder that grows them back and consumes
// the encoder's outputs through nested (LIFO) skips of random sizes, a carried timestep
// embedding; layer costs uneven, the decoder's heavier; and a one-node cluster for them.
#pragma once

#include <cstdint>

#include "pulse/profile/profile.hpp"

namespace pulse::test {

struct RandomUnet {
  ModelProfile model;
  ClusterProfile cluster;  ///< `pp` devices of type "T" on one node, links of random speed.
  int pp = 2;              ///< Pipeline degree in [2, 8], with at least 4 layers per device.
  int global_batch = 8;    ///< dp 1, microbatch 1: this many microbatches.
};

/// Model `seed` of the family: 20 to 200 layers (`max_layers` caps it), pp 2 to 8.
RandomUnet random_unet(std::uint64_t seed, int max_layers = 200);

}  // namespace pulse::test
