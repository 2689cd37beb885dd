"""The constants of the 2026 devices (hostfloor.py), fitted to measurements.py.

Three fits, each deterministic (coordinate descent or golden section on logarithms, fixed
steps; results rounded to three significant digits, so the profiles do not move with the
last bit of a float):

- hopper (H100-SXM, H200-SXM): the four FLOP-class efficiencies, the elementwise traffic,
  the host cost per dispatched op and the profiler's per-call overhead, by least squares
  on log time over the H200 block profile (every block, forward and backward, microbatch
  1-32: a block timed alone costs max(device, host) + the overhead) and, weighted as much
  as all blocks together, the whole steps of measurements.WHOLE_STEPS (zero inside the
  measured range, the log distance to it outside). H100 and H200 share every constant;
  their times differ by HBM bandwidth.
- a100: the Hopper efficiencies times one scale, fitted to the fitted A100 public
  figures (forward passes); the host cost and elementwise traffic are Hopper's (a host
  and framework property).
- ascend910b: the reference efficiencies (timing.REFERENCE_EFFICIENCY) times one scale,
  fitted to the 910B training figures; the per-op dispatch cost is an assumption (graph
  mode), the elementwise traffic timing.py's.
"""

import functools
import json
import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple

from . import anchors, datasheets, hostfloor, measurements, timing
from .layers import ATTENTION, CONV, EMBEDDING, LINEAR, SMALL_SPATIAL, Layer
from .unet import SD2_UNET, build_unet

FITTED_CLASSES = (CONV, SMALL_SPATIAL, LINEAR, ATTENTION)
# Graph mode dispatches each kernel from the device's task scheduler: not measurable from
# the anchors (one microbatch size), assumed.
ASCEND_910B_OP_S = 5e-6
MAX_EFFICIENCY = 0.95


def r3(x: float) -> float:
    return float(f"{x:.3g}")


SD2_LATENT_SIDE = {"sd2-unet-512": 64, "sd2-unet-768": 96}


@functools.lru_cache(maxsize=None)
def sd2_layers(model: str) -> Tuple[Layer, ...]:
    return tuple(build_unet(SD2_UNET, SD2_LATENT_SIDE[model]).layers)


def spec(name: str) -> hostfloor.FloorDevice:
    return next(d for d in hostfloor.SPECS if d.name == name)


def step_ms(dev: hostfloor.FloorDevice, model: str, b: int, train: bool = True) -> Dict:
    """The model's milliseconds per microbatch (time, device side, host side)."""
    return {k: 1e3 * v for k, v in hostfloor.step(list(sd2_layers(model)), dev, b, train).items()}


# --- the Hopper fit ----------------------------------------------------------------------------

@dataclass(frozen=True)
class HopperFit:
    efficiency: Dict[str, float]
    elementwise: Tuple[float, float]   # transformer blocks, other layers
    op_s: float
    overhead_fwd_s: float    # what timing one block alone adds (the block profile only):
    overhead_bwd_s: float    # its forward, its backward


def _efficiency(p: Sequence[float]) -> Dict[str, float]:
    eff = dict(zip(FITTED_CLASSES, p[:4]))
    # GEMV-like matmuls keep the reference's ratio to convolutions.
    eff[EMBEDDING] = (timing.REFERENCE_EFFICIENCY[EMBEDDING] / timing.REFERENCE_EFFICIENCY[CONV]
                      * eff[CONV])
    return eff


def _hopper(p: Sequence[float]) -> HopperFit:
    return HopperFit(_efficiency(p), (p[4], p[5]), p[6], p[7], p[8])


def hopper_devices(fit: HopperFit) -> Dict[str, hostfloor.FloorDevice]:
    return {d.name: hostfloor.with_constants(d, fit.efficiency, fit.op_s, fit.elementwise)
            for d in hostfloor.SPECS if d.group == "hopper"}


@functools.lru_cache(maxsize=None)
def block_profile() -> Tuple[List[str], List[int], Dict[str, Tuple[List[float], List[float]]]]:
    with open(measurements.BLOCK_PROFILE, encoding="utf-8") as f:
        prof = json.load(f)
    dev = measurements.BLOCK_PROFILE_DEVICE[0]
    blocks = {x["name"]: (x["forward_s"][dev], x["backward_s"][dev]) for x in prof["layers"]}
    return [x["name"] for x in prof["layers"]], prof["timing"]["microbatch_sizes"], blocks


