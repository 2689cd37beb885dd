"""Frozen encoders where the plan places them (the plan's `frozen` section, docs/frozen.md).

A model with frozen parts lists them in `model.frozen`: `{name, kind, module, input, output}`
(the batch field the module reads, the field its output goes under; examples/small_frozen.py).
Their forwards run under no_grad; their parameters are set requires_grad False and belong to
no stage, so they get no gradient and no optimizer state.

Per pipeline (every data-parallel replica does the same on its own samples; the plan's
`first_sample` counts from the replica's first sample):

- `cached`: nothing frozen runs; every batch must carry the outputs (a `--data` hook that
  encoded its samples up front, examples/small_frozen.py:cached_data).
- `before_step` ops: before the device's first schedule op, on the current batch.
- `bubble` ops: inside the device's schedule, after the ops the plan's timeline starts before
  the op's start and before the others, on the NEXT iteration's batch (the plan's rule: the
  gaps of iteration i encode the samples of iteration i + 1). The first iteration of a run
  encodes its own samples with the same ops before its schedule (the extra encode
  docs/frozen.md leaves uncounted); the last one's bubble ops have no batch to encode and do
  not run.

Each op encodes `samples` samples from `first_sample` in one forward (a split batch is split
as the plan splits it). Its output goes to pipeline device 0, which runs the first stage and
hands the outputs to the denoiser as batch fields: kept there when the op runs on device 0,
sent with a gloo/NCCL isend otherwise (received by an irecv posted when the iteration starts,
tags apart from the pipeline's). Device 0 puts the pieces of each component together and
refuses a set that does not cover the pipeline's samples exactly once.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from .plan_doc import PlanDoc, PlanError, _Reader

# Tags of frozen outputs: above any tag comm.py gives (one per tensor of an iteration).
TAG_BEFORE, TAG_NEXT, TAG_FIRST = 1 << 24, 2 << 24, 3 << 24


@dataclass(frozen=True)
class FrozenOp:
    index: int          # in the plan's ops[]
    component: str
    device: int
    slot: str           # before_step | bubble
    start_s: float
    end_s: float
    first_sample: int
    samples: int


@dataclass(frozen=True)
class FrozenPlan:
    placement: str      # cached | before_step | bubbles
    components: tuple[str, ...]
    samples: int        # the pipeline's samples per iteration
    ops: tuple[FrozenOp, ...]


def read(doc: PlanDoc) -> FrozenPlan | None:
    """The plan's `frozen` section typed, None without one."""
    if doc.frozen is None:
        return None
    r, node, where = _Reader(doc.path), doc.frozen, "$.frozen"
    ops = []
    for i, op in enumerate(r.get(node, "ops", list, where, [])):
        w = f"{where}.ops[{i}]"
        ops.append(FrozenOp(i, r.get(op, "component", str, w), r.get(op, "device", int, w),
                            r.get(op, "slot", str, w), r.get(op, "start_s", float, w),
                            r.get(op, "end_s", float, w), r.get(op, "first_sample", int, w),
                            r.get(op, "samples", int, w)))
    return FrozenPlan(r.get(node, "placement", str, where),
                      tuple(r.get(node, "components", list, where)),
                      r.get(node, "samples", int, where), tuple(ops))


