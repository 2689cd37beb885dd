"""Public measurements the time model is fitted to, and the fit.

Each anchor is one published throughput figure for a Stable Diffusion UNet on a device the
profiles cover, turned into the quantity a profile predicts (seconds per sample of the
UNet's forward, or forward + backward, at the microbatch the measurement ran) with the
arithmetic written out in `derive()`. The fit then picks, per device, the one efficiency
scale (timing.REFERENCE_EFFICIENCY x scale) that makes the SD2 profiles match that
device's anchors best (least squares on log time). docs/profiles.md "Calibration" prints
every step; tests/test_profiles.py checks the constants in timing.py are this fit.

The measurements are of whole training or sampling steps, not of the UNet alone, so each
derivation removes what the step does besides the UNet, with a low / high bound for each
assumption; the bounds become the profile's stated time range.
"""

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from . import timing
from .unet import SD2_UNET, build_unet

# --- what the measured steps do besides the UNet -------------------------------------------

# Stable Diffusion's VAE (AutoencoderKL f8, ch 128, ch_mult 1,2,4,4, 2 res blocks, one
# single-head attention in the mid block): the mindone training step encodes every image
# (first_stage_key "image" in configs/v2-train.yaml).
VAE_CH, VAE_MULT, VAE_RES_BLOCKS, VAE_LATENT_CH = 128, (1, 2, 4, 4), 2, 4
# OpenCLIP ViT-H/14 text tower as SD2 uses it: width 1024, MLP 4096, 77 tokens, the 23 of
# 24 layers up to the penultimate one (mindone configs/v2-train.yaml cond_stage_config).
TEXT_WIDTH, TEXT_MLP, TEXT_TOKENS, TEXT_LAYERS = 1024, 4096, 77, 23
# AdamW on fp32 master weights: read parameter, gradient and both moments (16 bytes), write
# parameter and both moments (12 bytes) per parameter, memory-bound.
OPTIMIZER_BYTES_PER_PARAM = 28
# Without flash attention the score matrix goes through memory: forward writes QK^T, reads
# it for the softmax, writes the probabilities and reads them for PV (8 bytes per fp16
# element); backward reads P, writes dP, reads both for the softmax gradient, writes dS and
# reads it for dQ and dK (14 bytes).
NAIVE_ATTENTION_BYTES_PER_SCORE = 22
# The frozen VAE and text encoder run at r x the UNet's achieved FLOP rate: r = 1 centrally,
# 0.5 to 2 for the bounds (big early convolutions can run faster than the UNet's mix, a
# single-head 4096-token attention slower).
FROZEN_RATE_BOUNDS = (0.5, 1.0, 2.0)
# The V100 anchors are SD 1.5 (equal UNet FLOPs to SD2, head width 40 instead of 64) on a
# V100 whose variant the source does not state (PCIe: 112 TFLOPS, SXM2: 125): the SXM2 SD2
# forward may be up to 15% faster than measured, or 5% slower (the scheduler step and the
# pipeline's Python between UNet calls are in the measured step).
V100_FORWARD_BOUNDS = (0.85, 1.0, 1.05)

MINDONE = ("https://github.com/mindspore-lab/mindone/blob/"
           "05d1d7e998fca94fc253ca2b7a7003bc08d3bad8/examples/stable_diffusion_v2/benchmark.md")
DIFFUSERS_T2 = ("https://github.com/huggingface/diffusers/blob/"
                "2c529b75bbd25e4c69348bbabd0a1a842d540193/docs/source/en/optimization/"
                "torch2.0.md")
SD_BENCHMARKS = ("https://github.com/alexeigor/sd-benchmarks/blob/"
                 "021a7dbb4dff3fa15b0cd61507e29526ffaec655/README.md")


@dataclass(frozen=True)
class Anchor:
    key: str
    device: str             # timing device name
    model: str              # the profile it anchors
    side: int               # latent side (image px / 8)
    kind: str               # "train" (forward + backward) or "forward"
    microbatch: int         # UNet samples per call in the measurement
    per_second: float       # the published figure: images/s (train) or UNet calls/s
    flash: bool             # whether the measured attention was flash/memory-efficient
    source: str
    conditions: str


