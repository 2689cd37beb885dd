"""The torch-csv export format that PyTorch's executors run correctly, written in Python: the
specification `pulse-plan export --format torch-csv` must meet (docs/plans.md, "torch-csv").
tests/test_torch_csv.py checks its output against PyTorch's rules (tests/torch_rules.py)
beside the C++ export's, so the format is known to be right for every shipped plan before
the C++ export writes it.

1. Rows in group-rank order. `torch.distributed.new_group` sorts its ranks and a
   `PipelineStage` takes its CSV row from `dist.get_rank(group)`, so row g belongs to the
   process whose global rank is the g-th smallest of its pipeline group. The plan's
   `rank_map.pipeline_groups[k]` lists global ranks in pipeline-device order, so row g holds
   the ops of pipeline device d with `sorted(G)[g] == G[d]`. One CSV serves every replica only
   when all groups give the same g -> d; the export refuses the plan otherwise.
2. Lock-step idle cells. Every op gets the earliest step after the previous op of its row
   and after the step of the op it consumes (the forward of the stage before, the I or B of
   the stage after), so `PipelineScheduleMulti` never computes on an input received at the
   same step or later; `_PipelineScheduleRuntime` drops the idle cells when it lowers the
   CSV. A row ends at its last op (no trailing empty cells).
3. The side file `pulse.torch-stages/v2` says which row is which device, stage and global
   rank, and where every skip lives.
"""

import json


class ExportError(ValueError):
    pass


def row_devices(plan):
    """[pipeline device of row g]; ExportError when the pipeline groups disagree."""
    groups = plan["rank_map"]["pipeline_groups"]
    orders = []
    for group in groups:
        ascending = sorted(group)
        orders.append([group.index(ascending[g]) for g in range(len(group))])
    for k, order in enumerate(orders):
        if order != orders[0]:
            raise ExportError(f"pipeline groups 0 {groups[0]} and {k} {groups[k]} order their "
                              f"devices differently in group-rank order ({orders[0]} vs "
                              f"{order}); one CSV cannot serve both")
    return orders[0]


def lock_step(plan):
    """{(device, index in the device's op list): step}, each op at its earliest step."""
    last = plan["parallelism"]["num_stages"] - 1
    ops = {e["device"]: e["ops"] for e in plan["schedule"]}

    def key(op):  # I and B both deliver the input gradient of their stage
        return ("B" if op["op"] in ("I", "B") else op["op"], op["stage"], op["mb"])

    def producer(op):
        if op["op"] == "F" and op["stage"] > 0:
            return ("F", op["stage"] - 1, op["mb"])
        if op["op"] in ("I", "B") and op["stage"] < last:
            return ("B", op["stage"] + 1, op["mb"])
        return None

    step_of, steps = {}, {}
    next_index = {d: 0 for d in ops}
    row_step = {d: -1 for d in ops}
    while any(next_index[d] < len(ops[d]) for d in ops):
        progress = False
        for d in sorted(ops):
            while next_index[d] < len(ops[d]):
                op = ops[d][next_index[d]]
                p = producer(op)
                if p is not None and p not in step_of:
                    break
                t = max(row_step[d] + 1, step_of[p] + 1 if p is not None else 0)
                step_of[key(op)] = steps[(d, next_index[d])] = row_step[d] = t
                next_index[d] += 1
                progress = True
        if not progress:
            raise ExportError("the plan's schedule waits in a cycle; it cannot be exported")
    return steps


def csv_text(plan):
    devices = row_devices(plan)
    steps = lock_step(plan)
    ops = {e["device"]: e["ops"] for e in plan["schedule"]}
    lines = []
    for d in devices:
        cells = [""] * (max(steps[(d, i)] for i in range(len(ops[d]))) + 1)
        for i, op in enumerate(ops[d]):
            cells[steps[(d, i)]] = f"{op['stage']}{op['op']}{op['mb']}"
        lines.append(",".join(cells) + "\n")
    return "".join(lines)


def _skip_entry(plan, skip, group_rank_of):
    b = plan["parallelism"]["microbatch_size"]
    return {"name": skip["name"], "producer": skip["producer"], "consumer": skip["consumer"],
            "producer_stage": skip["producer_stage"], "consumer_stage": skip["consumer_stage"],
            "producer_device": skip["producer_device"],
            "consumer_device": skip["consumer_device"],
            "producer_group_rank": group_rank_of[skip["producer_device"]],
            "consumer_group_rank": group_rank_of[skip["consumer_device"]],
            "bytes_per_sample": skip["bytes_per_sample"],
            "bytes_per_microbatch": skip["bytes_per_sample"] * b}


def side_file(plan):
    devices = row_devices(plan)
    group_rank_of = {d: g for g, d in enumerate(devices)}
    par = plan["parallelism"]
    groups = plan["rank_map"]["pipeline_groups"]
    stage_device = {s["id"]: s["device"] for s in plan["stages"]}
    ranks = []
    for g, d in enumerate(devices):
        ranks.append({
            "group_rank": g, "device": d,
            "stages": [s["id"] for s in plan["stages"] if s["device"] == d],
            "global_ranks": [sorted(group)[g] for group in groups],
            "cached_skips": [_skip_entry(plan, k, group_rank_of) for k in plan["skips"]
                             if stage_device[k["producer_stage"]] == d ==
                             stage_device[k["consumer_stage"]]],
        })
    remote = []
    for k in plan["skips"]:
        if stage_device[k["producer_stage"]] != stage_device[k["consumer_stage"]]:
            entry = _skip_entry(plan, k, group_rank_of)
            entry["route"] = k.get("route") or "direct"
            remote.append(entry)
    steps = lock_step(plan)
    return {
        "schema": "pulse.torch-stages/v2",
        "plan": {"model": plan["inputs"]["model"]["name"],
                 "model_sha256": plan["inputs"]["model"]["sha256"],
                 "cluster": plan["inputs"]["cluster"]["name"],
                 "strategy": plan["options"]["strategy"]},
        "csv_format": "compute_only",
        "csv_rows": "group_rank",
        "csv_idle_cells": "lock_step",
        "num_steps": max(steps.values()) + 1,
        "pp": par["pp"], "dp": par["dp"], "num_stages": par["num_stages"],
        "num_microbatches": par["num_microbatches"], "microbatch_size": par["microbatch_size"],
        "split_backward": bool(plan["schedule_info"]["split_backward"]),
        "pipeline_groups": groups,
        "row_devices": devices,
        "stages": [{"stage": s["id"], "group_rank": group_rank_of[s["device"]],
                    "device": s["device"], "layers": s["layers"]} for s in plan["stages"]],
        "ranks": ranks,
        "remote_skips": remote,
    }


def export(plan, csv_path, stages_path):
    """Writes both files, as `pulse-plan export PLAN --format torch-csv -o CSV` will."""
    text, side = csv_text(plan), side_file(plan)
    with open(csv_path, "w", newline="") as f:
        f.write(text)
    with open(stages_path, "w") as f:
        json.dump(side, f, indent=2)
        f.write("\n")
