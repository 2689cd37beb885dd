#include "pulse/profile/recompute.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>

namespace pulse {

std::string recompute_modes() {
  return "none, selective or full";
}

bool is_recompute_mode(std::string_view mode) {
  return mode == "none" || mode == "selective" || mode == "full";
}

namespace {

bool selects(std::string_view mode, const Layer& layer) {
  if (mode == "full") return true;
  if (mode != "selective") return false;
  const auto has = [&](std::string_view word) {
    return layer.kind.find(word) != std::string::npos;
  };
  return has("attention") || has("transformer");
}

// What a recomputed layer keeps: its input, the previous layer's output.
std::int64_t kept_bytes(const ModelProfile& model, std::size_t index) {
  const std::size_t from = index == 0 ? 0 : index - 1;
  return model.layers[from].output_bytes_per_sample;
}

// Adds each forward time to its backward; returns the sums (before, after) of backward.
std::pair<double, double> add_forward_to_backward(Layer& l) {
  double before = 0, after = 0;
  for (std::size_t t = 0; t < l.backward_s.size() && t < l.forward_s.size(); ++t) {
    for (std::size_t k = 0; k < l.backward_s[t].size() && k < l.forward_s[t].size(); ++k) {
      before += l.backward_s[t][k];
      l.backward_s[t][k] += l.forward_s[t][k];
      after += l.backward_s[t][k];
    }
  }
  return {before, after};
}

}  // namespace

bool recomputes(std::string_view mode, const ModelProfile& model, std::size_t index) {
  const Layer& l = model.layers[index];
  return selects(mode, l) && kept_bytes(model, index) < l.activation_bytes_per_sample;
}

std::vector<std::string> recomputed_layers(std::string_view mode, const ModelProfile& model,
                                           std::size_t first, std::size_t last) {
  std::vector<std::string> out;
  for (std::size_t l = first; l < last; ++l) {
    if (recomputes(mode, model, l)) out.push_back(model.layers[l].name);
  }
  return out;
}

int apply_recompute(std::string_view mode, ModelProfile& model) {
  int recomputed = 0;
  // Output bytes are never changed, so every layer's test reads the profile's figures.
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    if (!recomputes(mode, model, i)) continue;
    Layer& l = model.layers[i];
    const std::int64_t kept = kept_bytes(model, i);
    l.recompute_workspace_bytes_per_sample = l.activation_bytes_per_sample - kept;
    l.activation_bytes_per_sample = kept;
    const auto [before, after] = add_forward_to_backward(l);
    if (after > 0) l.backward_weight_fraction *= before / after;
    ++recomputed;
  }
  return recomputed;
}

}  // namespace pulse
