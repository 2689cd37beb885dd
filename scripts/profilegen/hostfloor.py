"""Time model of the 2026 devices (H100, H200, A100, Ascend 910B): the analytic device time
of timing.py under a host/launch floor.

Measured on an H200 and an H100 (../shared/measured/README.md): in eager PyTorch the SD2
UNet's forward + backward step takes about the same 80-100 ms from microbatch 1 to 8,
because the GPU waits for the host to launch its kernels. A time linear in FLOPs from zero
would make a stage with half the work twice as fast; on a real GPU it is not. So, for a
layer at microbatch b on device d:

  device_fwd(b) = timing.layer_times with no per-layer overhead: every FLOP class at the
                  device's fitted efficiency (with the t_ramp saturation), weight reads,
                  elementwise traffic (its own fitted multiple of the saved bytes)
  host_fwd      = dispatches x op_s   (layers.Layer: kernels + kernel-free ops, per op)
  forward(b)    = max(device_fwd(b), host_fwd)
  backward(b)   = max(device_bwd(b), BACKWARD_DISPATCHES x host_fwd)

op_s is what one dispatched op costs the host: the Python, dispatcher and launch work of
an eager op (a property of the host and the framework rather than of the GPU, so the
NVIDIA devices share the value fitted on the Hopper measurements), or, in graph mode, the
device's own task dispatch. The hard max says the slower side sets the pace and that the
host runs ahead of the GPU only within a layer: conservative for a stage that mixes
host-bound and device-bound layers (docs/profiles.md, "Host floor").

V100 and Ascend 910A keep timing.py's model unchanged (their plans must not move).
"""

from dataclasses import dataclass, replace
from typing import Dict, List, Tuple

from . import datasheets, timing
from .layers import Layer

# The backward of an eager op dispatches about twice its forward's ops (a GEMM's input
# and weight gradients, a norm's two reductions, an activation's gradient product).
BACKWARD_DISPATCHES = 2.0


@dataclass(frozen=True)
class FloorDevice:
    """A device of the host-floor model: its analytic side and its per-op host cost."""
    device: timing.Device   # peak, HBM, efficiencies; launch_s is 0 (the floor replaces it)
    op_s: float             # host (eager) or dispatch (graph mode) seconds per op
    elementwise: Tuple[float, float]  # elementwise traffic in saved-activation bytes:
                                      # (transformer blocks, every other layer)
    group: str              # devices sharing fitted constants (calibrate.py)
    regime: str             # what the times describe: dtype, eager or graph/compiled
    hardware: str           # the datasheet figures, for provenance

    @property
    def name(self) -> str:
        return self.device.name


HOPPER_REGIME = datasheets.HOPPER_REGIME
ASCEND_GRAPH_REGIME = datasheets.ASCEND_GRAPH_REGIME

# The devices with fitted times of their own, from datasheets.TABLE (datasheet figures and
# sources there). The efficiencies, op_s and elementwise here are placeholders:
# calibrate.py fits them to the measurements and rebuilds every device with with_constants().
SPECS = [
    FloorDevice(timing.from_sheet(s.name, dict(timing.REFERENCE_EFFICIENCY), 0.0), 0.0,
                (2.0, 2.0), s.group, s.regime, s.hardware)
    for s in datasheets.TABLE if s.group is not None
]


def with_constants(dev: FloorDevice, efficiency: Dict[str, float], op_s: float,
                   elementwise: Tuple[float, float]) -> FloorDevice:
    """The device with the given per-class efficiencies, per-op host cost and elementwise
    traffic."""
    return replace(dev, device=replace(dev.device, efficiency=dict(efficiency)), op_s=op_s,
                   elementwise=elementwise)


@dataclass(frozen=True)
class Split:
    """One layer's forward and backward at one microbatch size, both sides apart."""
    device_fwd: float
    device_bwd: float
    host_fwd: float
    host_bwd: float

    @property
    def forward(self) -> float:
        return max(self.device_fwd, self.host_fwd)

    @property
    def backward(self) -> float:
        return max(self.device_bwd, self.host_bwd)


def elementwise(layer: Layer, dev: FloorDevice) -> float:
    """The layer's elementwise traffic factor: a transformer block's pointwise work (norms,
    residual adds, GEGLU, head copies) is a smaller multiple of what it saves than a
    convolution block's (GroupNorm, SiLU and bias adds over whole feature maps)."""
    return dev.elementwise[0] if layer.kind == "transformer" else dev.elementwise[1]


def split(layer: Layer, dev: FloorDevice, b: int) -> Split:
    fwd, bwd, _ = timing.layer_times(layer, dev.device, b, elementwise(layer, dev))
    host = layer.dispatches * dev.op_s
    return Split(fwd, bwd, host, BACKWARD_DISPATCHES * host)


def layer_times(layer: Layer, dev: FloorDevice, b: int) -> Tuple[float, float]:
    s = split(layer, dev, b)
    return s.forward, s.backward


def step(layers: List[Layer], dev: FloorDevice, b: int, train: bool = True) -> Dict[str, float]:
    """Seconds of one microbatch of b through every layer (forward, + backward if train):
    the model's figure ('time'), the device side alone and the host side alone."""
    out = {"time": 0.0, "device": 0.0, "host": 0.0}
    for layer in layers:
        s = split(layer, dev, b)
        out["time"] += s.forward + (s.backward if train else 0.0)
        out["device"] += s.device_fwd + (s.device_bwd if train else 0.0)
        out["host"] += s.host_fwd + (s.host_bwd if train else 0.0)
    return out
