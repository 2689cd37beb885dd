// Activation recomputation (gradient checkpointing), as a transform of a model profile
// before planning, so that the partitioner, the scheduler, the simulator and the plan see
// the same times and bytes (`plan --recompute`).
//
// A recomputed layer keeps only its input for backward and runs its forward again inside
// its backward (torch.utils.checkpoint around each block: what diffusers'
// enable_gradient_checkpointing and U-ViT's use_checkpoint do). Per layer l, per sample:
//
//   kept(l)       = output_bytes of layer l-1 (its input; layer 0: its own output bytes)
//   activation'   = kept(l)                                  when kept(l) < activation(l)
//   workspace(l)  = activation(l) - kept(l)   rebuilt during l's backward, one microbatch
//                                             at a time, so charged once per device
//   backward'     = backward + forward        at every device type and microbatch size
//   weight share  = the weight-gradient seconds unchanged: fraction x backward / backward'
//                   (one fraction per layer, from the sums over all profiled times)
//
// Modes: "none"; "selective": the attention blocks only (kinds naming attention or
// transformer: the most saved bytes per second of recompute in a diffusion backbone);
// "full": every layer. A layer whose input is not smaller than what it saves is left as is.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "pulse/profile/profile.hpp"

namespace pulse {

/// The modes, for messages: "none, selective or full".
std::string recompute_modes();

/// Whether `mode` is one of them.
bool is_recompute_mode(std::string_view mode);

/// Applies `mode` to every layer it selects (above). The number of layers recomputed.
int apply_recompute(std::string_view mode, ModelProfile& model);

/// Whether `mode` recomputes layer `index` of the (untransformed) `model`: it selects the
/// layer and the layer's input is smaller than what it saves.
bool recomputes(std::string_view mode, const ModelProfile& model, std::size_t index);

/// The names of the layers in [first, last) that `mode` recomputes (recomputes() on the
/// untransformed `model`), in model order: what a plan's stage lists and a runtime
/// checkpoints.
std::vector<std::string> recomputed_layers(std::string_view mode, const ModelProfile& model,
                                           std::size_t first, std::size_t last);

}  // namespace pulse
