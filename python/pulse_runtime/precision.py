"""Numeric precision of a run: plain (float32, float64) or mixed (bfloat16, float16).

Mixed precision is what the planner assumes trainers do: parameters, gradients and optimizer
state stay float32 (the master weights), the stages' forward runs under `torch.autocast` in
the low-precision dtype, every floating-point value that crosses a stage boundary is sent in
that dtype, and float16 adds dynamic loss scaling (optim.LossScaler).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, ContextManager

import torch

PLAIN = ("float32", "float64")
MIXED = ("bfloat16", "float16")
DTYPES = PLAIN + MIXED


@dataclass(frozen=True)
class Precision:
    name: str                          # one of DTYPES
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
    """Whether this PyTorch autocasts a matrix product to `dtype` on `device_type` (PyTorch
    1.13's CPU autocast knows only bfloat16, and silently disables itself otherwise)."""
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
    """The Precision called `name` on `device_type`; ValueError (naming what would work)
    when this PyTorch cannot autocast to it there."""
    if name not in DTYPES:
        raise ValueError(f"--dtype {name}: expected one of {list(DTYPES)}")
    if name in PLAIN:
        return Precision(name, getattr(torch, name), None, device_type)
    compute = getattr(torch, name)
    if not autocast_works(device_type, compute):
        raise ValueError(f"--dtype {name}: PyTorch {torch.__version__} cannot autocast to "
                         f"{name} on {device_type.upper()} (CPU autocast in PyTorch 1.13 knows "
                         f"only bfloat16; float16 needs CUDA or a newer PyTorch)")
    return Precision(name, torch.float32, compute, device_type)
