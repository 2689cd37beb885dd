"""pulse-profile's measure of a model's frozen components (`model.frozen`, docs/torch.md,
"Frozen encoders"): each module's forward alone, under no_grad, at every profiled microbatch
size, into the profile's `frozen[]` (schema/model.schema.json; docs/frozen.md).

- `forward_s`: the median of the timed forwards per size (the same warm-up and repeats as the
  blocks), nothing else running in the process;
- `params` and `weight_bytes`: counted from the module's parameters in the profiled dtype;
- `output_bytes_per_sample`: the exact bytes of its output per sample;
- `activation_bytes_per_sample`: the largest input plus output of any leaf submodule of one
  forward, per sample (what must be live at once; a lower bound on the allocator's peak).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import torch

from .frozen import encode  # noqa: F401 (profiler.py calls it here)
from .steptimer import Clock


def _bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(_bytes(v) for v in value)
    return 0


def _working_set(module: torch.nn.Module, x: torch.Tensor) -> int:
    """Largest input + output bytes of a leaf submodule in one forward of x."""
    widest = [0]

    def hook(_mod: Any, inputs: Any, output: Any) -> None:
        widest[0] = max(widest[0], _bytes(inputs) + _bytes(output))

    handles = [m.register_forward_hook(hook) for m in module.modules()
               if not list(m.children())]
    try:
        with torch.no_grad():
            module(x)
    finally:
        for h in handles:
            h.remove()
    return widest[0]


def measure(model: Any, sizes: list[int], seed: int, device: torch.device, warmup: int,
            repeats: int, clock: Clock, device_type: str) -> list[dict]:
    """`frozen[]` entries of the model's frozen components, in its order ([] without)."""
    frozen = getattr(model, "frozen", None) or []
    batches = {b: model.make_batch(b, seed=seed + b, device=device) for b in sizes}
    out = []
    for c in frozen:
        module = c["module"]
        times: dict[int, list[float]] = {b: [] for b in sizes}
        for k in range(max(warmup, 1) + repeats):
            for b in sizes:
                x = batches[b][c["input"]]
                with torch.no_grad():
                    start = clock.stamp()
                    module(x)
                    end = clock.stamp()
                clock.sync()
                if k >= max(warmup, 1):
                    times[b].append(clock.seconds(start, end))
        with torch.no_grad():
            output = module(batches[sizes[0]][c["input"]])
        params = list(module.parameters())
        out.append({
            "name": c["name"], "kind": c["kind"],
            "params": sum(p.numel() for p in params),
            "weight_bytes": sum(p.numel() * p.element_size() for p in params),
            "forward_s": {device_type: [float(f"{statistics.median(times[b]):.6g}")
                                        for b in sizes]},
            "activation_bytes_per_sample": max(
                math.ceil(_working_set(module, batches[b][c["input"]]) / b) for b in sizes),
            "output_bytes_per_sample": _bytes(output) // sizes[0],
            "source": f"measured by pulse-profile: {type(module).__name__} forward under "
                      f"no_grad, median of {repeats} runs per size",
        })
    return out
