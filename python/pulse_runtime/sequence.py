"""Sequence parallelism: the plan's sequence groups as process groups, and the attention a
model runs over a sequence split across them (Ulysses, ring attention, or both).

A plan with `parallelism.sequence` (docs/plans.md) runs `degree` = ulysses x ring processes
for each of its pp x dp ranks: process w belongs to sequence group w // degree (the plan's
`rank_map.sequence_groups[w // degree]`, contiguous ranks), is share p = w % degree of it,
holds the p-th contiguous slice of the tokens of every sample and runs the ops of the
group's first rank. Inside a group, share p = ring index x ulysses + Ulysses index: the
Ulysses groups are contiguous and ring peers `ulysses` apart, as the planner lays them out.
The groups are made by PyTorch's DeviceMesh (`init_device_mesh` over (dp, pp, ring,
ulysses)) and checked against that layout.

The model (docs/torch.md, "Sequence parallelism") gets a `Context` through its
`set_sequence_parallel` and calls `attention(q, k, v)` on its share's q, k and v
([batch, tokens / degree, heads, head_dim]):

1. Ulysses (DeepSpeed-Ulysses, Jacobs et al., arXiv 2309.14509, section 3.1): an all-to-all
   over the Ulysses group turns the sequence-sharded q, k and v into head-sharded ones
   (scatter heads, gather tokens): the ring index's tokens, heads / ulysses heads;
2. ring attention (Liu et al., arXiv 2310.01889): the keys and values go around the ring,
   ring - 1 steps, each step's block attended with its log-sum-exp and the blocks merged
   exactly (softmax over all keys, as blockwise/flash attention merges its tiles); without a
   ring, plain scaled dot-product attention;
3. an all-to-all back (scatter tokens, gather heads).

Both exchanges are PyTorch's own collectives inside small autograd Functions:
`all_to_all_single` (its backward the same exchange of the gradient) and
`batch_isend_irecv` to the next and from the previous ring peer (backward: the gradient the
other way round); gloo runs both on the CPU (PyTorch 2.13), NCCL on CUDA. Every step of the
ring is kept for autograd (no recomputation, no overlap with compute): correct, not fast.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F


class _AllToAll(torch.autograd.Function):
    """all_to_all_single over `group` on a [ulysses, ...] tensor: row j goes to process j,
    row i of the result came from process i. The gradient takes the same way back."""

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


def _shift(x: torch.Tensor, to: int, come: int, group: Any) -> torch.Tensor:
    """x sent to global rank `to`, what global rank `come` sends received (one exchange)."""
    out = torch.empty_like(x)
    ops = [dist.P2POp(dist.isend, x.contiguous(), to, group),
           dist.P2POp(dist.irecv, out, come, group)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    return out


class _RingShift(torch.autograd.Function):
    """One step around the ring: to the next peer, from the previous; the gradient goes to
    the previous and comes from the next."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, nxt: int, prev: int, group: Any) -> torch.Tensor:
        ctx.peers = (nxt, prev, group)
        return _shift(x, nxt, prev, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        nxt, prev, group = ctx.peers
        return _shift(grad, prev, nxt, group), None, None, None


def _block(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of q over one block of keys ([n, heads, tokens, d]): (output, log-sum-exp)."""
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    return torch.exp(scores - lse) @ v, lse


class Context:
    """This process's place in its sequence group, and the attention over it."""

    def __init__(self, index: int, ulysses: int, ring: int, ulysses_group: Any = None,
                 ring_group: Any = None, ring_peers: tuple[int, int] = (0, 0)) -> None:
        self.index, self.ulysses, self.ring = index, ulysses, ring
        self.degree = ulysses * ring
        self.ulysses_group, self.ring_group = ulysses_group, ring_group
        self.ring_next, self.ring_prev = ring_peers

    def all_to_all(self, x: torch.Tensor, scatter_dim: int, gather_dim: int) -> torch.Tensor:
        """x split in `ulysses` chunks along scatter_dim, chunk j to the Ulysses group's
        process j; the chunks received, concatenated along gather_dim in the senders'
        order."""
        if x.shape[scatter_dim] % self.ulysses:
            raise ValueError(f"all_to_all: dimension {scatter_dim} of {tuple(x.shape)} does "
                             f"not split into {self.ulysses}")
        rows = torch.stack(x.chunk(self.ulysses, dim=scatter_dim))
        received = _AllToAll.apply(rows, self.ulysses_group)
        return torch.cat(received.unbind(0), dim=gather_dim)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Softmax attention of this share's queries over every token of the sample
        ([n, tokens / degree, heads, d] in and out; the module docstring's three steps)."""
        if self.ulysses > 1:  # [n, tokens / degree, heads, d] -> [n, tokens / ring, heads / u, d]
            q, k, v = (self.all_to_all(t, scatter_dim=2, gather_dim=1) for t in (q, k, v))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        out = self.ring_attention(q, k, v) if self.ring > 1 else \
            F.scaled_dot_product_attention(q, k, v)
        out = out.transpose(1, 2)
        if self.ulysses > 1:  # and back
            out = self.all_to_all(out, scatter_dim=1, gather_dim=2)
        return out

    def ring_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
                       ) -> torch.Tensor:
        """q over its own keys and values and those of ring - 1 peers, passed around the
        ring; the blocks merged by their log-sum-exps ([n, heads, tokens, d])."""
        kv = torch.stack([k, v])
        outs, lses = [], []
        for step in range(self.ring):
            if step:
                kv = _RingShift.apply(kv, self.ring_next, self.ring_prev, self.ring_group)
            out, lse = _block(q, kv[0], kv[1])
            outs.append(out)
            lses.append(lse)
        total = torch.logsumexp(torch.stack(lses), dim=0)
        return sum(torch.exp(lse - total) * out for lse, out in zip(lses, outs))


class ShapeContext(Context):
    """Share 0, without groups, for a dry run that only sizes tensors (the messages between
    pipeline stages, comm.Shapes): attention over the share's own tokens, the real one's
    shape."""

    def __init__(self, ulysses: int, ring: int) -> None:
        super().__init__(0, ulysses, ring)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2)


def make_context(dp: int, pp: int, ulysses: int, ring: int, device_type: str,
                 plan_groups: tuple[tuple[int, ...], ...], rank: int) -> Context:
    """This process's context, its groups from a DeviceMesh over (dp, pp, ring, ulysses);
    ValueError when they are not the plan's layout (collective: every process calls it)."""
    from torch.distributed.device_mesh import init_device_mesh
    degree = ulysses * ring
    mesh = init_device_mesh(device_type, (dp, pp, ring, ulysses),
                            mesh_dim_names=("dp", "pp", "ring", "ulysses"))
    group = tuple(plan_groups[rank // degree])
    first, share = rank - rank % degree, rank % degree
    at_ring, at_ulysses = divmod(share, ulysses)
    want = {"ulysses": [first + at_ring * ulysses + j for j in range(ulysses)],
            "ring": [first + i * ulysses + at_ulysses for i in range(ring)]}
    if group != tuple(range(first, first + degree)):
        raise ValueError(f"rank {rank}: the plan's $.rank_map.sequence_groups"
                         f"[{rank // degree}] is {list(group)}, expected the {degree} ranks "
                         f"from {first}")
    groups = {}
    for dim, ranks in want.items():
        groups[dim] = mesh.get_group(dim)
        got = dist.get_process_group_ranks(groups[dim])
        if got != ranks:
            raise ValueError(f"rank {rank}: the device mesh's {dim} group is {got}, the "
                             f"plan's layout (Ulysses groups contiguous, ring peers "
                             f"{ulysses} apart) gives {ranks}")
    ring_ranks = want["ring"]
    peers = (ring_ranks[(at_ring + 1) % ring], ring_ranks[(at_ring - 1) % ring])
    return Context(share, ulysses, ring, groups["ulysses"], groups["ring"], peers)


def check_model(model: Any, ulysses: int, ring: int, spec: str) -> None:
    """The model can run the layout: it has the protocol's methods and each block's stated
    heads and tokens split (ValueError naming the block)."""
    degree = ulysses * ring
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
        model.set_sequence_parallel(ShapeContext(ulysses, ring))
    except ValueError as e:
        raise ValueError(f"--model {spec}: {e}") from None
    finally:
        model.set_sequence_parallel(None)
