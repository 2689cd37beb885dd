"""`FILE.py:FUNCTION` -> a model the profiler and the runtime can run.

The function is called as `FUNCTION(seed=..., dtype=...)` and returns either

- a block-list model (`blocks`, `block_names`, `skips`, `carried`, ...; docs/torch.md), used
  as it is, or
- an ordinary `nn.Module`, split into layers by the torch.fx front end (fx_split.py). The
  training glue comes from `make_batch(n, seed, dtype=None, device="cpu")` (a dict holding
  the forward's arguments by name, and the targets) and `loss_sum(out, batch)` (the sum over
  samples of each sample's loss), methods of the module or functions in FILE.py.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from . import blocklist, fx_split


class ModelError(TypeError):
    pass


def load(spec: str, seed: int = 0, dtype: torch.dtype | None = None) -> Any:
    module, factory = blocklist.load_module(spec)
    kwargs = {"seed": seed} if dtype is None else {"seed": seed, "dtype": dtype}
    model = factory(**kwargs)
    if blocklist.is_block_list(model):
        blocklist.check_protocol(model)
        return model
    if not isinstance(model, nn.Module):
        raise ModelError(f"{spec} returned a {type(model).__name__}, not an nn.Module")
    glue = {}
    for name in ("make_batch", "loss_sum"):
        glue[name] = getattr(model, name, None) or getattr(module, name, None)
        if glue[name] is None:
            raise ModelError(f"{spec}: {type(model).__name__} is not a block-list model, and "
                             f"neither it nor {spec.rpartition(':')[0]} defines {name}() "
                             f"(the fx front end needs make_batch and loss_sum)")
    try:
        return fx_split.split(model, glue["make_batch"], glue["loss_sum"])
    except fx_split.SplitError as e:
        raise ModelError(f"{spec}: {e}") from None
