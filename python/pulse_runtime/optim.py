"""Gradient reduction over a data-parallel group and the optimizer step, with ZeRO-1.

Losses are divided by the global batch, so the sum of the replicas' gradients is the
data-parallel mean: gradients are summed with one all-reduce of the rank's flattened
gradients. Without ZeRO every replica then steps every parameter of its stages.

ZeRO-1 (the plan's `options.memory.zero_stage` 1) shards the optimizer state: the replicas
of one pipeline device hold the same parameters in the same order; flattened, they are cut
into `dp` equal chunks and replica i (its rank in the data-parallel group, which
`new_group` numbers in ascending global-rank order) keeps optimizer state for chunk i only.
It steps that chunk as one flat tensor, then the chunks are all-gathered back into every
replica's parameters. SGD and Adam act element by element, so the sharded step computes the
same values as the unsharded one; each replica holds 1/dp of the state (`state_numel`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.distributed as dist

OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class Config:
    kind: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.0
    zero: bool = False

    def __post_init__(self) -> None:
        if self.kind not in OPTIMIZERS:
            raise ValueError(f"optimizer {self.kind!r}: expected one of {OPTIMIZERS}")

    def make(self, params: Sequence[torch.Tensor]) -> torch.optim.Optimizer:
        if self.kind == "adam":
            return torch.optim.Adam(params, lr=self.lr)
        return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum)


class Optimizer:
    def __init__(self, params: list[torch.Tensor], dp_group: Any, dp_size: int,
                 config: Config) -> None:
        self.params, self.group, self.dp_size = params, dp_group, dp_size
        self.zero = bool(config.zero) and dp_size > 1
        self.numel = sum(p.numel() for p in params)
        if self.zero:
            self.chunk = math.ceil(self.numel / dp_size)
            index = dist.get_rank(dp_group)
            self.lo, self.hi = min(index * self.chunk, self.numel), \
                min((index + 1) * self.chunk, self.numel)
            self.shard = self._flat_params()[self.lo:self.hi].clone().requires_grad_(True)
            self.inner = config.make([self.shard])
        else:
            self.inner = config.make(params)

    def _flat_params(self) -> torch.Tensor:
        if not self.params:
            return torch.zeros(0)
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def reduce_gradients(self) -> None:
        """Every parameter's .grad becomes the sum over the replicas."""
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        if self.group is None or not self.params:
            return
        flat = torch.cat([p.grad.reshape(-1) for p in self.params])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.group)
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p))
            offset += n

    def step(self) -> None:
        if not self.zero:
            self.inner.step()
            return
        flat_grad = torch.cat([p.grad.reshape(-1) for p in self.params])
        self.shard.grad = flat_grad[self.lo:self.hi].clone()
        self.inner.step()
        mine = torch.zeros(self.chunk, dtype=self.shard.dtype, device=self.shard.device)
        mine[:self.hi - self.lo] = self.shard.detach()
        chunks = [torch.empty_like(mine) for _ in range(self.dp_size)]
        dist.all_gather(chunks, mine, group=self.group)
        flat = torch.cat(chunks)[:self.numel]
        offset = 0
        with torch.no_grad():
            for p in self.params:
                n = p.numel()
                p.copy_(flat[offset:offset + n].view_as(p))
                offset += n

    @property
    def state_numel(self) -> int:
        """Elements of optimizer state this rank holds (ZeRO-1: about 1/dp of the rest)."""
        return sum(t.numel() for state in self.inner.state.values() for t in state.values()
                   if isinstance(t, torch.Tensor) and t.dim() > 0)

    def state_dict(self) -> dict[str, Any]:
        return {"zero": self.zero, "inner": self.inner.state_dict(),
                "shard": (self.lo, self.hi) if self.zero else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["zero"] != self.zero or \
                (self.zero and tuple(state["shard"]) != (self.lo, self.hi)):
            raise ValueError("the checkpoint's optimizer state is sharded differently")
        if self.zero:  # the shard is a copy of the parameters, loaded before this
            with torch.no_grad():
                self.shard.copy_(self._flat_params()[self.lo:self.hi])
        self.inner.load_state_dict(state["inner"])


class LossScaler:
    """Dynamic loss scaling for float16 mixed precision (as torch.cuda.amp.GradScaler does,
    written for a pipeline: the overflow check is one all-reduce over every rank, so all
    ranks skip or take the same step).

    The loss is multiplied by `scale` before the backward; after the gradient reduction the
    gradients are divided by it. If any gradient on any rank is inf or NaN, every rank skips
    the step and halves the scale; after `growth_interval` good steps in a row it doubles."""

    def __init__(self, enabled: bool, init_scale: float = 2.0 ** 16,
                 growth_interval: int = 2000) -> None:
        self.enabled = enabled
        self.scale = init_scale if enabled else 1.0
        self.growth_interval = growth_interval
        self.good_steps = 0
        self.skipped = 0

    def unscale_and_check(self, params: Sequence[torch.Tensor]) -> bool:
        """Divides the gradients by the scale; True when the step may be taken (collective
        over the default group when enabled)."""
        if not self.enabled:
            return True
        found = torch.zeros(1, dtype=torch.float32,
                            device=params[0].device if params else "cpu")
        for p in params:
            if p.grad is not None:
                p.grad.div_(self.scale)
                found += (~torch.isfinite(p.grad)).any().float()
        if dist.is_initialized():
            dist.all_reduce(found, op=dist.ReduceOp.MAX)
        ok = found.item() == 0
        self.update(ok)
        return ok

    def update(self, ok: bool) -> None:
        if not ok:
            self.scale /= 2
            self.good_steps = 0
            self.skipped += 1
            return
        self.good_steps += 1
        if self.good_steps >= self.growth_interval:
            self.scale *= 2
            self.good_steps = 0

    def state_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "good_steps": self.good_steps, "skipped": self.skipped}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scale, self.good_steps = state["scale"], state["good_steps"]
        self.skipped = state["skipped"]
