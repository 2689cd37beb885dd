"""Markdown tables of the 2026 devices' calibration (docs/profiles.md, "Calibration of the
2026 devices"; tests/test_profiles.py checks every line is on that page)."""

import math
from typing import Dict, List, Tuple

from . import calibrate, hostfloor, measurements

KINDS = (("resnet", "resnet"), ("transformer", "attn (Transformer2D)"),
         ("other", "conv, sampling, embedding, head"))


def within(w: measurements.Whole, got: Dict[str, float]) -> Tuple[float, float, bool]:
    """(relative distance of the model from the measured range, tolerance, within it)."""
    if got["time"] < w.low_ms:
        off = got["time"] / w.low_ms - 1
    elif got["time"] > w.high_ms:
        off = got["time"] / w.high_ms - 1
    else:
        off = 0.0
    device_bound = got["device"] >= got["host"]
    tol = (measurements.TOLERANCE_DEVICE_BOUND if device_bound
           else measurements.TOLERANCE_HOST_BOUND)
    return off, tol, abs(off) <= tol


def whole_table() -> List[str]:
    lines = ["| device | model | microbatch | measured ms | model ms (device / host side) "
             "| bound by | off the range | tolerance |",
             "|---|---|---:|---:|---:|---|---:|---:|"]
    for w in measurements.WHOLE_STEPS:
        got = calibrate.step_ms(calibrate.devices()[w.device], w.model, w.microbatch)
        off, tol, _ = within(w, got)
        if w.low_ms == w.high_ms:
            span = f"{w.low_ms:.1f}"
        elif math.isfinite(w.high_ms):
            span = f"{w.low_ms:.1f}-{w.high_ms:.1f}"
        else:
            span = f">= {w.low_ms:.1f}"
        bound = "device" if got["device"] >= got["host"] else "host"
        lines.append(f"| {w.device} | {w.model} | {w.microbatch} | {span} | {got['time']:.1f} "
                     f"({got['device']:.1f} / {got['host']:.1f}) | {bound} | {100 * off:+.1f}% "
                     f"| {100 * tol:.0f}% |")
    return lines


def predictions_table() -> List[str]:
    """The one-stage step (forward + backward, ms) the profiles give, both SD2 sizes."""
    sizes = (1, 2, 4, 8, 16, 32)
    lines = ["| model | device | " + " | ".join(f"b={b}" for b in sizes) + " |",
             "|---|---|" + "---:|" * len(sizes)]
    for model in ("sd2-unet-512", "sd2-unet-768"):
        for name, dev in calibrate.devices().items():
            row = [f"{calibrate.step_ms(dev, model, b)['time']:.1f}" for b in sizes]
            lines.append(f"| {model} | {name} | " + " | ".join(row) + " |")
    return lines


def constants_table() -> List[str]:
    lines = ["| device | conv | small_spatial | linear | attention | elementwise x (transformer "
             "/ other) | host us per op | regime |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, dev in calibrate.devices().items():
        eff = dev.device.efficiency
        lines.append(f"| {name} | {eff['conv']:.3g} | {eff['small_spatial']:.3g} "
                     f"| {eff['linear']:.3g} | {eff['attention']:.3g} "
                     f"| {dev.elementwise[0]:g} / {dev.elementwise[1]:g} "
                     f"| {dev.op_s * 1e6:.3g} | {calibrate.REGIMES[name]} |")
    return lines


def _kind(layer) -> str:
    return layer.kind if layer.kind in ("resnet", "transformer") else "other"


def block_table() -> List[str]:
    """Geometric mean of model / measured per block kind and size (the profiler's
    per-call overheads added), and the share of points the fit used."""
    fit = calibrate.hopper_fit()
    points = calibrate.block_points(fit)
    mask = calibrate.crossover_mask()
    _, sizes, _ = calibrate.block_profile()
    layers = calibrate.sd2_layers("sd2-unet-512")
    stats = {}
    i = 0
    for layer in layers:
        for b in sizes:
            for _ in range(2):  # forward, backward
                m, g, _ = points[i]
                entry = stats.setdefault((_kind(layer), b), [0.0, 0, 0])
                entry[0] += math.log(m / g)
                entry[1] += 1
                entry[2] += int(mask[i])
                i += 1
    lines = ["| block kind | " + " | ".join(f"b={b}" for b in sizes) + " |",
             "|---|" + "---:|" * len(sizes)]
    for kind, label in KINDS:
        cells = []
        for b in sizes:
            total, n, used = stats[(kind, b)]
            cells.append(f"{math.exp(total / n):.2f} ({used}/{n})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def public_table() -> List[str]:
    lines = ["| device | figure | microbatch | measured ms/sample (step) | UNet-only target ms "
             "(range) | model ms | model / target |", "|---|---|---:|---:|---:|---:|---:|"]
    for a in measurements.PUBLIC:
        t, got = calibrate.public_figure(a)
        lo, mid, hi = (1e3 * x for x in t.target)
        got *= 1e3
        what = "fwd+bwd" if a.kind == "train" else "fwd"
        used = "" if a.fitted else ", not fitted"
        lines.append(f"| {a.device} | {a.key} ({what}{used}) | {a.microbatch} "
                     f"| {1e3 * t.step_s:.1f} | {mid:.1f} ({lo:.1f}-{hi:.1f}) | {got:.1f} "
                     f"| {got / mid:.2f} |")
    return lines


def range_table(models: List[Dict]) -> List[str]:
    from .anchors import parse_range
    names = list(calibrate.devices())
    lines = ["| profile | " + " | ".join(f"time range {n}" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for p in models:
        ranges = {}
        for line in p["provenance"]["assumptions"]:
            parsed = parse_range(line)
            if parsed:
                ranges[parsed[0]] = f"x{parsed[1]:.2f} to x{parsed[2]:.2f}"
        lines.append(f"| {p['name']} | " + " | ".join(ranges[n] for n in names) + " |")
    return lines


def report(models: List[Dict]) -> List[str]:
    fit = calibrate.hopper_fit()
    head = [f"Hopper fit: the profiler adds {fit.overhead_fwd_s * 1e6:.3g} us to a forward and "
            f"{fit.overhead_bwd_s * 1e6:.3g} us to a backward timed alone; "
            f"{hostfloor.BACKWARD_DISPATCHES:g} x the forward's ops in a backward; "
            f"A100 = Hopper x {calibrate.scale_of('A100-SXM'):.3g}, "
            f"910B = reference x {calibrate.scale_of('Ascend-910B'):.3g}."]
    return (head + [""] + constants_table() + [""] + whole_table() + [""] + block_table()
            + [""] + public_table() + [""] + predictions_table() + [""] + range_table(models))