ANCHORS = [
    Anchor("mindone-sd2-512", "Ascend-910A", "sd2-unet-512", 64, "train", 3, 6.19, False,
           MINDONE, "SD 2.0 vanilla training, 512x512, D910x1-MS2.1: one Ascend 910 (A), "
           "MindSpore 2.1 graph mode, data sink, fp16, batch 3, no flash attention: "
           "6.19 img/s"),
    Anchor("mindone-sd2-768", "Ascend-910A", "sd2-unet-768", 96, "train", 3, 3.16, True,
           MINDONE, "SD 2.1-v vanilla training, 768x768, D910x1-MS2.1: one Ascend 910 (A), "
           "MindSpore 2.1 graph mode, data sink, fp16, flash attention, batch 3: 3.16 img/s"),
    Anchor("diffusers-v100-b1", "V100-SXM2", "sd2-unet-512", 64, "forward", 2, 18.99, True,
           DIFFUSERS_T2, "SD 1.5 txt2img, V100, PyTorch 2.0 without compile, fp16, SDPA, "
           "channels_last, diffusers 0.17.0.dev0, batch 1 (UNet batch 2 with classifier-free "
           "guidance): 18.99 it/s"),
    Anchor("diffusers-v100-b4", "V100-SXM2", "sd2-unet-512", 64, "forward", 8, 5.96, True,
           DIFFUSERS_T2, "as above, batch 4 (UNet batch 8): 5.96 it/s"),
    Anchor("diffusers-v100-b16", "V100-SXM2", "sd2-unet-512", 64, "forward", 32, 1.66, True,
           DIFFUSERS_T2, "as above, batch 16 (UNet batch 32): 1.66 it/s"),
]

# Not fitted, shown beside the fit: the same SD 1.5 pipeline timed end to end.
CROSS_CHECKS = [
    ("V100-SXM2", SD_BENCHMARKS, "SD 1.5, 512x512, V100 16GB, PyTorch 2.0, fp16, xformers, "
     "batch 1, 50 steps: 2.96 s per image, i.e. at most 59 ms per UNet call at UNet batch 2 "
     "(text encoder and VAE decode included)", 2.96 / 50, 2),
]


# --- FLOP and byte counts of the parts of the step that are not the UNet ------------------

def _conv(c_in: int, c_out: int, k: int, positions: int) -> int:
    return 2 * k * k * c_in * c_out * positions


def vae_encoder_flops(px: int) -> int:
    """Forward FLOPs of the SD VAE encoder (with quant_conv) on one px x px image."""
    side, c_prev = px, VAE_CH
    flops = _conv(3, VAE_CH, 3, side * side)
    for level, mult in enumerate(VAE_MULT):
        c = VAE_CH * mult
        for j in range(VAE_RES_BLOCKS):
            c_in = c_prev if j == 0 else c
            flops += _conv(c_in, c, 3, side * side) + _conv(c, c, 3, side * side)
            if c_in != c:
                flops += _conv(c_in, c, 1, side * side)
        c_prev = c
        if level < len(VAE_MULT) - 1:
            side //= 2
            flops += _conv(c, c, 3, side * side)
    tokens, c = side * side, c_prev
    flops += 2 * (2 * _conv(c, c, 3, tokens))            # mid resnets
    flops += 4 * 2 * c * c * tokens + 4 * tokens * tokens * c  # mid attention: q,k,v,o + core
    flops += _conv(c, 2 * VAE_LATENT_CH, 3, tokens)       # conv_out (mean and log-variance)
    flops += _conv(2 * VAE_LATENT_CH, 2 * VAE_LATENT_CH, 1, tokens)  # quant_conv
    return flops


