"""Markdown tables of the generated profiles (pasted into docs/profiles.md, and checked
against it by tests/test_profiles.py so the document cannot go stale)."""

from typing import Dict, List

from . import anchors, floorreport, hostfloor, specs
from .timing import DEVICES

MIB = float(1 << 20)
GIB = float(1 << 30)


def _train_ms_per_sample(profile: Dict, device: str, index: int) -> float:
    b = profile["timing"]["microbatch_sizes"][index]
    total = sum(layer["forward_s"][device][index] + layer["backward_s"][device][index]
                for layer in profile["layers"])
    return 1e3 * total / b


def _mfu(profile: Dict, device: str, index: int) -> float:
    """Model FLOPs utilisation of fwd+bwd: 3 x forward FLOPs / (time x peak)."""
    peak = next(d.peak_flops for d in list(DEVICES) + [s.device for s in hostfloor.SPECS]
                if d.name == device)
    flops = sum(x["forward_flops_per_sample"] for x in profile["layers"])
    return 3 * flops / (_train_ms_per_sample(profile, device, index) / 1e3 * peak)


def model_table(profiles: List[Dict]) -> List[str]:
    lines = [
        "| profile | layers | skips | params | fwd GFLOPs/sample | skip MiB/sample "
        "| saved act. MiB/sample | fwd+bwd ms/sample V100 / 910A (b) | MFU V100 / 910A |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in profiles:
        layers = p["layers"]
        sizes = p["timing"]["microbatch_sizes"]
        index = max(i for i, b in enumerate(sizes) if b <= 8)
        v100, ascend = (_train_ms_per_sample(p, d.name, index) for d in DEVICES)
        mfu = " / ".join(f"{_mfu(p, d.name, index):.2f}" for d in DEVICES)
        lines.append(
            f"| {p['name']} | {len(layers)} | {len(p['skips'])} "
            f"| {sum(x['params'] for x in layers):,} "
            f"| {sum(x['forward_flops_per_sample'] for x in layers) / 1e9:,.1f} "
            f"| {sum(s['bytes_per_sample'] for s in p['skips']) / MIB:,.2f} "
            f"| {sum(x['activation_bytes_per_sample'] for x in layers) / MIB:,.0f} "
            f"| {v100:,.1f} / {ascend:,.1f} ({sizes[index]}) | {mfu} |")
    return lines


def model_table_2026(profiles: List[Dict]) -> List[str]:
    """Forward + backward per sample on the host-floor devices, at microbatch 1 and at the
    largest profiled size up to 32."""
    names = [d.name for d in hostfloor.SPECS]
    lines = ["| profile | b | " + " | ".join(f"ms/sample {n}" for n in names)
             + " | MFU " + " / ".join(names) + " |", "|---|---|" + "---:|" * (len(names) + 1)]
    for p in profiles:
        sizes = p["timing"]["microbatch_sizes"]
        for index in sorted({0, max(i for i, b in enumerate(sizes) if b <= 32)}):
            cells = [f"{_train_ms_per_sample(p, n, index):,.1f}" for n in names]
            mfu = " / ".join(f"{_mfu(p, n, index):.2f}" for n in names)
            lines.append(f"| {p['name']} | {sizes[index]} | " + " | ".join(cells)
                         + f" | {mfu} |")
    return lines


def _links(profile: Dict) -> str:
    parts = []
    for name, link in profile["link_classes"].items():
        parts.append(f"{name} {link['bandwidth_bytes_per_s'] / 1e9:g} GB/s, "
                     f"{link['latency_s'] * 1e6:g} us")
    return "; ".join(parts)


def cluster_table(profiles: List[Dict]) -> List[str]:
    lines = [
        "| profile | devices | device | memory GiB (reserved) | link classes (per direction, "
        "latency) | inter-node |",
        "|---|---|---|---|---|---|",
    ]
    for p in profiles:
        dev = p["device"]
        lines.append(
            f"| {p['name']} | {p['nodes']} x {p['devices_per_node']} | {dev['type']} "
            f"| {dev['memory_bytes'] / GIB:.4g} ({dev['reserved_bytes'] / GIB:.2f}) "
            f"| {_links(p)} | {p['inter_node']} |")
    return lines


def calibration(models: List[Dict]) -> List[str]:
    """The anchors against the fitted model, then the time range each profile states."""
    lines = anchors.derivations() + [""] + anchors.calibration_table() + [
        "", "| profile | time range V100 | time range 910A |",
                                           "|---|---|---|"]
    for p in models:
        ranges = {}
        for line in p["provenance"]["assumptions"]:
            parsed = anchors.parse_range(line)
            if parsed:
                ranges[parsed[0]] = f"x{parsed[1]:.2f} to x{parsed[2]:.2f}"
        lines.append(f"| {p['name']} | {ranges['V100-SXM2']} | {ranges['Ascend-910A']} |")
    return lines


def summary(models: List[Dict], clusters: List[Dict]) -> str:
    return "\n".join(model_table(models) + [""] + model_table_2026(models) + [""]
                     + cluster_table(clusters) + [""] + specs.spec_table() + [""]
                     + calibration(models) + [""]
                     + floorreport.report(models)) + "\n"
