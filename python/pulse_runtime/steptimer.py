"""Timing one training step of a block-list model block by block, without synchronising
the host inside the step (pulse-profile's measurement, profiler.py; the GPU check,
scripts/gpu_check.py).

A plain step runs every block's forward in one autograd graph, the loss, and one backward.
A stamped step is the same step with a time stamp after each block's forward and one from a
gradient hook on each block's outputs, which fires when their gradients are complete, just
before the backward of the op that made them: with PyTorch's autograd running the ready
backward ops newest first, that is where the block's backward starts. The time between two
stamps belongs to the block that ran then, so the blocks add up to the stamped step.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, ContextManager, Optional

import torch

from . import blocklist

Batch = dict  # the model's batch: field name -> tensor
Row = dict    # one block: bytes, and later its times


def storage_key(t: torch.Tensor) -> tuple[int, int]:
    # untyped_storage() exists from PyTorch 2.0; 1.13 has storage() with the same data_ptr.
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.data_ptr(), storage.nbytes()


class Clock:
    """Time stamps on the timeline the step runs on: CUDA events on the current stream (the
    GPU's timeline; recording one does not wait for the GPU), else the host's wall clock
    (CPU ops run synchronously), or with ``kind`` "thread" this thread's CPU time (blind to
    time the thread is descheduled: steadier on a shared machine; with one torch thread the
    whole step runs on it, autograd's CPU backward included)."""

    def __init__(self, device: torch.device, kind: str = "auto") -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self.now = time.thread_time if kind == "thread" else time.perf_counter

    def stamp(self) -> Any:
        if not self.cuda:
            return self.now()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def seconds(self, start: Any, end: Any) -> float:
        """Elapsed time between two stamps (after sync() on CUDA)."""
        return start.elapsed_time(end) / 1e3 if self.cuda else end - start


def forward_blocks(model: Any, batch: Batch,
                   after_block: Optional[Callable[[int, torch.Tensor, dict], None]] = None,
                   around_block: Optional[Callable[[int], ContextManager]] = None
                   ) -> torch.Tensor:
    """All blocks in order in one autograd graph, as a one-device training step runs them;
    ``after_block(i, h, produced)`` sees each block's outputs, ``around_block(i)`` is a
    context entered around block i."""
    env = dict(batch)
    h = model.first_input(batch)
    pushes: dict[str, list[str]] = {}
    for s in model.skips:
        pushes.setdefault(s["producer"], []).append(s["name"])
    for i, (name, block) in enumerate(zip(model.block_names, model.blocks)):
        if around_block is None:
            h, produced = block(h, env)
        else:
            with around_block(i):
                h, produced = block(h, env)
        env.update(produced)
        for skip in pushes.get(name, ()):
            env[skip] = h  # the skip tensor is the producer's output
        if after_block is not None:
            after_block(i, h, produced)
    return h


def plain_step(model: Any, batch: Batch, size: int) -> None:
    """One training step of one microbatch: forward, loss, backward (parameter gradients
    accumulate). No host synchronisation: nothing reads a value back."""
    loss = model.loss_sum(forward_blocks(model, batch), batch) / size
    loss.backward()


def time_plain_step(model: Any, batch: Batch, size: int, clock: Clock) -> float:
    """Seconds of one plain step, from the host's first launch to the GPU's last kernel."""
    clock.sync()
    start = clock.stamp()
    plain_step(model, batch, size)
    end = clock.stamp()
    clock.sync()
    return clock.seconds(start, end)


def attributed_step(model: Any, batch: Batch, size: int,
                    clock: Clock) -> tuple[list[float], list[float]]:
    """One step with a stamp after each block's forward and at the start of each block's
    backward (a hook on its outputs fires when their gradients are complete, before the
    producing op's backward runs). Returns per-block (forward, backward) seconds; their sum
    is the stamped step. The loss and its backward count to the last block."""
    n = len(model.blocks)
    fwd_stamps: list[Any] = []
    marks: list[tuple[int, Any]] = []  # (block, stamp) in the order the hooks fire

    def mark(i: int, grad: torch.Tensor) -> None:
        marks.append((i, clock.stamp()))

    def after_block(i: int, h: torch.Tensor, produced: dict) -> None:
        for t in [h, *produced.values()]:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(functools.partial(mark, i))
        fwd_stamps.append(clock.stamp())

    clock.sync()
    start = clock.stamp()
    out = forward_blocks(model, batch, after_block)
    loss = model.loss_sum(out, batch) / size
    loss_end = clock.stamp()
    loss.backward()
    end = clock.stamp()
    clock.sync()
    bounds = [start] + fwd_stamps
    fwd = [clock.seconds(a, b) for a, b in zip(bounds, bounds[1:])]
    fwd[-1] += clock.seconds(fwd_stamps[-1], loss_end)
    bwd = [0.0] * n
    current, prev = n - 1, loss_end
    for i, stamp in marks:
        bwd[current] += clock.seconds(prev, stamp)
        prev, current = stamp, min(current, i)
    bwd[current] += clock.seconds(prev, end)
    return fwd, bwd


class SavedBytes:
    """Per block: storages autograd saves during its forward (each once, parameters
    excluded), via saved_tensors_hooks around each block.

    The pack hook stores the storage's address in the graph, not the tensor: a tensor
    packed as itself where it is the op's own output makes a cycle (tensor -> grad_fn ->
    saved tensor) that the garbage collector does not break, and every graph account()
    built stayed allocated (at 768 px that was 2 GiB per profiled sample on the GPU). The
    storages are held here, detached, until release(), so that no tensor made later in the
    same forward reuses a counted address; the forward is never differentiated."""

    def __init__(self, model: Any) -> None:
        self.param_keys = {storage_key(p)[0] for p in model.parameters()}
        self.seen: list[dict[int, int]] = [{} for _ in model.blocks]
        self.held: list[torch.Tensor] = []

    def around(self, i: int) -> ContextManager:
        seen = self.seen[i]

        def pack(t: torch.Tensor) -> int:
            ptr, nbytes = storage_key(t)
            if ptr not in self.param_keys:
                seen[ptr] = max(seen.get(ptr, 0), nbytes)
            self.held.append(t.detach())
            return ptr

        def unpack(ptr: int) -> torch.Tensor:
            raise RuntimeError("account() counts saved bytes; its forward has no backward")
        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)

    def total(self, i: int) -> int:
        return sum(self.seen[i].values())

    def release(self) -> None:
        self.held.clear()


