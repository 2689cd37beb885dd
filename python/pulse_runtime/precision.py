"""Numeric precision of a run, under the names the planner uses (`plan --precision`, the plan's
`options.memory.precision`, include/pulse/cost/memory.hpp) and pulse-profile measures:

| name | weights, gradients, optimizer state | compute | values between stages |
|---|---|---|---|
| `fp32`, `fp64` | that dtype | that dtype | that dtype |
| `bf16` (pure bf16) | bfloat16 (Adam's moments too) | bfloat16 | bfloat16 |
| `mixed` (alias `bf16-mixed`) | float32 (the master weights) | `torch.autocast` to bfloat16 | bfloat16 |
| `fp16-mixed` | float32 | autocast to float16, dynamic loss scaling | float16 |

The old `--dtype` spellings stay: float32 = fp32, float64 = fp64, bfloat16 = mixed (what
`--dtype bfloat16` always ran), float16 = fp16-mixed. Under FSDP (ZeRO-2/3, sharding.py) the
mixed regimes also gather their weights in the low precision (`MixedPrecisionPolicy`).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, ContextManager

import torch

# The names and their aliases live in options.py (the command lines check them before
# PyTorch is imported); canonical() gives the name an alias stands for.
from .options import (ALIASES, DEFAULT_PLAN_PRECISION, DTYPES, NAMES,  # noqa: F401
                      PRECISIONS, canonical)


@dataclass(frozen=True)
class Precision:
    name: str                          # one of PRECISIONS
    param_dtype: torch.dtype           # parameters, gradients, optimizer state
    compute_dtype: torch.dtype | None  # autocast's dtype; None: no autocast
    device_type: str                   # "cpu" or "cuda"

    @property
    def mixed(self) -> bool:
        return self.compute_dtype is not None

    @property
    def comm_dtype(self) -> torch.dtype | None:
        """The dtype of floating-point values crossing stages (None: as computed)."""
        return self.compute_dtype

    @property
    def loss_scaling(self) -> bool:
        return self.compute_dtype == torch.float16

    def autocast(self) -> ContextManager[Any]:
        if self.compute_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.compute_dtype)


def autocast_works(device_type: str, dtype: torch.dtype) -> bool:
    """Whether this PyTorch autocasts a matrix product to `dtype` on `device_type` (an
    autocast that does not know a dtype disables itself with a warning)."""
    device = "cuda" if device_type == "cuda" else "cpu"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.autocast(device_type=device_type, dtype=dtype):
                out = torch.ones(2, 2, device=device) @ torch.ones(2, 2, device=device)
        except RuntimeError:
            return False
    return out.dtype == dtype


def precision(name: str, device_type: str) -> Precision:
    """The Precision called `name` (or an alias) on `device_type`; ValueError (naming what
    would work) when this PyTorch cannot autocast to it there."""
    name = canonical(name)
    param, compute = PRECISIONS[name]
    if compute is None:
        return Precision(name, getattr(torch, param), None, device_type)
    compute_dtype = getattr(torch, compute)
    if not autocast_works(device_type, compute_dtype):
        raise ValueError(f"precision {name}: PyTorch {torch.__version__} cannot autocast to "
                         f"{compute} on {device_type.upper()}")
    return Precision(name, getattr(torch, param), compute_dtype, device_type)
