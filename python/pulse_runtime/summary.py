"""The summary of a run over its rank files: losses, times, bytes, and measured against
predicted time.

Measured time per iteration is the slowest rank's; per stage it is the compute of the
stage's ops (each op's time less what it spent blocked in receives and posting sends),
summed over the microbatches. With more than one iteration the first is left out of the
comparison (it pays one-time costs: allocator growth, kernel selection, communicator set-up)
and the median of the others is taken. Predicted: the plan's `predicted.iteration_s`, and
per stage num_microbatches x (`stages[].forward_s` + `stages[].backward_s`). A ratio outside
[1/1.2, 1.2] is listed under "warnings" (pulse-run prints them on stderr).
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from .plan_doc import PlanDoc

TOLERANCE = 0.2  # measured vs predicted: warn beyond 20% either way


def summarize(out: str, world: int, plan: PlanDoc | None = None) -> dict[str, Any]:
    """Over the rank files of one run: loss per iteration, slowest rank's time, bytes sent
    point to point in the last iteration by kind; with the plan, measured vs predicted."""
    import torch
    results = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]
    iterations = len(results[0]["iteration_s"])
    byte_kinds = {"activation": 0, "skip": 0, "carried": 0}
    for r in results:
        for kind, n in r["bytes"].items():
            byte_kinds[kind] += n
    summary: dict[str, Any] = {
        "world_size": world,
        "first_iteration": results[0].get("first_iteration", 0) + 1,
        "loss": [sum(r["losses"][i] for r in results) for i in range(iterations)],
        "iteration_s": [max(r["iteration_s"][i] for r in results) for i in range(iterations)],
        "p2p_bytes_per_iteration": sum(byte_kinds.values()),
        "p2p_bytes_by_kind": byte_kinds,
        "p2p_messages_per_iteration": sum(r["messages"] for r in results),
        "warnings": [],
    }
    if plan is not None and iterations:
        summary.update(measured_vs_predicted(results, summary["iteration_s"], plan))
    return summary


def _ratio(measured: float, predicted: float) -> float | None:
    return measured / predicted if predicted > 0 else None


def _off(ratio: float | None) -> bool:
    return ratio is not None and not (1 / (1 + TOLERANCE) <= ratio <= 1 + TOLERANCE)


def compared_iterations(iterations: int) -> list[int]:
    """The iterations compared with the prediction: all but the first, when there are more."""
    return list(range(1, iterations)) if iterations > 1 else [0]


def stage_compute(results: list[dict[str, Any]], iteration: int) -> dict[int, float]:
    """Seconds of compute per stage in one iteration, over the ranks of replica 0."""
    out: dict[int, float] = {}
    for r in results:
        if r.get("replica", 0) != 0:
            continue
        for op, stage, _mb, start, end, wait, send in r["traces"][iteration]:
            out[stage] = out.get(stage, 0.0) + (end - start - wait - send)
    return out


def measured_vs_predicted(results: list[dict[str, Any]], iteration_s: list[float],
                          plan: PlanDoc) -> dict[str, Any]:
    chosen = compared_iterations(len(iteration_s))
    measured = statistics.median(iteration_s[i] for i in chosen)
    ratio = _ratio(measured, plan.predicted.iteration_s)
    warnings = []
    if _off(ratio):
        warnings.append(f"iteration took {measured:.4g} s, the plan predicts "
                        f"{plan.predicted.iteration_s:.4g} s (x{ratio:.2f})")
    per_stage = [stage_compute(results, i) for i in chosen]
    m = plan.parallelism.num_microbatches
    stages = []
    for spec in plan.stages:
        got = statistics.median(s.get(spec.id, 0.0) for s in per_stage)
        want = m * (spec.forward_s + spec.backward_s)
        r = _ratio(got, want)
        stages.append({"stage": spec.id, "device": spec.device, "measured_s": got,
                       "predicted_s": want, "ratio": r})
        if _off(r):
            warnings.append(f"stage {spec.id} (device {spec.device}) computed for {got:.4g} s, "
                            f"the plan predicts {want:.4g} s (x{r:.2f})")
    return {"predicted_iteration_s": plan.predicted.iteration_s,
            "measured_iteration_s": measured, "iteration_ratio": ratio,
            "compared_iterations": [i + 1 for i in chosen], "stages": stages,
            "warnings": warnings}
