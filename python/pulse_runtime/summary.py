"""The summary of a run over its rank files: losses, times, bytes, and measured against
predicted time.

Measured time per iteration is the slowest rank's; per stage it is the compute of the
stage's ops (each op's time less what it spent blocked in receives and posting sends),
summed over the microbatches. With more than one iteration the first is left out of the
comparison (it pays one-time costs: allocator growth, kernel selection, communicator set-up)
and the median of the others is taken. Predicted: the plan's `predicted.iteration_s`, and
per stage num_microbatches x (`stages[].forward_s` + `stages[].backward_s`). A ratio outside
[1/1.2, 1.2] is listed under "warnings" (pulse-run prints them on stderr).

What ran (`executed`): the ZeRO stage and how it ran, the precision and the recomputed layers
(rank 0's record; every rank runs the plan's modes). Per rank (`memory`): the bytes of
parameters, gradients and optimizer state it held after its last iteration, counted from the
tensors' storages (FSDP: the local shards), beside the plan's figures for its pipeline device
(`predicted.devices[].memory`). The training state as a whole (the three summed) more than
MEMORY_TOLERANCE off the plan's is a warning; the parts may split differently (autocast keeps
fp32 weights and gradients, 4 + 4 + 8 bytes per parameter with Adam, where the planner's
`mixed` counts 2 + 2 + 12), so they are shown, not judged.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from .plan_doc import PlanDoc

TOLERANCE = 0.2  # measured vs predicted: warn beyond 20% either way
MEMORY_TOLERANCE = 0.1  # training state held vs the plan's: warn beyond 10% either way


def summarize(out: str, world: int, plan: PlanDoc | None = None,
              notes: list[str] | None = None) -> dict[str, Any]:
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
    if "executed" in results[0]:
        summary["executed"] = results[0]["executed"]
    if plan is not None and iterations:
        summary.update(measured_vs_predicted(results, summary["iteration_s"], plan))
    if plan is not None and all("held_bytes" in r for r in results):
        summary["memory"], warnings = held_vs_plan(results, plan)
        summary["warnings"] += warnings
    summary["warnings"] = list(notes or []) + summary["warnings"]
    return summary


def held_vs_plan(results: list[dict[str, Any]], plan: PlanDoc
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    """Per rank: the training state held beside the plan's for its device; warnings for a
    total more than MEMORY_TOLERANCE off."""
    planned = {d.device: d for d in plan.predicted.devices}
    rows, warnings = [], []
    for r in results:
        held = r["held_bytes"]
        row: dict[str, Any] = {"rank": r["rank"], "device": r["device"], **{
            f"{k}_bytes": held[k] for k in ("params", "grads", "optimizer")}}
        want = planned.get(r["device"])
        if want is not None:
            row.update(plan_params_bytes=want.weights_bytes,
                       plan_grads_bytes=want.gradients_bytes,
                       plan_optimizer_bytes=want.optimizer_bytes)
            got_total = sum(held.values())
            want_total = want.weights_bytes + want.gradients_bytes + want.optimizer_bytes
            row["ratio"] = _ratio(got_total, want_total)
            if row["ratio"] is not None and abs(row["ratio"] - 1) > MEMORY_TOLERANCE:
                warnings.append(
                    f"rank {r['rank']} (device {r['device']}) held {got_total} bytes of training "
                    f"state (params {held['params']} + grads {held['grads']} + optimizer "
                    f"{held['optimizer']}), the plan counts {want_total} (weights "
                    f"{want.weights_bytes} + gradients {want.gradients_bytes} + optimizer "
                    f"{want.optimizer_bytes}; x{row['ratio']:.2f})"
                    + ("; this optimizer keeps no state, the plan counts Adam's"
                       if held["optimizer"] == 0 else ""))
        rows.append(row)
    return rows, warnings


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