def text_encoder_flops() -> int:
    per_layer = 2 * TEXT_TOKENS * (4 * TEXT_WIDTH ** 2 + 2 * TEXT_WIDTH * TEXT_MLP)
    per_layer += 4 * TEXT_TOKENS ** 2 * TEXT_WIDTH
    return TEXT_LAYERS * per_layer


def sd2_attention_scores(side: int) -> int:
    """Score-matrix elements (heads x Lq x Lk) of every SD2 attention call, one sample."""
    cfg, total, s = SD2_UNET, 0, side
    levels = []
    for i, c in enumerate(cfg["block_out_channels"]):
        if cfg["down_block_types"][i].startswith("CrossAttn"):
            levels.append((c, s, cfg["layers_per_block"]))
        s //= 2 if i < len(cfg["block_out_channels"]) - 1 else 1
    levels.append((cfg["block_out_channels"][-1], s, 1))  # mid
    for i, c in enumerate(reversed(cfg["block_out_channels"])):
        if cfg["up_block_types"][i].startswith("CrossAttn"):
            levels.append((c, s, cfg["layers_per_block"] + 1))
        s *= 2 if i < len(cfg["block_out_channels"]) - 1 else 1
    for c, s, count in levels:
        heads, tokens = c // 64, s * s  # SD2: 64 channels per head
        total += count * heads * tokens * (tokens + cfg["text_tokens"])
    return total


def unet_params() -> int:
    return sum(layer.params for layer in build_unet(SD2_UNET, 64).layers)


def unet_forward_flops(side: int) -> int:
    return sum(layer.forward_flops for layer in build_unet(SD2_UNET, side).layers)


# --- an anchor turned into the profile's quantity ---------------------------------------------

@dataclass
class Derived:
    anchor: Anchor
    step_s: float                   # measured seconds per UNet sample (whole step)
    lines: List[str]                # the arithmetic, for docs/profiles.md
    target: Tuple[float, float, float]  # low, central, high: UNet seconds per sample


def derive(a: Anchor) -> Derived:
    dev = timing.DEVICE_BUILDERS[a.device]()
    if a.kind == "forward":
        step = 1.0 / a.per_second / a.microbatch
        lo, mid, hi = (step * f for f in V100_FORWARD_BOUNDS)
        lines = [f"1 / {a.per_second:g} it/s / {a.microbatch} samples = "
                 f"{1e3 * step:.1f} ms per UNet sample (forward); range x"
                 f"{V100_FORWARD_BOUNDS[0]:g} to x{V100_FORWARD_BOUNDS[2]:g}"]
        return Derived(a, step, lines, (lo, mid, hi))
    px = 8 * a.side
    step = 1.0 / a.per_second
    optimizer = OPTIMIZER_BYTES_PER_PARAM * unet_params() / dev.achieved_bw / a.microbatch
    naive = 0.0
    if not a.flash:
        naive = (NAIVE_ATTENTION_BYTES_PER_SCORE * sd2_attention_scores(a.side)
                 / dev.achieved_bw)
    unet = 3 * unet_forward_flops(a.side)
    frozen = vae_encoder_flops(px) + text_encoder_flops()
    rest = step - optimizer - naive

    def share(rate):
        return unet / (unet + frozen / rate)

    lo, mid, hi = (rest * share(r) for r in FROZEN_RATE_BOUNDS)
    lines = [
        f"1 / {a.per_second:g} img/s = {1e3 * step:.1f} ms per image (whole training step)",
        f"- optimizer: {OPTIMIZER_BYTES_PER_PARAM} B x {unet_params() / 1e6:.1f} M params / "
        f"{dev.achieved_bw / 1e9:.0f} GB/s / {a.microbatch} images = {1e3 * optimizer:.1f} ms",
    ]
    if not a.flash:
        lines.append(
            f"- score matrices without flash attention: {NAIVE_ATTENTION_BYTES_PER_SCORE} B x "
            f"{sd2_attention_scores(a.side) / 1e6:.0f} M elements / "
            f"{dev.achieved_bw / 1e9:.0f} GB/s = {1e3 * naive:.1f} ms")
    lines += [
        f"= {1e3 * rest:.1f} ms of UNet fwd+bwd, VAE encoder and text encoder",
        f"x UNet share {unet / 1e12:.2f} TF / ({unet / 1e12:.2f} + VAE "
        f"{vae_encoder_flops(px) / 1e12:.2f} + text {text_encoder_flops() / 1e12:.3f} TF) = "
        f"{share(1.0):.3f} (range {share(FROZEN_RATE_BOUNDS[0]):.3f} to "
        f"{share(FROZEN_RATE_BOUNDS[2]):.3f}: frozen parts at x{FROZEN_RATE_BOUNDS[0]:g} to "
        f"x{FROZEN_RATE_BOUNDS[2]:g} the UNet's FLOP rate)",
    ]
    return Derived(a, step, lines, (lo, mid, hi))