def account(model: Any, batch: Batch, cross_dtype: torch.dtype | None = None) -> list[Row]:
    """Bytes of one untimed forward: saved per block, the main-path output, the skips and
    the carried tensors each block makes (carried tensors of the batch on block 0). With
    `cross_dtype` (mixed precision), a floating-point tensor that crosses blocks counts in
    it, as the runtime sends it."""
    def crossing(t: torch.Tensor) -> int:
        if cross_dtype is not None and t.is_floating_point():
            return t.numel() * torch.empty((), dtype=cross_dtype).element_size()
        return blocklist.tensor_bytes(t)

    saved = SavedBytes(model)
    skip_out: dict[str, list[str]] = {}
    for s in model.skips:
        skip_out.setdefault(s["producer"], []).append(s["name"])
    carried = {c["name"] for c in model.carried}
    rows: list[Row] = []

    def after_block(i: int, h: torch.Tensor, produced: dict) -> None:
        name = model.block_names[i]
        rows.append({"output": crossing(h),
                     "skips": {k: crossing(h) for k in skip_out.get(name, ())},
                     "carried": {k: crossing(v) for k, v in produced.items() if k in carried}})

    forward_blocks(model, batch, after_block, saved.around)
    saved.release()
    for i, row in enumerate(rows):
        row["saved"] = saved.total(i)
    rows[0]["carried"].update({c["name"]: crossing(batch[c["name"]])
                               for c in model.carried if c["producer"] is None})
    return rows
