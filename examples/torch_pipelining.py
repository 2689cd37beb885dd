#!/usr/bin/python3
"""Train by a pulse plan on PyTorch's own pipelining runtime (torch.distributed.pipelining,
PyTorch 2.6 or later): PipelineStage per stage, `_PipelineScheduleRuntime` loaded from the
plan's torch-csv export, skips and carried tensors in a rank-local cache (docs/torch.md,
"On PyTorch's pipelining runtime").

    build/pulse-plan plan --model tests/torch/data/small-unet-test-f64.json \
        --cluster profiles/clusters/cpu-localhost.json --pp 2 --global-batch 4 -o /tmp/v.json
    build/pulse-plan export /tmp/v.json --format torch-csv -o /tmp/v.csv
    /usr/bin/python3 examples/torch_pipelining.py --plan /tmp/v.json --csv /tmp/v.csv \
        --model examples/small_unet.py:build_test --dtype float64 --out /tmp/v-run

One process per rank of the plan on this host (gloo on the CPU, NCCL with one GPU per rank
on CUDA); each writes OUT/rank<R>.pt (losses, gradients, parameters). On an older PyTorch it
says so and exits 2: pulse-run runs the same plan there.
"""

import argparse
import json
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from pulse_runtime import pipelining  # noqa: E402
from pulse_runtime.plan_doc import PlanError, read_plan  # noqa: E402
from pulse_runtime.runner import (RunError, RunOptions, device_type, free_port,  # noqa: E402
                                  prepare, wait_all, warm_before_fork)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plan", required=True)
    p.add_argument("--csv", required=True, help="pulse-plan export PLAN --format torch-csv")
    p.add_argument("--model", required=True, help="FILE.py:FUNCTION (a block-list model)")
    p.add_argument("--dtype", choices=("float32", "float64"),
                   help="fp32 or fp64; must be the plan's precision (default: the plan's)")
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    p.add_argument("--zero", choices=("plan", "0", "1", "2", "3"), default="plan",
                   help="the ZeRO stage (default: the plan's; 2 and 3 shard each stage with "
                   "FSDP's fully_shard over its data-parallel group)")
    p.add_argument("--iterations", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--out", help="write rank<R>.pt and summary.json here")
    return p.parse_args(argv)


def rank_main(opts, rank, world, init_method):
    from pulse_runtime import pipelining_run
    try:
        pipelining_run.run_rank(opts, rank, world, init_method)
    except (RunError, pipelining.PipeliningUnavailable, ValueError) as e:  # exit 2
        print(f"torch_pipelining: rank {rank}: {e}", file=sys.stderr, flush=True)
        sys.exit(2)


def refuse_steps_it_does_not_run(path):
    """The adapter runs the denoiser's schedule at one shape: a plan with frozen encoders
    (any placement: even cached ones need batches it does not take) or buckets is refused
    (exit 2), not run without them; pulse-run runs both."""
    try:
        doc = read_plan(path)
    except PlanError as e:
        raise RunError(str(e)) from None
    if doc.frozen is not None:
        raise RunError(f"{path}: $.frozen: the pipelining adapter runs no frozen encoders "
                       f"(placement {doc.frozen.get('placement')}); pulse-run runs them")
    if doc.buckets is not None:
        raise RunError(f"{path}: $.buckets: the pipelining adapter runs one shape, not "
                       f"buckets; pulse-run runs each bucket's microbatching")


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        pipelining.require_pipelining()
        refuse_steps_it_does_not_run(args.plan)
        run = RunOptions(plan=args.plan, model=args.model, iterations=args.iterations,
                         dtype=args.dtype, lr=args.lr, seed=args.seed, device=args.device,
                         optimizer=args.optimizer, zero=args.zero,
                         out=args.out, timeout=args.timeout)
        prepared = prepare(run)
        if prepared.precision.name not in ("fp32", "fp64"):
            raise RunError(f"precision {prepared.precision.name}: the pipelining adapter runs "
                           f"fp32 or fp64 (the model's dtype); pulse-run runs the others")
        if prepared.plan.doc.parallelism.sequence is not None:
            raise RunError(f"{args.plan}: $.parallelism.sequence: the pipelining adapter runs "
                           f"no sequence parallelism; pulse-run runs the plan's Ulysses groups")
        world = prepared.plan.world_size
        cuda = device_type(run) == "cuda"
    except (RunError, pipelining.PipeliningUnavailable) as e:
        print(f"torch_pipelining: {e}", file=sys.stderr)
        return 2
    from pulse_runtime.pipelining_run import PipeliningOptions
    opts = PipeliningOptions(run, args.csv)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if not cuda:
        warm_before_fork()
    ctx = multiprocessing.get_context("spawn" if cuda else "fork")
    init = f"tcp://127.0.0.1:{free_port()}"
    procs = [ctx.Process(target=rank_main, args=(opts, r, world, init)) for r in range(world)]
    for proc in procs:
        proc.start()
    failed = wait_all(procs, time.monotonic() + args.timeout)
    if failed:
        print(f"torch_pipelining: rank(s) {failed} failed or timed out", file=sys.stderr)
        return 1
    if args.out:
        import torch
        ranks = [torch.load(os.path.join(args.out, f"rank{r}.pt")) for r in range(world)]
        summary = {"loss": [sum(r["losses"][i] for r in ranks) for i in range(args.iterations)],
                   "iteration_s": [max(r["iteration_s"][i] for r in ranks)
                                   for i in range(args.iterations)]}
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
