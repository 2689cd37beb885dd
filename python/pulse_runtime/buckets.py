"""Resolution buckets as pulse-run runs them (the plan's `buckets` section, docs/buckets.md).

One partition serves every bucket: the stages, their devices, the transfers and the rank map
are the plan's. What a bucket changes is its microbatching (`rows[].microbatch_size` and
`num_microbatches`, with microbatch_size x num_microbatches x dp = the global batch) and the
shape of its samples. Iteration i runs bucket `rows[i mod n]`, the rows in the plan's order
(round robin; the shares weigh the plan's throughput, they do not order the run).

The plan lists one schedule, the body bucket's (`buckets.body`, M microbatches); the rows state
each bucket's family but not its op order. A bucket of M_b microbatches runs:

- M_b <= M: the body's order, restricted to microbatches below M_b (every device keeps the
  relative order of the ops it keeps, so no wait is added);
- M_b > M: the body's order once per round of M microbatches (round r runs microbatches
  r M .. r M + M - 1, the last round those below M_b), rounds one after another: a flush
  between rounds that the bucket's own schedule would not have.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from .plan_doc import PlanDoc, PlanError, _Reader


@dataclass(frozen=True)
class Bucket:
    index: int
    name: str
    shape: dict[str, int]      # make_batch's keywords: frames, height, width (those given)
    microbatch_size: int
    num_microbatches: int


def read(doc: PlanDoc) -> list[Bucket]:
    """The plan's bucket rows, checked against its degrees ([] without buckets)."""
    if doc.buckets is None:
        return []
    r, where = _Reader(doc.path), "$.buckets"
    par = doc.parallelism
    out = []
    for i, row in enumerate(r.get(doc.buckets, "rows", list, where)):
        w = f"{where}.rows[{i}]"
        b, m = r.get(row, "microbatch_size", int, w), r.get(row, "num_microbatches", int, w)
        if b * m * par.dp != par.global_batch:
            raise PlanError(f"{doc.path}: {w}: microbatch_size {b} x num_microbatches {m} x dp "
                            f"{par.dp} is not the global batch {par.global_batch}")
        shape = {k: r.get(row, k, int, w, 0) for k in ("frames", "height", "width")}
        out.append(Bucket(i, r.get(row, "name", str, w), {k: v for k, v in shape.items() if v},
                          b, m))
    return out


def schedule(body: dict[int, list[tuple[str, int, int]]], body_microbatches: int,
             microbatches: int) -> dict[int, list[tuple[str, int, int]]]:
    """Every device's op order for `microbatches` microbatches, from the body's (module
    docstring)."""
    out = {}
    for device, ops in body.items():
        seq = []
        for start in range(0, microbatches, body_microbatches):
            seq += [(op, stage, mb + start) for op, stage, mb in ops
                    if mb + start < microbatches]
        out[device] = seq
    return out


def bucket_plan(plan: Any, bucket: Bucket) -> Any:
    """The plan with the bucket's microbatching and schedule (the partition, messages and
    groups shared)."""
    out = copy.copy(plan)
    out.microbatch_size = bucket.microbatch_size
    out.num_microbatches = bucket.num_microbatches
    out.schedule = schedule(plan.schedule, plan.num_microbatches, bucket.num_microbatches)
    return out
