"""Device time model: layer FLOPs and bytes -> forward / backward seconds per microbatch.

For a layer at microbatch size b, per FLOP class c with forward FLOPs F_c per sample:

  work        W_c(b)   = b * F_c
  efficiency  eff_c(b) = eff_c * W_c(b) / (W_c(b) + W_half_c),  W_half_c = eff_c * peak * t_ramp
  compute     t_c(b)   = W_c(b) / (peak * eff_c(b))  =  b * F_c / (peak * eff_c) + t_ramp

so a class reaches half its peak efficiency at the work it would finish in t_ramp, and the
time per sample falls as b grows (an affine time, not a line through zero). Then

  forward  = max(sum_c t_c(b), t_weights) + t_elementwise(b) + t_launch
  backward = max(sum_c m_c * t_c(b), 2 * t_weights) + 2 * t_elementwise(b) + 2 * t_launch

t_weights = 2 bytes x params / achieved HBM bandwidth (every weight is read once per
microbatch, which makes tiny-batch layers memory-bound); t_elementwise = b x
ELEMENTWISE_TRAFFIC x saved-activation bytes / achieved HBM bandwidth (norms,
activations, residual adds and the like are memory-bound, models_hw.md section 0: each
intermediate is written once and read once); m_c = 2 (backward = 2 x forward) except the
flash-attention core, m = 2.5 (models_hw.md section 7).
"""

from dataclasses import dataclass
from typing import Dict, List, Tuple

from .layers import (ATTENTION, CONV, EMBEDDING, FP16_BYTES, LINEAR, SMALL_SPATIAL, Layer)

# Achieved fraction of fp16 peak per FLOP class on V100, from the "Suggested achieved-
# efficiency defaults" of models_hw.md section 6: big GEMM/linear 0.6-0.8, 3x3 conv
# (cuDNN, tensor cores) 0.45-0.6, flash/xformers attention 0.35-0.5, small-spatial
# layers (8^2-16^2) <= 0.2. Matmuls on one vector per sample (time embeddings, AdaLN
# modulation, patch embeddings, output heads) are GEMV-like: 0.1 (our assumption).
V100_EFFICIENCY = {CONV: 0.50, SMALL_SPATIAL: 0.20, LINEAR: 0.60, ATTENTION: 0.35,
                   EMBEDDING: 0.10}
# models_hw.md section 6: "Ascend 910A: multiply these by about 0.7-0.8".
ASCEND_EFFICIENCY_SCALE = 0.75

# Backward FLOPs = multiplier x forward FLOPs per class (models_hw.md sections 0 and 7).
BACKWARD_MULTIPLIER = {CONV: 2.0, SMALL_SPATIAL: 2.0, LINEAR: 2.0, ATTENTION: 2.5,
                       EMBEDDING: 2.0}

# Memory-bound elementwise traffic per sample = this x the (uncalibrated) saved bytes.
ELEMENTWISE_TRAFFIC = 2.0

# activation_bytes_per_sample = this x the analytic "saved" count (models_hw.md sections
# 0 and 8: fp32 norms under autocast and allocator rounding, "calibrate by x1.3-1.5").
ACTIVATION_CALIBRATION = 1.4


@dataclass(frozen=True)
class Device:
    name: str
    peak_flops: float        # fp16 dense peak, FLOP/s
    hbm_bytes_per_s: float   # HBM peak bandwidth
    mem_efficiency: float    # achieved fraction of hbm_bytes_per_s
    efficiency: Dict[str, float]
    ramp_s: float            # t_ramp: fixed cost of a FLOP class, sets W_half
    launch_s: float          # fixed per-layer framework/launch overhead, forward

    @property
    def achieved_bw(self) -> float:
        return self.hbm_bytes_per_s * self.mem_efficiency


V100 = Device(
    name="V100-SXM2",
    peak_flops=125e12,       # fp16 tensor core peak at 1530 MHz (models_hw.md 6)
    hbm_bytes_per_s=900e9,   # HBM2, "800-850 achievable" (models_hw.md 6)
    mem_efficiency=0.9,
    efficiency=V100_EFFICIENCY,
    ramp_s=20e-6,
    launch_s=10e-6,          # eager PyTorch, about a dozen kernels per layer
)

ASCEND_910A = Device(
    name="Ascend-910A",
    peak_flops=256e12,       # fp16 cube peak, Hot Chips 2019 (models_hw.md 6)
    hbm_bytes_per_s=1.2e12,  # 4 HBM2 stacks, secondary sources (models_hw.md 6)
    mem_efficiency=0.8,      # lower than V100: the bandwidth figure itself is uncertain
    efficiency={c: e * ASCEND_EFFICIENCY_SCALE for c, e in V100_EFFICIENCY.items()},
    ramp_s=20e-6,
    launch_s=20e-6,          # CANN operator dispatch is slower than CUDA launches
)

DEVICES = (V100, ASCEND_910A)


def _class_times(layer: Layer, dev: Device, b: int) -> Dict[str, float]:
    """Forward compute seconds per FLOP class at microbatch b (the saturating form)."""
    times = {}
    for cls in sorted(layer.flops):
        flops = layer.flops[cls]
        if flops <= 0:
            continue
        eff_max = dev.efficiency[cls]
        work = b * flops
        w_half = eff_max * dev.peak_flops * dev.ramp_s
        eff = eff_max * work / (work + w_half)
        times[cls] = work / (dev.peak_flops * eff)
    return times


