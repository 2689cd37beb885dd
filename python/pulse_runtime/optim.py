"""Gradient reduction over a data-parallel group and the optimizer step, by ZeRO stage.

Losses are divided by the global batch, so the sum of the replicas' gradients is the
data-parallel mean.

- ZeRO-0: one all-reduce of the rank's flattened gradients, then every replica steps every
  parameter of its stages.
- ZeRO-1: the same all-reduce, then PyTorch's `ZeroRedundancyOptimizer`
  (torch.distributed.optim): each replica keeps optimizer state for its share of the
  parameters (whole tensors, balanced by size), steps them and broadcasts them to the others.
- ZeRO-2 and ZeRO-3: the stages are FSDP modules (sharding.py): FSDP reduce-scatters the
  gradients itself, and every replica steps its local shards (the parameters are DTensors).

SGD and Adam act element by element, so every mode computes the parameters of the
unsharded step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.distributed as dist

from . import sharding
from .options import OPTIMIZERS


@dataclass(frozen=True)
class Config:
    kind: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.0
    zero: int = 0         # the ZeRO stage executed (0-3)

    def __post_init__(self) -> None:
        if self.kind not in OPTIMIZERS:
            raise ValueError(f"optimizer {self.kind!r}: expected one of {OPTIMIZERS}")

    @property
    def optimizer_class(self) -> type:
        return torch.optim.Adam if self.kind == "adam" else torch.optim.SGD

    @property
    def options(self) -> dict[str, Any]:
        return {"lr": self.lr} if self.kind == "adam" else {"lr": self.lr,
                                                             "momentum": self.momentum}

    def make(self, params: Sequence[torch.Tensor]) -> torch.optim.Optimizer:
        return self.optimizer_class(params, **self.options)


class Optimizer:
    """The optimizer of one rank's stages. `zero`: the ZeRO stage that runs (0 when there is
    one replica: nothing to shard)."""

    def __init__(self, params: list[torch.Tensor], dp_group: Any, dp_size: int,
                 config: Config) -> None:
        self.params, self.group, self.dp_size = params, dp_group, dp_size
        self.zero = config.zero if dp_size > 1 else 0
        self.numel = sum(p.numel() for p in params)
        if self.zero == 1:
            from torch.distributed.optim import ZeroRedundancyOptimizer
            self.zero_optimizer = ZeroRedundancyOptimizer(
                params, optimizer_class=config.optimizer_class, process_group=dp_group,
                **config.options)
            self.inner = self.zero_optimizer.optim  # this replica's share
        else:
            self.inner = config.make(params)
            self.zero_optimizer = None

    def reduce_gradients(self) -> None:
        """Every parameter's .grad becomes the sum over the replicas (under FSDP it is, and
        holds this replica's shard)."""
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        if self.group is None or not self.params or self.zero >= 2:
            return
        flat = torch.cat([p.grad.reshape(-1) for p in self.params])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.group)
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p))
            offset += n

    def step(self) -> None:
        (self.zero_optimizer or self.inner).step()

    @property
    def state_numel(self) -> int:
        """Elements of optimizer state this rank holds (its share under ZeRO-1, its shards'
        under ZeRO-2/3; step counters left out)."""
        return sum(sharding.local(t).numel() for t in sharding.optimizer_tensors(self.inner)
                   if t.dim() > 0)

    @property
    def state_bytes(self) -> int:
        """Bytes of the optimizer state's storages on this rank (step counters included)."""
        return sharding.storage_bytes(sharding.optimizer_tensors(self.inner))

    def state_dict(self) -> dict[str, Any]:
        return {"zero": self.zero, "inner": self.inner.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["zero"] != self.zero:
            raise ValueError(f"the checkpoint's optimizer state is ZeRO-{state['zero']}, this "
                             f"run's ZeRO-{self.zero}")
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
                grad = sharding.local(p.grad)  # a shard under FSDP: the all-reduce decides
                grad.div_(self.scale)
                found += (~torch.isfinite(grad)).any().float()
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
