"""The device spec object (docs/formats.md, "Device spec") of a row of datasheets.TABLE: what
a cluster profile says of its device (`device.spec`) and a model profile of every device
type it has times for (`timing.device_specs`). The planner derives a device type's times
from another's with the two specs (include/pulse/profile/derive.hpp).

The host/launch floor of a layer comes from the fits, not the datasheet: a device of
timing.py has its per-layer overhead (fitted on the V100, assumed on the 910A); a host-floor
device its host's cost per dispatched op (calibrate.py: fitted on Hopper, assumed for the
910B's graph mode) x the SD2 UNet's dispatched ops over its layers, one mean figure per
layer.
"""

from typing import Dict, List, Tuple

from . import calibrate, datasheets, timing


def sd2_ops_per_layer() -> Tuple[int, int]:
    """(dispatched ops, layers) of the SD2 UNet at 512 px: the mean layer of the floor."""
    layers = calibrate.sd2_layers("sd2-unet-512")
    return sum(x.dispatches for x in layers), len(layers)


def layer_floor(name: str) -> Tuple[float, str]:
    """The device's host/launch floor of one layer's forward (its backward: twice it), and
    how it is set."""
    if name in timing.DEVICE_BUILDERS:
        launch_s = timing.DEVICE_BUILDERS[name]().launch_s
        how = ("fitted to diffusers' PyTorch 2.0 sampling, anchors.py" if name == "V100-SXM2"
               else "assumed, graph mode")
        return launch_s, f"{launch_s * 1e6:g} us, its per-layer overhead ({how}; timing.py)"
    host = datasheets.sheet(name).host_like
    op_s = calibrate.devices()[host].op_s
    ops, layers = sd2_ops_per_layer()
    # Evaluated as the planner's former compiled table did, so the double is the same.
    floor = op_s * ops / layers
    how = ("fitted to our bf16 eager measurements on an H200 and an H100"
           if datasheets.sheet(host).group == "hopper" else "assumed, graph mode")
    return floor, (f"{op_s * 1e6:g} us per dispatched op ({how}; calibrate.py) x {ops:,} / "
                   f"{layers} ops per layer of the SD2 UNet = {floor * 1e6:.0f} us")


def spec_json(name: str) -> Dict:
    """The spec object of device type `name`. Figures are written as they are (Python's
    shortest round-trip form), not rounded: the planner must read the doubles the table
    holds."""
    s = datasheets.sheet(name)
    floor, how = layer_floor(name)
    return {
        "aliases": list(s.aliases),
        "stack": s.stack,
        "peak_flops": dict(s.peak_flops),
        "memory_bytes_per_s": s.hbm_bytes_per_s,
        "memory_efficiency": s.mem_efficiency,
        "layer_floor_s": floor,
        "source": f"{s.source}; layer floor {how}",
    }


def spec_table() -> List[str]:
    """Every device of the table as docs/profiles.md lists it."""
    lines = ["| device type | also named | stack | peak TFLOP/s (dense, by precision) "
             "| HBM GB/s (datasheet x achieved) | floor per layer forward |",
             "|---|---|---|---|---:|---|"]
    for s in datasheets.TABLE:
        _, how = layer_floor(s.name)
        peaks = ", ".join(f"{p} {v / 1e12:,.6g}" for p, v in s.peak_flops.items())
        lines.append(f"| {s.name} | {', '.join(s.aliases)} | {s.stack} | {peaks} "
                     f"| {s.hbm_bytes_per_s / 1e9:,.6g} x {s.mem_efficiency:g} "
                     f"= {s.achieved_bw / 1e9:,.6g} | {how} |")
    return lines