# --- the model's figure for the same quantity, and the fit -----------------------------------

_ARCH_CACHE: Dict[int, list] = {}


def modelled_s(a: Anchor, params: Optional[Tuple[float, float]] = None) -> float:
    """The time model's seconds per sample for what the anchor measured, on the anchor's
    device with (efficiency scale, launch seconds) `params` (default: the shipped ones)."""
    builder = timing.DEVICE_BUILDERS[a.device]
    dev = builder() if params is None else builder(*params)
    layers = _ARCH_CACHE.setdefault(a.side, build_unet(SD2_UNET, a.side).layers)
    total = 0.0
    for layer in layers:
        fwd, bwd, _ = timing.layer_times(layer, dev, a.microbatch)
        total += fwd + (bwd if a.kind == "train" else 0.0)
    return total / a.microbatch


def _golden(cost, lo: float, hi: float, steps: int = 60) -> float:
    """Minimum of a unimodal function on [lo, hi]."""
    g = (math.sqrt(5) - 1) / 2
    for _ in range(steps):
        x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
        if cost(x1) < cost(x2):
            hi = x2
        else:
            lo = x1
    return (lo + hi) / 2


def fit(device: str) -> Tuple[float, float]:
    """(efficiency scale, launch seconds) minimizing sum (log model - log anchor)^2 over the
    device's anchors. The launch overhead is fitted only where the anchors span more than
    one microbatch size (it is not identifiable otherwise) and stays at the device's
    default elsewhere; the scale by golden-section search on its logarithm."""
    anchors = [(a, derive(a).target[1]) for a in ANCHORS if a.device == device]
    default_launch = timing.DEVICE_BUILDERS[device]().launch_s

    def cost(scale, launch):
        return sum(math.log(modelled_s(a, (scale, launch)) / t) ** 2 for a, t in anchors)

    def best_scale(launch):
        return math.exp(_golden(lambda x: cost(math.exp(x), launch), math.log(0.05),
                                math.log(2.0)))

    if len({a.microbatch for a, _ in anchors}) < 2:
        return best_scale(default_launch), default_launch
    launch = _golden(lambda t: cost(best_scale(t), t), 0.0, 2e-3, steps=40)
    return best_scale(launch), launch


def time_range(device: str) -> Tuple[float, float]:
    """Multipliers (low, high) on the shipped times that cover every anchor's bounds."""
    ratios = []
    for a in ANCHORS:
        if a.device != device:
            continue
        lo, _, hi = derive(a).target
        model = modelled_s(a)
        ratios += [lo / model, hi / model]
    return min(ratios), max(ratios)


def derivations() -> List[str]:
    """Markdown: the arithmetic of every anchor, one code block."""
    lines = ["```"]
    for a in ANCHORS:
        what = "fwd+bwd" if a.kind == "train" else "fwd"
        lines.append(f"{a.key} ({a.device}, {what} at microbatch {a.microbatch}):")
        lines += ["  " + line for line in derive(a).lines]
    return lines + ["```"]