# A block timed alone overlaps its own host and device work less than a step overlaps
# neighbouring blocks: near the crossover (neither side twice the other) its time is a
# smooth sum rather than the max. Those points say nothing a step can use; the fit leaves
# them out (decided with the first pass's constants, then refitted once).
CROSSOVER = 2.0


def block_points(fit: HopperFit) -> List[Tuple[float, float, bool]]:
    """(model, measured, clear of the crossover) for every block, forward and backward, at
    every size of the block profile."""
    dev = hopper_devices(fit)[measurements.BLOCK_PROFILE_DEVICE[1]]
    _, sizes, blocks = block_profile()
    out = []
    for layer in sd2_layers("sd2-unet-512"):
        fwd, bwd = blocks[layer.name]
        for i, b in enumerate(sizes):
            s = hostfloor.split(layer, dev, b)
            for device, host, over, got in ((s.device_fwd, s.host_fwd, fit.overhead_fwd_s, fwd[i]),
                                            (s.device_bwd, s.host_bwd, fit.overhead_bwd_s, bwd[i])):
                clear = max(device, host) >= CROSSOVER * min(device, host)
                out.append((max(device, host) + over, got, clear))
    return out


def block_residuals(fit: HopperFit, mask: Sequence[bool] = ()) -> List[float]:
    """log(model / measured) of the block points (those mask keeps, if given)."""
    points = block_points(fit)
    keep = mask or [True] * len(points)
    return [math.log(m / g) for (m, g, _), k in zip(points, keep) if k]


def range_residual(value: float, low: float, high: float) -> float:
    if value < low:
        return math.log(value / low)
    if value > high:
        return math.log(value / high)
    return 0.0


def whole_residuals(devices: Dict[str, hostfloor.FloorDevice]) -> List[float]:
    out = []
    for w in measurements.WHOLE_STEPS:
        if w.device in devices:
            got = step_ms(devices[w.device], w.model, w.microbatch)["time"]
            out.append(range_residual(got, w.low_ms, w.high_ms))
    return out


def _hopper_cost(p: Sequence[float], mask: Sequence[bool]) -> float:
    fit = _hopper(p)
    blocks = block_residuals(fit, mask)
    whole = whole_residuals(hopper_devices(fit))
    cost = sum(r * r for r in blocks) / len(blocks)
    if whole:
        cost += WHOLE_WEIGHT * sum(r * r for r in whole) / len(whole)
    return cost


def coordinate_descent(cost: Callable[[List[float]], float], start: Sequence[float],
                       upper: Sequence[float], rounds: int = 10, sweeps: int = 3) -> List[float]:
    """Minimum of cost over positive parameters: each parameter in turn multiplied or
    divided by a factor, up to `sweeps` passes over the parameters per round; the factor
    shrinks from 1.5 by half its logarithm each round (the last step is about 0.1%)."""
    p, best = list(start), cost(list(start))
    factor = 1.5
    for _ in range(rounds):
        for _ in range(sweeps):
            moved = False
            for k in range(len(p)):
                for f in (factor, 1 / factor):
                    q = list(p)
                    q[k] = min(p[k] * f, upper[k])
                    c = cost(q)
                    if c < best - 1e-12:
                        p, best, moved = q, c, True
                        break
            if not moved:
                break
        factor = math.sqrt(factor)
    return p


# The whole steps are what a plan predicts: outside their range they weigh four times all
# the blocks together.
WHOLE_WEIGHT = 4.0
# Start and upper bounds: conv, small_spatial, linear, attention efficiencies (GEMMs and
# convolutions up to 0.8 of peak, flash attention up to 0.5), elementwise traffic, host
# seconds per op, the profiler's forward and backward overheads.
HOPPER_START = (0.5, 0.5, 0.5, 0.4, 2.0, 2.0, 30e-6, 50e-6, 200e-6)
HOPPER_UPPER = (0.8, 0.8, 0.8, 0.5, 8.0, 8.0, 1e-3, 1e-3, 1e-3)


@functools.lru_cache(maxsize=None)
def hopper_fit() -> HopperFit:
    p = list(HOPPER_START)
    for _ in range(2):
        mask = [clear for _, _, clear in block_points(_hopper(p))]
        p = coordinate_descent(lambda q: _hopper_cost(q, mask), p, HOPPER_UPPER)
    return _hopper([r3(x) for x in p])