def check(doc: PlanDoc, model: Any) -> FrozenPlan | None:
    """The plan's frozen section against the model; PlanError (one line, the JSON path) when
    the plan names a component the model does not provide, when the model has frozen parts
    the plan does not place, or when an op lies outside the plan's devices or samples."""
    plan = read(doc)
    have = {c["name"]: c for c in getattr(model, "frozen", None) or []}
    if plan is None:
        if have:
            raise PlanError(f"{doc.path}: $.frozen: missing, but the model has frozen "
                            f"components {sorted(have)} (plan it with a profile that lists "
                            f"them: pulse-profile measures them into frozen[])")
        return None
    for i, name in enumerate(plan.components):
        if name not in have:
            raise PlanError(f"{doc.path}: $.frozen.components[{i}]: frozen component {name!r} "
                            f"is not one the model provides ({sorted(have) or 'none'})")
    for name in have:
        if name not in plan.components:
            raise PlanError(f"{doc.path}: $.frozen.components: lacks the model's frozen "
                            f"component {name!r}")
    par = doc.parallelism
    samples = par.microbatch_size * par.num_microbatches
    if plan.samples != samples:
        raise PlanError(f"{doc.path}: $.frozen.samples: expected {samples} (the pipeline's "
                        f"samples), got {plan.samples}")
    for op in plan.ops:
        w = f"{doc.path}: $.frozen.ops[{op.index}]"
        if op.component not in have:
            raise PlanError(f"{w}.component: frozen component {op.component!r} is not one the "
                            f"model provides ({sorted(have)})")
        if not 0 <= op.device < par.pp:
            raise PlanError(f"{w}.device: expected a pipeline device below {par.pp}, got "
                            f"{op.device}")
        if op.first_sample + op.samples > plan.samples:
            raise PlanError(f"{w}: samples {op.first_sample}..{op.first_sample + op.samples - 1}"
                            f" exceed the pipeline's {plan.samples}")
    if doc.sequence_degree > 1 and plan.placement != "cached":
        raise PlanError(f"{doc.path}: $.frozen.placement: {plan.placement} with sequence "
                        f"parallelism is a mode pulse-run does not run (plan --frozen cached)")
    for c in have.values():
        c["module"].requires_grad_(False)
    return plan


def outputs(model: Any) -> list[str]:
    return [c["output"] for c in getattr(model, "frozen", None) or []]


def encode(model: Any, batch: dict[str, Any]) -> dict[str, Any]:
    """The batch with every frozen output added (no gradient): what the one-process dry runs
    (comm.Shapes, the profiler) hand the denoiser; the batch itself without frozen parts."""
    frozen = getattr(model, "frozen", None)
    if not frozen:
        return batch
    batch = dict(batch)
    with torch.no_grad():
        for c in frozen:
            batch[c["output"]] = c["module"](batch[c["input"]])
    return batch


