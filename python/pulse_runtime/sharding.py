"""Sharded data parallelism, executed by PyTorch's own code, per pipeline stage over the
stage's data-parallel group (the plan's `chosen.memory.zero_stage`; v1: `options.memory.zero_stage`):

- ZeRO-1: `torch.distributed.optim.ZeroRedundancyOptimizer` (optim.py): every replica holds
  the whole stage and its gradients (all-reduced), and the optimizer state of its share of
  the parameters; after its step it broadcasts that share.
- ZeRO-2: FSDP's `fully_shard` with `reshard_after_forward=False`: gradients and optimizer
  state sharded; the weights, gathered for the first forward, stay whole until the
  iteration's gradients are reduce-scattered.
- ZeRO-3: `fully_shard` with `reshard_after_forward=True`: the weights too; each block's are
  gathered for its forward, freed after it, and gathered again for its backward.

Each block of a stage is its own `fully_shard` unit (gathered one at a time, as the planner's
memory rule assumes: include/pulse/cost/memory.hpp), and the stage module is the root. A
pipeline runs several microbatches through a stage before its gradients are final, so FSDP is
driven as PyTorch's pipelining runtime drives it (pytorch/pytorch
torch/distributed/pipelining/stage.py, `backward_maybe_with_nosync` and
`perform_reduce_grad`, read in the 2.13.0 wheel): every backward op runs without gradient
synchronisation and without resharding (so a split backward's W finds the weights its I used),
and after the iteration's last op every stage reduce-scatters its accumulated gradients once
and reshards (`reduce_gradients`). Losses are divided by the global batch already, so the
reduction sums (gradient divide factor 1).

Mixed precision under FSDP: `MixedPrecisionPolicy(param_dtype=<the compute dtype>,
reduce_dtype=float32)`: fp32 sharded master weights, weights gathered in bf16/fp16, gradients
reduced in fp32 (autocast stays on, as without FSDP).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import torch
from torch import nn

from .precision import Precision

MIN_TORCH = (2, 6)


class ShardingError(ValueError):
    """A ZeRO stage this PyTorch cannot execute (exit 2, naming the mode)."""


def torch_version() -> tuple[int, int]:
    """(major, minor) of the installed PyTorch ("2.13.0+cpu" -> (2, 13))."""
    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def require_fully_shard(zero_stage: int) -> Any:
    """torch.distributed.fsdp (fully_shard, MixedPrecisionPolicy), or ShardingError naming
    the mode and this PyTorch."""
    try:
        if torch_version() < MIN_TORCH:
            raise ImportError(f"it needs {MIN_TORCH[0]}.{MIN_TORCH[1]} or later")
        from torch.distributed import fsdp
        getattr(fsdp, "fully_shard")
        getattr(fsdp, "MixedPrecisionPolicy")
    except (ImportError, AttributeError) as e:
        raise ShardingError(f"ZeRO-{zero_stage} (chosen.memory.zero_stage {zero_stage}) runs on "
                            f"torch.distributed.fsdp.fully_shard, which PyTorch "
                            f"{torch.__version__} lacks ({e})") from None
    return fsdp


def mesh_of(group: Any, device_type: str) -> Any:
    """A one-dimensional DeviceMesh over a data-parallel process group."""
    from torch.distributed.device_mesh import DeviceMesh
    return DeviceMesh.from_group(group, device_type)


def mp_policy(fsdp: Any, precision: Precision) -> Any:
    if precision.compute_dtype is None:
        return fsdp.MixedPrecisionPolicy()
    return fsdp.MixedPrecisionPolicy(param_dtype=precision.compute_dtype,
                                     reduce_dtype=torch.float32)


def shard_stage(module: nn.Module, blocks: Iterable[nn.Module], mesh: Any, zero_stage: int,
                precision: Precision) -> None:
    """`fully_shard` every block of the stage with parameters, then the stage module (the
    root), for ZeRO `zero_stage` (2 or 3)."""
    fsdp = require_fully_shard(zero_stage)
    options = {"mesh": mesh, "reshard_after_forward": zero_stage >= 3,
               "mp_policy": mp_policy(fsdp, precision)}
    for block in blocks:
        if any(True for _ in block.parameters()):
            fsdp.fully_shard(block, **options)
    fsdp.fully_shard(module, **options)
    for unit in module.modules():  # each unit's own parameter group
        if isinstance(unit, fsdp.FSDPModule):
            unit.set_gradient_divide_factor(1.0)


def is_sharded(module: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule
    return isinstance(module, FSDPModule)


def before_backward(module: nn.Module) -> None:
    """Before each backward op of a sharded stage: accumulate, keep the weights gathered
    (stage.py `backward_maybe_with_nosync`)."""
    module.set_is_last_backward(False)
    module.set_reshard_after_backward(False)
    module.set_requires_gradient_sync(False)


def reduce_gradients(module: nn.Module) -> None:
    """After a sharded stage's last backward op of the iteration: reduce-scatter the
    accumulated gradients and reshard (stage.py `perform_reduce_grad`)."""
    from torch.distributed.fsdp import fully_shard
    module.set_is_last_backward(True)
    module.set_reshard_after_backward(True)
    module.set_requires_gradient_sync(True)
    state = fully_shard.state(module)
    for inner in state._state_ctx.all_states:
        for group in inner._fsdp_param_groups:
            group.post_backward()
    state._root_post_backward_final_callback()


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of a tensor: the local shard of a DTensor, else the tensor."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor (a DTensor is gathered: collective over its mesh)."""
    full_tensor = getattr(t, "full_tensor", None)
    return full_tensor() if callable(full_tensor) else t


def storage_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes of the storages behind `tensors` (DTensors: their local shards), each storage
    counted once: what this rank holds for them."""
    seen: set[int] = set()
    total = 0
    for t in tensors:
        if t is None:
            continue
        storage = local(t).untyped_storage()
        if storage.data_ptr() in seen or storage.nbytes() == 0:
            continue
        seen.add(storage.data_ptr())
        total += storage.nbytes()
    return total


def optimizer_tensors(optimizer: Any) -> list[torch.Tensor]:
    """Every tensor of a torch optimizer's state (Adam's moments and step counts, SGD's
    momentum buffers)."""
    return [t for state in optimizer.state.values() for t in state.values()
            if isinstance(t, torch.Tensor)]
