"""Training by a plan on PyTorch's pipelining runtime, one process per rank (pipelining.py
builds the stages and the schedule; this runs them): the same options, data, checks and rank
files as pulse-run, so the two runtimes can be compared on one plan.

examples/torch_pipelining.py is the command line.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from . import blocklist, optim, sharding
from .pipelining import RankPipeline, build, require_pipelining
from .runner import RunError, RunOptions, start_rank


@dataclass(frozen=True)
class PipeliningOptions:
    run: RunOptions   # plan, model, iterations, dtype (float32/float64), lr, seed, out, ...
    csv: str          # `pulse-plan export PLAN --format torch-csv -o CSV`


def process_groups(plan: Any, rank: int) -> tuple[Any, Any, int]:
    """(this rank's pipeline group or None for the default group, its data-parallel group or
    None, the data-parallel size). new_group is collective: every rank creates every group,
    in the plan's order."""
    pipeline = None
    if plan.dp > 1:
        for ranks in plan.doc.rank_map.pipeline_groups:
            group = dist.new_group(ranks=list(ranks))
            if rank in ranks:
                pipeline = group
    data, size = None, 1
    for ranks in plan.data_parallel_groups:
        group = dist.new_group(ranks=list(ranks)) if len(ranks) > 1 else None
        if rank in ranks:
            data, size = group, len(ranks)
    return pipeline, data, size


def run_rank(opts: PipeliningOptions, rank: int, world_size: int,
             init_method: str | None = None) -> None:
    """One rank: build, train `opts.run.iterations` iterations, write rank<R>.pt."""
    require_pipelining()
    run = opts.run
    device, p = start_rank(run, rank, world_size, init_method)
    if p.precision.name not in ("fp32", "fp64"):
        raise RunError(f"precision {p.precision.name}: the pipelining adapter runs fp32 or fp64 "
                       f"(the model's dtype); pulse-run runs the others")
    pipeline_group, dp_group, dp_size = process_groups(p.plan, rank)
    shard = None
    if p.zero >= 2 and dp_size > 1:
        mesh = sharding.mesh_of(dp_group, device.type)

        def shard(module: Any) -> None:
            sharding.shard_stage(module, module.blocks, mesh, p.zero, p.precision)
    pipe = build(p.plan, opts.csv, rank, device, pipeline_group, shard)
    optimizer = optim.Optimizer(pipe.parameters(), dp_group, dp_size,
                                optim.Config(run.optimizer, run.lr, run.momentum, p.zero))
    record = train(run, pipe, optimizer, device)
    if run.out:
        write_rank_file(run.out, rank, pipe, optimizer, record)
    dist.barrier()
    dist.destroy_process_group()


def train(run: RunOptions, pipe: RankPipeline, optimizer: optim.Optimizer,
          device: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"losses": [], "iteration_s": [], "grads": {}}
    model = pipe.plan.model
    for it in range(run.iterations):
        batch = model.make_batch(pipe.plan.global_batch, seed=run.seed + 1 + it, device=device)
        for p in pipe.parameters():
            p.grad = None
        dist.barrier()
        start = time.perf_counter()
        loss = pipe.step(batch)
        optimizer.reduce_gradients()
        record["grads"] = {n: p.grad.detach().clone() for n, p in named(pipe)}
        optimizer.step()
        record["iteration_s"].append(time.perf_counter() - start)
        record["losses"].append(loss)
    return record


def named(pipe: RankPipeline) -> list[tuple[str, torch.nn.Parameter]]:
    """This rank's parameters under the model's names (blocklist.block_named_parameters)."""
    out = []
    for s in sorted(pipe.modules):
        first, last = pipe.plan.stage_range[s]
        for i in range(first, last + 1):
            out.extend(blocklist.block_named_parameters(pipe.plan.model, i))
    return out


def write_rank_file(out: str, rank: int, pipe: RankPipeline, optimizer: optim.Optimizer,
                    record: dict[str, Any]) -> None:
    os.makedirs(out, exist_ok=True)
    held = {"params": sharding.storage_bytes(pipe.parameters()),
            "grads": sharding.storage_bytes(p.grad for p in pipe.parameters()),
            "optimizer": optimizer.state_bytes}
    # Under FSDP gathered whole (collective over each data-parallel group, same order).
    grads = {n: sharding.full(g).cpu() for n, g in record["grads"].items()}
    params = {n: sharding.full(p.detach()).cpu() for n, p in named(pipe)}
    torch.save({"rank": rank, "replica": pipe.replica, "group_rank": pipe.group_rank,
                "stages": sorted(pipe.modules), "losses": record["losses"],
                "iteration_s": record["iteration_s"], "grads": grads, "params": params,
                "zero": optimizer.zero, "held_bytes": held},
               os.path.join(out, f"rank{rank}.pt"))