def layer_times(layer: Layer, dev: Device, b: int) -> Tuple[float, float, float]:
    """(forward seconds, backward seconds, weight-gradient share of backward) at b."""
    cls_t = _class_times(layer, dev, b)
    t_weights = FP16_BYTES * layer.params / dev.achieved_bw
    t_elem = b * ELEMENTWISE_TRAFFIC * FP16_BYTES * layer.saved_elems / dev.achieved_bw
    fwd = max(sum(cls_t.values()), t_weights) + t_elem + dev.launch_s
    bwd_compute = sum(BACKWARD_MULTIPLIER[c] * t for c, t in cls_t.items())
    bwd = max(bwd_compute, 2 * t_weights) + 2 * t_elem + 2 * dev.launch_s
    # The weight-gradient GEMMs are one of the two backward GEMMs of every weighted class;
    # the attention core has no weights.
    w_share = sum(t for c, t in cls_t.items() if c != ATTENTION) / bwd
    return fwd, bwd, w_share


def profile_times(layer: Layer, sizes: List[int]) -> Dict[str, Dict[str, List[float]]]:
    """forward_s / backward_s dicts (device -> seconds per microbatch at each size)."""
    fwd, bwd = {}, {}
    for dev in DEVICES:
        pairs = [layer_times(layer, dev, b)[:2] for b in sizes]
        fwd[dev.name] = [f for f, _ in pairs]
        bwd[dev.name] = [g for _, g in pairs]
    return {"forward_s": fwd, "backward_s": bwd}


def weight_fraction(layer: Layer, sizes: List[int]) -> float:
    """W share of backward on the first device at the largest microbatch size."""
    return layer_times(layer, DEVICES[0], max(sizes))[2]


def activation_bytes(layer: Layer) -> int:
    return int(round(layer.saved_elems * FP16_BYTES * ACTIVATION_CALIBRATION))


def assumptions() -> List[str]:
    """The time model in words, for every model profile's provenance."""
    v, a = V100, ASCEND_910A
    eff = ", ".join(f"{c} {e:g}" for c, e in V100_EFFICIENCY.items())
    return [
        "Forward FLOPs per sample from the published configuration: conv 2*k^2*Cin*Cout*Hout*Wout, "
        "linear 2*in*out*tokens, attention core 4*Lq*Lk*C; norms, activations, softmax and "
        "residual adds count as memory traffic, not FLOPs.",
        f"Peaks: {v.name} {v.peak_flops / 1e12:g} TFLOPS fp16 tensor, {v.hbm_bytes_per_s / 1e9:g} GB/s HBM2 "
        f"at {v.mem_efficiency:g} achieved; {a.name} {a.peak_flops / 1e12:g} TFLOPS fp16 cube, "
        f"{a.hbm_bytes_per_s / 1e9:g} GB/s HBM at {a.mem_efficiency:g} achieved.",
        f"Maximum achieved efficiency per FLOP class on {v.name}: {eff} (conv = 3x3/1x1 convs on maps "
        "larger than 16x16, small_spatial = convs producing 16x16 or fewer positions, linear = "
        "GEMMs over tokens, attention = flash/xformers core, embedding = GEMMs on one vector "
        f"per sample, patch embeddings and output heads); {a.name} = {v.name} x "
        f"{ASCEND_EFFICIENCY_SCALE:g}.",
        "Small-batch inefficiency: eff_c(b) = eff_c * W / (W + W_half) with W = b x the class's "
        "forward FLOPs per sample and W_half = eff_c x peak x t_ramp, t_ramp = "
        f"{v.ramp_s * 1e6:g} us ({v.name}) and {a.ramp_s * 1e6:g} us ({a.name}); i.e. each class "
        "costs b*F/(peak*eff_c) + t_ramp.",
        "Layer forward = max(sum of class compute times, weight bytes / achieved HBM bandwidth) + "
        f"{ELEMENTWISE_TRAFFIC:g} x saved-activation bytes x b / achieved HBM bandwidth "
        f"(elementwise traffic) + a launch overhead of {v.launch_s * 1e6:g} us ({v.name}) or "
        f"{a.launch_s * 1e6:g} us ({a.name}).",
        "Backward = 2 x forward for every term (compute, weight traffic, elementwise traffic, launch) "
        "except the flash-attention core, whose backward is 2.5 x its forward.",
        "backward_weight_fraction = share of the backward spent in weight-gradient GEMMs (one of the "
        f"two backward GEMMs of every weighted class) on {v.name} at the largest microbatch size.",
        "activation_bytes_per_sample = the reference 'saved' count with flash/xformers attention "
        "(each op keeps its input; ResnetBlock 3*(Cin+Cout)*HW, BasicTransformerBlock "
        f"28*C*L + 2*C*77, fp16) x {ACTIVATION_CALIBRATION:g} calibration for fp32 norms under "
        "autocast and allocator rounding; no activation checkpointing.",
        "Activations, skips and carried tensors are fp16 (2 bytes per element).",
    ]
