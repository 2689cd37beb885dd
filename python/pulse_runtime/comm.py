"""Point-to-point messages between pipeline ranks, with byte accounting.

Receives are posted at the start of an iteration for every tensor this rank will get, in
the sender's execution order; sends are non-blocking (isend) and their handles are kept
until the end of the iteration. So no rank ever blocks in a send, a receive only waits for
data the plan's order guarantees will be produced, and the plan's per-device order cannot
deadlock. Each tensor is its own message (the planner charges latency per tensor).
"""

from __future__ import annotations

import collections
import contextlib
import time
from typing import TYPE_CHECKING, Any, ContextManager, Callable

import torch
import torch.distributed as dist

from . import frozen

if TYPE_CHECKING:
    from .plan import Message, Plan, StoreKey


class Shapes:
    """Shapes and dtypes of every value that can cross a boundary, at one microbatch size,
    from a no-grad dry run of the model on a one-sample batch.

    Under mixed precision (`comm_dtype` set) the dry run runs in `autocast()` as the stages
    will, and every floating-point value crosses in `comm_dtype`, as the runtime sends it.
    Under sequence parallelism (`sequence`: (ulysses, ring), not (1, 1)) it runs on one
    process's share of the tokens (the model's shard_batch, attention under
    sequence.ShapeContext)."""

    def __init__(self, model: Any, microbatch_size: int, device: Any,
                 comm_dtype: torch.dtype | None = None,
                 autocast: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
                 sequence: tuple[int, int] = (1, 1),
                 sample_shape: dict[str, int] | None = None) -> None:
        self.comm_dtype = comm_dtype
        # A model with frozen parts: its stages read the encoded fields (frozen.py)
        # At a bucket's shape (`sample_shape`: make_batch's keywords, buckets.py) when given.
        batch = frozen.encode(model, model.make_batch(1, seed=0, device=device,
                                                      **(sample_shape or {})))
        degree = sequence[0] * sequence[1]
        if degree > 1:
            from .sequence import ShapeContext
            batch = model.shard_batch(batch, 0, degree)
            model.set_sequence_parallel(ShapeContext(*sequence))
        try:
            self._dry_run(model, batch, autocast)
        finally:
            if degree > 1:
                model.set_sequence_parallel(None)
        self.b = microbatch_size

    def _dry_run(self, model: Any, batch: dict[str, Any],
                 autocast: Callable[[], ContextManager[Any]]) -> None:
        env, h = dict(batch), model.first_input(batch)
        producers = {}
        for s in model.skips:
            producers.setdefault(s["producer"], []).append(s["name"])
        self.table = {}
        for c in model.carried:  # carried tensors that come with the batch
            if c["producer"] is None:
                self.table[("carried", c["name"])] = (batch[c["name"]].shape,
                                                      batch[c["name"]].dtype)
        with torch.no_grad(), autocast():
            for i, (name, block) in enumerate(zip(model.block_names, model.blocks)):
                h, produced = block(h, env)
                env.update(produced)
                self.table[("main_after_block", i)] = (h.shape, h.dtype)
                for k, v in produced.items():
                    self.table[("carried", k)] = (v.shape, v.dtype)
                for skip in producers.get(name, ()):
                    env[skip] = h
                    self.table[("skip", skip)] = (h.shape, h.dtype)
        if self.comm_dtype is not None:
            self.table = {k: (shape, self.comm_dtype if dtype.is_floating_point else dtype)
                          for k, (shape, dtype) in self.table.items()}

    def _bytes(self, key: tuple[str, Any]) -> int:
        shape, dtype = self.table[key]
        n = 1
        for d in shape:
            n *= d
        return n * torch.empty((), dtype=dtype).element_size()

    def skip_bytes(self, name: str) -> int:
        """Bytes per sample (the dry run's batch has one sample)."""
        return self._bytes(("skip", name))

    def carried_bytes(self, name: str) -> int:
        return self._bytes(("carried", name))

    def main_bytes(self, block: int) -> int:
        return self._bytes(("main_after_block", block))

    def of(self, key: StoreKey, stage_last_block: list[int]
           ) -> tuple[tuple[int, ...], torch.dtype]:
        kind, name = key
        shape, dtype = self.table[("main_after_block", stage_last_block[name])
                                  if kind == "main" else key]
        return (self.b,) + tuple(shape[1:]), dtype


class Comm:
    def __init__(self, plan: Plan, device: int, pipeline_ranks: tuple[int, ...], shapes: Shapes,
                 torch_device: torch.device) -> None:
        self.plan, self.device, self.ranks = plan, device, pipeline_ranks
        self.shapes, self.torch_device = shapes, torch_device
        self.stage_last = [last for _, last in plan.stage_range]
        self.bytes = collections.Counter()       # byte kind -> bytes sent
        self.messages_sent = 0
        self.wait_s = 0.0                         # time spent blocked in receives
        self.send_s = 0.0                         # time spent posting sends
        self._sends, self._recvs = [], {}
        self._outgoing = {d: self._numbered(device, d) for d in range(plan.pp) if d != device}
        self._incoming = {d: self._numbered(d, device) for d in range(plan.pp) if d != device}

    def _numbered(self, src: int, dst: int) -> dict[tuple[int, int, int], int]:
        """(message id, mb, item index) -> tag, numbering src's tensors to dst in order."""
        tags, n = {}, 0
        for msg, mb in self.plan.send_sequence(src, dst):
            for k in range(len(msg.items)):
                tags[(msg.id, mb, k)] = n
                n += 1
        return tags

    def start_iteration(self) -> None:
        """Post every receive of the iteration (buffers sized from the dry run)."""
        self._recvs = {}
        for src, tags in self._incoming.items():
            for (msg_id, mb, k), tag in sorted(tags.items(), key=lambda kv: kv[1]):
                msg = self.plan.messages[msg_id]
                shape, dtype = self.shapes.of(msg.items[k].key, self.stage_last)
                buf = torch.empty(shape, dtype=dtype, device=self.torch_device)
                work = dist.irecv(buf, src=self.ranks[src], tag=tag)
                self._recvs[(msg_id, mb, k)] = (work, buf)

    def receive(self, msg: Message, mb: int) -> list[torch.Tensor]:
        """Wait for the tensors of one message; returns them in item order."""
        out = []
        start = time.perf_counter()
        for k in range(len(msg.items)):
            work, buf = self._recvs.pop((msg.id, mb, k))
            work.wait()
            out.append(buf)
        self.wait_s += time.perf_counter() - start
        return out

    def send(self, msg: Message, mb: int, tensors: list[torch.Tensor]) -> None:
        start = time.perf_counter()
        tags = self._outgoing[msg.dst]
        for k, (item, t) in enumerate(zip(msg.items, tensors)):
            t = t.detach().contiguous()
            work = dist.isend(t, dst=self.ranks[msg.dst], tag=tags[(msg.id, mb, k)])
            self._sends.append((work, t))  # t stays referenced until the send completes
            self.bytes[item.byte_kind] += t.numel() * t.element_size()
            self.messages_sent += 1
        self.send_s += time.perf_counter() - start

    def finish_iteration(self) -> None:
        if self._recvs:
            raise RuntimeError(f"{len(self._recvs)} posted receives were never consumed")
        for work, _ in self._sends:
            work.wait()
        self._sends = []
