"""Ulysses sequence parallelism: the plan's sequence groups as process groups, and the
differentiable all-to-all a model's attention calls.

A plan with `parallelism.sequence` (docs/plans.md) runs `degree` processes for each of its
pp x dp ranks: process w belongs to sequence group w // degree (the plan's
`rank_map.sequence_groups[w // degree]`, contiguous ranks), holds the tokens of share
w % degree of every sample and runs the ops of the group's first rank. The groups are made
by PyTorch's DeviceMesh (`init_device_mesh` over (dp, pp, sp), whose "sp" dimension is
exactly these contiguous groups) and checked against the plan's lists.

The model (docs/torch.md, "Sequence parallelism") gets a `Context` through its
`set_sequence_parallel`: `all_to_all(x, scatter_dim, gather_dim)` splits x into `degree`
chunks along `scatter_dim`, sends chunk j to the group's process j and concatenates what it
receives along `gather_dim` in the senders' order: with scatter = heads and gather = tokens it
turns sequence-sharded q, k and v into head-sharded ones over the whole sequence, and back
with the two swapped (DeepSpeed-Ulysses, Jacobs et al., arXiv 2309.14509, section 3.1). Its
backward is the inverse all-to-all of the gradient. The exchange is one
`torch.distributed.all_to_all_single` per call (gloo runs it on the CPU from PyTorch 2.x,
NCCL on CUDA).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


class _AllToAll(torch.autograd.Function):
    """all_to_all_single over `group` on a [degree, ...] tensor: row j goes to process j, row
    i of the result came from process i. The gradient takes the same way back."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.contiguous(), group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        out = torch.empty_like(grad)
        dist.all_to_all_single(out, grad.contiguous(), group=ctx.group)
        return out, None


class Context:
    """This process's place in its sequence group (what a model's attention needs)."""

    def __init__(self, group: Any, index: int, degree: int) -> None:
        self.group, self.index, self.degree = group, index, degree

    def all_to_all(self, x: torch.Tensor, scatter_dim: int, gather_dim: int) -> torch.Tensor:
        """x split in `degree` chunks along scatter_dim, chunk j to process j; the chunks
        received, concatenated along gather_dim in the senders' order (module docstring)."""
        if x.shape[scatter_dim] % self.degree:
            raise ValueError(f"all_to_all: dimension {scatter_dim} of {tuple(x.shape)} does "
                             f"not split into {self.degree}")
        rows = torch.stack(x.chunk(self.degree, dim=scatter_dim))
        received = _AllToAll.apply(rows, self.group)
        return torch.cat(received.unbind(0), dim=gather_dim)


class ShapeContext(Context):
    """Share 0 of `degree`, without a group, for a dry run that only sizes tensors (the
    messages between pipeline stages, comm.Shapes): all_to_all gives the shape the real one
    gives, filled with this process's own chunk."""

    def __init__(self, degree: int) -> None:
        super().__init__(None, 0, degree)

    def all_to_all(self, x: torch.Tensor, scatter_dim: int, gather_dim: int) -> torch.Tensor:
        first = x.chunk(self.degree, dim=scatter_dim)[0]
        return torch.cat([first] * self.degree, dim=gather_dim)


def make_groups(dp: int, pp: int, degree: int, device_type: str,
                plan_groups: tuple[tuple[int, ...], ...], rank: int) -> Any:
    """This process's sequence group, from a DeviceMesh over (dp, pp, sp); ValueError when
    the mesh's "sp" groups are not the plan's `rank_map.sequence_groups` (collective: every
    process calls it)."""
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh(device_type, (dp, pp, degree), mesh_dim_names=("dp", "pp", "sp"))
    group = mesh.get_group("sp")
    ranks = tuple(dist.get_process_group_ranks(group))
    mine = plan_groups[rank // degree]
    if ranks != tuple(mine):
        raise ValueError(f"rank {rank}: the device mesh's sequence group is {list(ranks)}, the "
                         f"plan's $.rank_map.sequence_groups[{rank // degree}] {list(mine)}")
    return group


def check_model(model: Any, ulysses: int, degree: int, spec: str) -> None:
    """The model can run Ulysses `ulysses` over `degree` processes: it has the protocol's
    methods and each block's stated heads and tokens split (ValueError naming the block)."""
    for attr in ("set_sequence_parallel", "shard_batch"):
        if not callable(getattr(model, attr, None)):
            raise ValueError(f"--model {spec}: {type(model).__name__} has no {attr}(): it does "
                             f"not run sequence parallelism (docs/torch.md)")
    shapes = getattr(model, "block_sequence", None) or []
    for name, shape in zip(model.block_names, shapes):
        if shape is None:
            continue
        if shape["heads"] and shape["heads"] % ulysses:
            raise ValueError(f"--model {spec}: Ulysses degree {ulysses} does not divide the "
                             f"{shape['heads']} heads of block {name!r}")
        if shape["tokens"] % degree:
            raise ValueError(f"--model {spec}: sequence degree {degree} does not divide the "
                             f"{shape['tokens']} tokens of block {name!r}")
    try:  # the model's own check (what its attention will split), then back to one process
        model.set_sequence_parallel(ShapeContext(degree))
    except ValueError as e:
        raise ValueError(f"--model {spec}: {e}") from None
    finally:
        model.set_sequence_parallel(None)