def crossover_mask() -> List[bool]:
    """The block points the final pass fitted (clear of the crossover at the constants
    of the pass before it)."""
    return [clear for _, _, clear in block_points(hopper_fit())]


# --- one-scale fits to public figures ------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """A public figure turned into the model's quantity: seconds per sample of the UNet's
    forward (or forward + backward) at a microbatch size, with low / central / high."""
    public: measurements.Public
    step_s: float
    target: Tuple[float, float, float]
    lines: List[str]


def derive(a: measurements.Public, achieved_bw: float) -> Target:
    if a.kind == "forward":
        step = 1.0 / a.per_second / a.microbatch
        lo, mid, hi = (step * f for f in anchors.V100_FORWARD_BOUNDS)
        lines = [f"1 / {a.per_second:g} it/s / {a.microbatch} samples = {1e3 * step:.1f} ms "
                 f"per UNet sample (forward); range x{anchors.V100_FORWARD_BOUNDS[0]:g} to "
                 f"x{anchors.V100_FORWARD_BOUNDS[2]:g}"]
        return Target(a, step, (lo, mid, hi), lines)
    side = SD2_LATENT_SIDE[a.model]
    step = 1.0 / a.per_second
    optimizer = (anchors.OPTIMIZER_BYTES_PER_PARAM * anchors.unet_params() / achieved_bw
                 / a.microbatch)
    naive = 0.0 if a.flash else (anchors.NAIVE_ATTENTION_BYTES_PER_SCORE
                                 * anchors.sd2_attention_scores(side) / achieved_bw)
    unet = 3 * anchors.unet_forward_flops(side)
    frozen = anchors.vae_encoder_flops(8 * side) + anchors.text_encoder_flops()
    rest = step - optimizer - naive
    shares = [unet / (unet + frozen / r) for r in anchors.FROZEN_RATE_BOUNDS]
    lines = [f"1 / {a.per_second:g} img/s = {1e3 * step:.1f} ms per image (whole training step)",
             f"- optimizer {1e3 * optimizer:.1f} ms, score matrices without flash attention "
             f"{1e3 * naive:.1f} ms = {1e3 * rest:.1f} ms",
             f"x UNet share {shares[1]:.3f} (range {shares[0]:.3f} to {shares[2]:.3f})"]
    return Target(a, step, tuple(rest * s for s in shares), lines)


def per_sample_s(dev: hostfloor.FloorDevice, a: measurements.Public) -> float:
    return step_ms(dev, a.model, a.microbatch, a.kind == "train")["time"] / 1e3 / a.microbatch


def scaled(dev: hostfloor.FloorDevice, shape: Dict[str, float], k: float,
           op_s: float, elementwise: Tuple[float, float]) -> hostfloor.FloorDevice:
    eff = {c: min(MAX_EFFICIENCY, e * k) for c, e in shape.items()}
    return hostfloor.with_constants(dev, eff, op_s, elementwise)


def fit_scale(name: str, shape: Dict[str, float], op_s: float,
              elementwise: Tuple[float, float]) -> float:
    base = spec(name)
    targets = [(a, derive(a, base.device.achieved_bw).target[1])
               for a in measurements.PUBLIC if a.device == name and a.fitted]

    def cost(log_k):
        dev = scaled(base, shape, math.exp(log_k), op_s, elementwise)
        return sum(math.log(per_sample_s(dev, a) / t) ** 2 for a, t in targets)

    return r3(math.exp(anchors._golden(cost, math.log(0.05), math.log(5.0))))


@functools.lru_cache(maxsize=None)
def devices() -> Dict[str, hostfloor.FloorDevice]:
    """Every 2026 device with its fitted constants, in hostfloor.SPECS order."""
    hop = hopper_fit()
    out = dict(hopper_devices(hop))
    k_a100 = fit_scale("A100-SXM", hop.efficiency, hop.op_s, hop.elementwise)
    out["A100-SXM"] = scaled(spec("A100-SXM"), hop.efficiency, k_a100, hop.op_s, hop.elementwise)
    ref = timing.REFERENCE_EFFICIENCY
    traffic = (timing.ELEMENTWISE_TRAFFIC, timing.ELEMENTWISE_TRAFFIC)
    k_910b = fit_scale("Ascend-910B", ref, ASCEND_910B_OP_S, traffic)
    out["Ascend-910B"] = scaled(spec("Ascend-910B"), ref, k_910b, ASCEND_910B_OP_S, traffic)
    return {d.name: out[d.name] for d in hostfloor.SPECS}


def scale_of(name: str) -> float:
    """The fitted one-scale factor of A100 (on Hopper's shape) or the 910B (on the
    reference's)."""
    dev, ref = devices()[name], (hopper_fit().efficiency if name == "A100-SXM"
                                 else timing.REFERENCE_EFFICIENCY)
    return dev.device.efficiency[CONV] / ref[CONV]


# --- what every profile says about it ------------------------------------------------------

# What each device's times describe, as datasheets.TABLE says, for every timed device.
REGIMES = {s.name: s.regime for s in datasheets.TABLE
           if s.name in timing.DEVICE_BUILDERS or s.group is not None}
# The A100's device side rests on 2023 software; newer kernels may be up to this much faster.
A100_STACK_LOW = 0.75
REGIME_PREFIX = "regime "
# Models no measurement covers. Hopper and A100: the linear efficiency is fitted on the SD2
# UNet's narrow GEMMs (320-1280 channels) and transformers' wide ones can run up to twice as
# fast; their kernel counts are counted, not measured. 910B: as the 910A.
UNANCHORED_RANGE = {"H100-SXM": (0.5, 1.3), "H200-SXM": (0.5, 1.3), "A100-SXM": (0.5, 1.3),
                    "Ascend-910B": (0.6, 1.3)}
# Even a point inside its measured range leaves this much doubt.
MIN_RANGE = (0.95, 1.05)


def whole_points(name: str) -> List[measurements.Whole]:
    """The whole-step points of a device, or of its fit group when it has none of its own."""
    own = [w for w in measurements.WHOLE_STEPS if w.device == name]
    group = {d.name for d in hostfloor.SPECS if d.group == spec(name).group}
    return own or [w for w in measurements.WHOLE_STEPS if w.device in group]


def time_range(name: str) -> Tuple[float, float]:
    """Multipliers (low, high) on the shipped SD2 times that cover the measurements' ranges
    (Hopper: the whole steps; A100 and 910B: the fitted public figures' bounds)."""
    dev, ratios = devices()[name], []
    if spec(name).group == "hopper":
        for w in whole_points(name):
            got = step_ms(devices()[w.device], w.model, w.microbatch)["time"]
            ratios.append(w.low_ms / got)
            if math.isfinite(w.high_ms):
                ratios.append(w.high_ms / got)
    else:
        for a in measurements.PUBLIC:
            if a.device == name and a.fitted:
                lo, _, hi = derive(a, dev.device.achieved_bw).target
                ratios += [lo / per_sample_s(dev, a), hi / per_sample_s(dev, a)]
    low = min(ratios + [MIN_RANGE[0]] + ([A100_STACK_LOW] if name == "A100-SXM" else []))
    return low, max(ratios + [MIN_RANGE[1]])


def range_lines(anchored: bool) -> List[str]:
    lines = []
    for name in devices():
        if anchored:
            lo, hi = time_range(name)
            why = "covers every measurement of the SD2 UNet behind this device's constants"
        else:
            lo, hi = UNANCHORED_RANGE[name]
            why = ("no measurement of this model on this device; the constants carry over "
                   "from the SD2 UNet fit")
        lines.append(f"{anchors.RANGE_PREFIX}{name}: x{lo:.2f} to x{hi:.2f} ({why})")
    return lines


def regime_lines() -> List[str]:
    return [f"{REGIME_PREFIX}{name}: {text}" for name, text in REGIMES.items()]


def _eff_text(dev: hostfloor.FloorDevice) -> str:
    return ", ".join(f"{c} {dev.device.efficiency[c]:.3g}" for c in FITTED_CLASSES + (EMBEDDING,))


def constants_lines() -> List[str]:
    """The host-floor model and every fitted constant, one line per device."""
    hop = hopper_fit()
    lines = [
        "Host floor (H100-SXM, H200-SXM, A100-SXM, Ascend-910B): forward = max(device time, "
        "dispatched ops x host seconds per op), backward = max(device time, 2 x the forward's "
        "ops x host seconds per op); device time = timing's class times at the efficiencies "
        "below (with the t_ramp saturation) + weight reads + elementwise traffic (a multiple "
        "of the saved bytes: transformer blocks, other layers). Ops are counted per layer from "
        "the architecture (kernels and the attention processors' kernel-free head reshapes).",
    ]
    for name, dev in devices().items():
        lines.append(
            f"Constants {name} ({dev.hardware}; HBM at {dev.device.mem_efficiency:g} achieved): "
            f"efficiency {_eff_text(dev)}; elementwise traffic x{dev.elementwise[0]:g} "
            f"(transformer blocks) and x{dev.elementwise[1]:g} (other layers); "
            f"{dev.op_s * 1e6:.3g} us per dispatched op.")
    lines.append(
        f"Fit hopper: least squares on log time over the {measurements.BLOCK_PROFILE.name} "
        f"blocks clear of the host/device crossover, the profiler adding "
        f"{hop.overhead_fwd_s * 1e6:.3g} us (forward) and {hop.overhead_bwd_s * 1e6:.3g} us "
        f"(backward) per block timed alone, and the whole steps below; A100-SXM: Hopper's "
        f"efficiencies x {scale_of('A100-SXM'):.3g} fitted to the diffusers A100 figures, "
        f"Hopper's host cost; Ascend-910B: reference efficiencies x "
        f"{scale_of('Ascend-910B'):.3g} fitted to the mindone 910B figures, "
        f"{ASCEND_910B_OP_S * 1e6:g} us per op assumed (graph mode) (docs/profiles.md).")
    return lines


def point_lines() -> List[str]:
    """Every measurement behind the constants, with what the fitted model gives."""
    lines = []
    for w in measurements.WHOLE_STEPS:
        got = step_ms(devices()[w.device], w.model, w.microbatch)["time"]
        span = (f"{w.low_ms:.1f}-{w.high_ms:.1f} ms" if math.isfinite(w.high_ms)
                else f"at least {w.low_ms:.1f} ms")
        lines.append(f"Whole step {w.device} {w.model} microbatch {w.microbatch}: {span} "
                     f"({w.source}); the model gives {got:.1f} ms.")
    for a in measurements.PUBLIC:
        t, got = public_figure(a)
        lo, mid, hi = (1e3 * x for x in t.target)
        what = "forward + backward" if a.kind == "train" else "forward"
        use = "fitted" if a.fitted else "not fitted"
        lines.append(f"Anchor {a.key} ({a.device}, {use}): {a.conditions}. UNet-only {what} "
                     f"per sample at microbatch {a.microbatch}: {mid:.1f} ms (range "
                     f"{lo:.1f}-{hi:.1f}); the model gives {1e3 * got:.1f} ms.")
    return lines


def public_figure(a: measurements.Public) -> Tuple[Target, float]:
    """A public figure's target and the fitted model's seconds per sample for it."""
    dev = devices()[a.device]
    return derive(a, dev.device.achieved_bw), per_sample_s(dev, a)


HARDWARE_REFERENCES = [
    "NVIDIA H100 / H200 SXM and A100 SXM4 datasheets: 989.4 / 989.4 / 312 TFLOPS bf16 dense; "
    "3.35 TB/s HBM3 / 4.8 TB/s HBM3e / 2.039 TB/s HBM2e",
    "MLPerf Training v4.0 system descriptions NVIDIA/systems/eos_n8_ngc24.04_nemo.json and "
    "h200_ngc24.04_nemo.json (mlcommons/training_results_v4.0 @ 62f111b): H100-SXM5 81559 MiB, "
    "H200-SXM5 143771 MiB, NVLink Gen4 900 GB/s + NVSwitch Gen3, 8x ConnectX-7 NDR 400 Gb/s",
    "Ascend 910B: npu-smi on an 8 x 910B1 server (ArthurChiao/arthurchiao.github.io "
    "_posts/2023-09-16-gpu-advanced-notes-2-zh.md @ 1127364: 24 AI cores at 1800 MHz, 65536 MB "
    "HBM, full HCCS mesh, 8 x 200G RoCE); Hot Chips 31 (2019): 4096 fp16 MAC per cube per cycle",
    "../shared/measured/README.md and profiles/measured/ (H200 and H100 measurements, bf16 "
    "eager)",
]


def references() -> List[str]:
    seen = list(HARDWARE_REFERENCES)
    for a in measurements.PUBLIC:
        if a.source not in seen:
            seen.append(a.source)
    return seen