def calibration_table() -> List[str]:
    """Markdown: every anchor, what it becomes, the profile's figure and the error."""
    lines = ["| device | anchor | measured ms/sample (step) | UNet-only target ms (range) "
             "| before the fit: ms, / target | profile ms | profile / target |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for a in ANCHORS:
        d = derive(a)
        lo, mid, hi = (1e3 * t for t in d.target)
        model = 1e3 * modelled_s(a)
        before = 1e3 * modelled_s(a, timing.ANALYTIC_PARAMS[a.device])
        what = "fwd+bwd" if a.kind == "train" else "fwd"
        lines.append(f"| {a.device} | {a.key} ({what}, b={a.microbatch}) | {1e3 * d.step_s:.1f} "
                     f"| {mid:.1f} ({lo:.1f}-{hi:.1f}) | {before:.1f}, {before / mid:.2f} "
                     f"| {model:.1f} | {model / mid:.2f} |")
    return lines


# --- what every profile says about the calibration -------------------------------------------

# Models no anchor measures (transformers, SDXL, SVD): the fitted efficiencies carry over
# from the SD2 UNet, which is an assumption; these multipliers on their times state how far
# off they may be. V100: the fit put the SD2 UNet at the reference defaults, which allow
# GEMMs up to a third faster (0.6-0.8) and other shapes slower. 910A: its UNet efficiency
# came out at 0.29 of the defaults in MindSpore 2.1; large GEMMs may do better on its cube
# units, other shapes worse.
UNANCHORED_RANGE = {"V100-SXM2": (0.75, 1.3), "Ascend-910A": (0.6, 1.3)}
RANGE_PREFIX = "time-range "


def calibration_lines() -> List[str]:
    """Provenance assumptions: the fitted constants and every anchor behind them."""
    lines = []
    for dev in timing.DEVICES:
        used = [a.key for a in ANCHORS if a.device == dev.name]
        lines.append(
            f"Calibration {dev.name}: efficiencies = reference x {_scale(dev.name):g}, per-layer "
            f"forward overhead {dev.launch_s * 1e6:g} us, fitted by least squares on log time "
            f"to the anchors {', '.join(used)} (docs/profiles.md, Calibration).")
    for a in ANCHORS:
        d = derive(a)
        lo, mid, hi = (1e3 * t for t in d.target)
        what = "forward + backward" if a.kind == "train" else "forward"
        lines.append(
            f"Anchor {a.key} ({a.device}): {a.conditions}. UNet-only {what} per sample at "
            f"microbatch {a.microbatch}: {mid:.1f} ms (range {lo:.1f}-{hi:.1f}); the fitted "
            f"model gives {1e3 * modelled_s(a):.1f} ms.")
    return lines


def _scale(device: str) -> float:
    return {"V100-SXM2": timing.V100_SCALE, "Ascend-910A": timing.ASCEND_SCALE}[device]


def range_lines(anchored: bool) -> List[str]:
    """The profile's time range per device, in the machine-readable form docs/formats.md
    describes: "time-range DEVICE: xLOW to xHIGH (why)"."""
    lines = []
    for dev in timing.DEVICES:
        if anchored:
            lo, hi = time_range(dev.name)
            why = ("covers every anchor's bounds for this model on this device")
        else:
            lo, hi = UNANCHORED_RANGE[dev.name]
            why = ("no measurement of this model on this device; assumed, the efficiencies "
                   "being carried over from the SD2 UNet fit")
        lines.append(f"{RANGE_PREFIX}{dev.name}: x{lo:.2f} to x{hi:.2f} ({why})")
    return lines


def parse_range(line: str) -> Optional[Tuple[str, float, float]]:
    """(device, low, high) from a time-range assumption, None for any other line."""
    if not line.startswith(RANGE_PREFIX):
        return None
    device, _, rest = line[len(RANGE_PREFIX):].partition(": x")
    low, _, rest = rest.partition(" to x")
    high = rest.split(" ", 1)[0]
    return device, float(low), float(high)


def references() -> List[str]:
    seen = []
    for a in ANCHORS:
        if a.source not in seen:
            seen.append(a.source)
    return seen + [source for _, source, _, _, _ in CROSS_CHECKS if source not in seen]
