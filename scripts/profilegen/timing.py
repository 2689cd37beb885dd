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

from . import datasheets
from .layers import (ATTENTION, CONV, EMBEDDING, FP16_BYTES, LINEAR, SMALL_SPATIAL, Layer)

# The shape of the efficiencies across FLOP classes: the "suggested achieved-efficiency
# defaults" of models_hw.md section 6 for V100: big GEMM/linear 0.6-0.8, 3x3 conv (cuDNN,
# tensor cores) 0.45-0.6, flash/xformers attention 0.35-0.5, small-spatial layers
# (8^2-16^2) <= 0.2. Matmuls on one vector per sample (time embeddings, AdaLN modulation,
# patch embeddings, output heads) are GEMV-like: 0.1 (our assumption).
REFERENCE_EFFICIENCY = {CONV: 0.50, SMALL_SPATIAL: 0.20, LINEAR: 0.60, ATTENTION: 0.35,
                        EMBEDDING: 0.10}

# Each device's efficiencies are REFERENCE_EFFICIENCY x one scale per device, fitted to the
# public measurements in anchors.py (least squares on log time over that device's anchors;
# docs/profiles.md "Calibration" has the arithmetic). tests/test_profiles.py refits and
# checks that these constants are the fit, rounded to three digits.
V100_SCALE = 1.01
ASCEND_SCALE = 0.292
# Per-layer forward overhead (backward: twice this). The V100 anchors cover UNet batches 2
# to 32, so the fit sets it there (eager PyTorch launches each block's dozen-plus kernels
# from Python); the 910A anchors are all at batch 3, so its figure stays an assumption
# (graph mode, CANN operator dispatch).
V100_LAUNCH_S = 298e-6
ASCEND_LAUNCH_S = 20e-6
# What the profiles used before the fit, (scale, per-layer overhead), for the comparison
# in docs/profiles.md: V100 at the reference defaults and the 910A at 0.75 of them
# (models_hw.md section 6: "Ascend 910A: multiply these by about 0.7-0.8").
ANALYTIC_PARAMS = {"V100-SXM2": (1.0, 10e-6), "Ascend-910A": (0.75, 20e-6)}

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


def _scaled(scale: float) -> Dict[str, float]:
    return {c: e * scale for c, e in REFERENCE_EFFICIENCY.items()}


def from_sheet(name: str, efficiency: Dict[str, float], launch_s: float) -> "Device":
    """The device of datasheets.TABLE's row `name` (fp16 peak, HBM and its achieved fraction)
    with these efficiencies and per-layer overhead."""
    sheet = datasheets.sheet(name)
    return Device(name=name, peak_flops=sheet.peak_flops["fp16"],
                  hbm_bytes_per_s=sheet.hbm_bytes_per_s, mem_efficiency=sheet.mem_efficiency,
                  efficiency=efficiency, ramp_s=20e-6, launch_s=launch_s)


def v100(scale: float = V100_SCALE, launch_s: float = V100_LAUNCH_S) -> "Device":
    # 125 TFLOPS fp16 tensor peak, 900 GB/s HBM2 at 0.9 ("800-850 achievable", models_hw.md 6)
    return from_sheet("V100-SXM2", _scaled(scale), launch_s)


def ascend_910a(scale: float = ASCEND_SCALE, launch_s: float = ASCEND_LAUNCH_S) -> "Device":
    # 256 TFLOPS fp16 cube (Hot Chips 2019), 1.2 TB/s HBM at 0.8: lower than the V100's, the
    # bandwidth figure itself is uncertain (secondary sources, models_hw.md 6)
    return from_sheet("Ascend-910A", _scaled(scale), launch_s)


# Builds each device at a given efficiency scale (the fit in anchors.py varies it).
DEVICE_BUILDERS = {"V100-SXM2": v100, "Ascend-910A": ascend_910a}
V100 = v100()
ASCEND_910A = ascend_910a()
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


def layer_times(layer: Layer, dev: Device, b: int,
                elementwise: float = ELEMENTWISE_TRAFFIC) -> Tuple[float, float, float]:
    """(forward seconds, backward seconds, weight-gradient share of backward) at b;
    `elementwise`: the elementwise traffic in saved-activation bytes (hostfloor.py fits
    its own)."""
    cls_t = _class_times(layer, dev, b)
    t_weights = FP16_BYTES * layer.params / dev.achieved_bw
    t_elem = b * elementwise * FP16_BYTES * layer.saved_elems / dev.achieved_bw
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
    eff = ", ".join(f"{c} {e:g}" for c, e in REFERENCE_EFFICIENCY.items())
    return [
        "Forward FLOPs per sample from the published configuration: conv 2*k^2*Cin*Cout*Hout*Wout, "
        "linear 2*in*out*tokens, attention core 4*Lq*Lk*C; norms, activations, softmax and "
        "residual adds count as memory traffic, not FLOPs.",
        f"Peaks: {v.name} {v.peak_flops / 1e12:g} TFLOPS fp16 tensor, {v.hbm_bytes_per_s / 1e9:g} GB/s HBM2 "
        f"at {v.mem_efficiency:g} achieved; {a.name} {a.peak_flops / 1e12:g} TFLOPS fp16 cube, "
        f"{a.hbm_bytes_per_s / 1e9:g} GB/s HBM at {a.mem_efficiency:g} achieved.",
        f"Maximum achieved efficiency per FLOP class: the reference defaults ({eff}; conv = "
        "3x3/1x1 convs on maps larger than 16x16, small_spatial = convs producing 16x16 or fewer "
        "positions, linear = GEMMs over tokens, attention = flash/xformers core, embedding = "
        "GEMMs on one vector per sample, patch embeddings and output heads) x a per-device scale "
        f"fitted to public measurements: {v.name} x {V100_SCALE:g}, {a.name} x {ASCEND_SCALE:g} "
        "(the calibration lines below).",
        "Small-batch inefficiency: eff_c(b) = eff_c * W / (W + W_half) with W = b x the class's "
        "forward FLOPs per sample and W_half = eff_c x peak x t_ramp, t_ramp = "
        f"{v.ramp_s * 1e6:g} us ({v.name}) and {a.ramp_s * 1e6:g} us ({a.name}); i.e. each class "
        "costs b*F/(peak*eff_c) + t_ramp.",
        "Layer forward = max(sum of class compute times, weight bytes / achieved HBM bandwidth) + "
        f"{ELEMENTWISE_TRAFFIC:g} x saved-activation bytes x b / achieved HBM bandwidth "
        f"(elementwise traffic) + a per-layer overhead of {v.launch_s * 1e6:g} us ({v.name}, "
        f"fitted) or {a.launch_s * 1e6:g} us ({a.name}, assumed).",
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