class Runner:
    """One rank's frozen ops (module docstring). `ranks`: the pipeline's processes."""

    def __init__(self, plan: FrozenPlan, model: Any, device: int, replica: int,
                 ranks: tuple[int, ...], schedule_starts: list[float]) -> None:
        self.plan, self.device, self.ranks = plan, device, ranks
        self.first = replica * plan.samples  # the replica's first sample in the global batch
        self.components = {c["name"]: c for c in model.frozen}
        mine = [op for op in plan.ops if op.device == device]
        self.before = [op for op in mine if op.slot == "before_step"]
        self.bubble = [op for op in mine if op.slot == "bubble"]
        # bubble op -> how many schedule ops run before it (those the plan starts earlier)
        self.position = {op.index: bisect.bisect_left(schedule_starts, op.start_s)
                         for op in self.bubble}
        self.record: list[tuple[str, str, int, int]] = []  # (component, when, first, samples)
        self._next: dict[str, list[tuple[int, torch.Tensor]]] = {}
        self._recvs: list[tuple[str, int, Any, torch.Tensor, bool]] = []
        self._sends: list[tuple[Any, torch.Tensor]] = []

    @property
    def active(self) -> bool:
        return self.plan.placement != "cached"

    def bubble_ops_at(self, position: int, last: bool = False) -> list[FrozenOp]:
        """The bubble ops before schedule op `position`; with `last`, those at or after it
        (a bucket's schedule may have fewer ops than the body's timeline the plan used)."""
        return [op for op in self.bubble if self.position[op.index] == position
                or (last and self.position[op.index] > position)]

    # --- an iteration --------------------------------------------------------------------

    def start(self, batch: dict[str, Any], next_batch: dict[str, Any] | None,
              first: bool) -> dict[str, torch.Tensor]:
        """Before the schedule: post device 0's receives, run the before-step ops (and, on
        the first iteration, the bubble ops on this batch); returns, on device 0, the
        encoded fields of this iteration's samples ({} elsewhere)."""
        self.record = []
        current: dict[str, list[tuple[int, torch.Tensor]]] = {}
        if self.device == 0:
            now = [(op, TAG_BEFORE) for op in self.plan.ops if op.slot == "before_step"]
            now += [(op, TAG_FIRST) for op in self.plan.ops if op.slot == "bubble"] * first
            self._post(now, batch, current_iteration=True)
            if next_batch is not None:
                later = [(op, TAG_NEXT) for op in self.plan.ops if op.slot == "bubble"]
                self._post(later, next_batch, current_iteration=False)
        for op in self.before:
            self._run(op, batch, TAG_BEFORE, current, "before_step")
        if first:
            for op in self.bubble:
                self._run(op, batch, TAG_FIRST, current, "first_iteration")
        if self.device != 0:
            return {}
        if not first and self.plan.placement == "bubbles":
            for name, pieces in self._next.items():
                current.setdefault(name, []).extend(pieces)
        self._next = {}
        for name, first_sample, work, buf, now_flag in self._recvs:
            if now_flag:
                work.wait()
                current.setdefault(name, []).append((first_sample, buf))
        self._recvs = [r for r in self._recvs if not r[4]]
        return self._assemble(current)

    def in_bubble(self, position: int, next_batch: dict[str, Any] | None,
                  last: bool = False) -> None:
        """The bubble ops the plan places before schedule op `position`: on the next
        iteration's samples (none after the last iteration)."""
        if next_batch is None:
            return
        for op in self.bubble_ops_at(position, last):
            self._run(op, next_batch, TAG_NEXT, self._next, "bubble")

    def finish(self) -> None:
        """After the schedule: device 0 keeps the next iteration's pieces it received; every
        send completes."""
        for name, first_sample, work, buf, _ in self._recvs:
            work.wait()
            self._next.setdefault(name, []).append((first_sample, buf))
        self._recvs = []
        for work, _ in self._sends:
            work.wait()
        self._sends = []

    # --- pieces --------------------------------------------------------------------------

    def _inputs(self, op: FrozenOp, batch: dict[str, Any]) -> torch.Tensor:
        c = self.components[op.component]
        start = self.first + op.first_sample
        return batch[c["input"]][start:start + op.samples]

    def _run(self, op: FrozenOp, batch: dict[str, Any], tag: int,
             keep: dict[str, list[tuple[int, torch.Tensor]]], when: str) -> None:
        with torch.no_grad():
            out = self.components[op.component]["module"](self._inputs(op, batch))
        self.record.append((op.component, when, op.first_sample, op.samples))
        if self.device == 0:
            keep.setdefault(op.component, []).append((op.first_sample, out))
        else:
            out = out.contiguous()
            self._sends.append((dist.isend(out, dst=self.ranks[0], tag=tag + op.index), out))

    def _post(self, ops: list[tuple[FrozenOp, int]], batch: dict[str, Any],
              current_iteration: bool) -> None:
        """Device 0: an irecv for every op of another device, its buffer shaped by the
        component's output for this batch's sample shape."""
        for op, tag in ops:
            if op.device == 0:
                continue
            c = self.components[op.component]
            with torch.no_grad():
                one = c["module"](self._inputs(op, batch)[:1])
            buf = torch.empty((op.samples,) + tuple(one.shape[1:]), dtype=one.dtype,
                              device=one.device)
            work = dist.irecv(buf, src=self.ranks[op.device], tag=tag + op.index)
            self._recvs.append((op.component, op.first_sample, work, buf, current_iteration))

    def _assemble(self, pieces: dict[str, list[tuple[int, torch.Tensor]]]
                  ) -> dict[str, torch.Tensor]:
        """Per component, its pieces in sample order as one tensor of the pipeline's samples;
        RuntimeError when they do not cover them exactly once."""
        out = {}
        for name, c in self.components.items():
            parts = sorted(pieces.get(name, []), key=lambda p: p[0])
            covered = [s for first, t in parts for s in range(first, first + t.shape[0])]
            if covered != list(range(self.plan.samples)):
                raise RuntimeError(f"frozen component {name!r}: the plan's ops encoded samples "
                                   f"{covered} of the pipeline's {self.plan.samples}")
            out[c["output"]] = torch.cat([t for _, t in parts])
        return out
