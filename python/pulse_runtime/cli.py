"""pulse-run: train a model by a pulse-plan plan with torch.distributed.

    pulse-run --plan plan.json --model model.py:build --iterations 10
        one host: forks one process per rank of the plan's rank_map (gloo over loopback)

    torchrun --nnodes N --nproc-per-node K ... -m pulse_runtime --plan plan.json ...
        one process per rank, started by torchrun (RANK, WORLD_SIZE, MASTER_ADDR,
        MASTER_PORT, LOCAL_RANK): NCCL on CUDA, gloo otherwise

    pulse-run ... --rank R --master-addr A --master-port P
        one rank, started by hand (e.g. inside a network namespace)

The plan is checked against the model before anything starts (layer names and order, skip
pairs, carried tensors, tensor sizes); a mismatch is a clear error and exit 2. Rank 0 prints
one line per iteration. With --checkpoint-dir, every rank saves its state every
--checkpoint-every iterations; --resume continues from the newest complete checkpoint and
ends with the parameters an uninterrupted run would have. --out DIR writes each rank's
result (rank<R>.pt) and, on one host, DIR/summary.json.

The plan's modes run as written: its precision (options.memory.precision: fp32, fp64, bf16
pure, mixed = bf16 compute with fp32 master weights, fp16-mixed with loss scaling) and its
ZeRO stage (1: PyTorch's ZeroRedundancyOptimizer; 2 and 3: FSDP's fully_shard per stage over
its data-parallel group). --precision (or the older --dtype: float32, float64, bfloat16 =
mixed, float16 = fp16-mixed) must name the plan's precision; --force-precision and --zero run
otherwise, with a warning. A mode this PyTorch cannot run is refused (exit 2). --data
FILE.py:FUNC takes the batches from a function of yours (docs/torch.md). The summary states
what ran and the training state each rank held beside the plan's, and compares measured with
predicted time, per iteration and per stage, warning beyond 20% (memory: 10%).

Before anything starts, and before PyTorch is imported, the options are held to their
ranges and the plan is read and checked (plan_doc.py: its size, its JSON, the project's
schema, then what the schema cannot say), and the launch against it: torchrun's WORLD_SIZE, or
--nproc, must be the plan's world size, --rank must be one of its ranks, and on one host at
most 8 processes per usable core are started (a larger plan runs across hosts under
torchrun). Each refusal is one line naming the option or the file and JSON path (exit 2).
On one host, --timeout bounds the whole run from pulse-run's start: then every rank still
running is killed and pulse-run exits 1 saying so.

Exit codes: 0 success, 1 a rank failed or timed out, 2 bad usage, a plan that cannot run or
does not fit the model, 3 internal error (one line; PULSE_TRACEBACK=1 shows the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from . import options as opt
from .options import DTYPES, NAMES, OPTIMIZERS, Parser
from .plan_doc import PlanDoc, PlanError, read_plan

PROG = "pulse-run"


def parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0],
               formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ranges = opt.RUN_RANGES
    p.add_argument("--plan", required=True, help="a pulse.plan/v2 or v1 plan (pulse-plan plan -o)")
    p.add_argument("--model", required=True,
                   help="FILE.py:FUNCTION returning a block-list model or any traceable "
                   "nn.Module (docs/torch.md)")
    p.add_argument("--iterations", type=ranges["iterations"], default=1,
                   help="iterations in total (default 1)")
    p.add_argument("--precision", choices=NAMES,
                   help="the training regime; must be the plan's (default: the plan's "
                   "options.memory.precision)")
    p.add_argument("--dtype", choices=DTYPES,
                   help="the older spelling of --precision: float32 = fp32, float64 = fp64, "
                   "bfloat16 = mixed, float16 = fp16-mixed")
    p.add_argument("--force-precision", action="store_true",
                   help="run --precision/--dtype on a plan made for another (a warning says so)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="cuda: NCCL, one rank per GPU; cpu: gloo (default: CUDA if present)")
    p.add_argument("--data", help="FILE.py:FUNCTION yielding the global batches (called as "
                   "FUNCTION(global_batch=, seed=, device=, model=); default: the model's "
                   "make_batch)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd")
    p.add_argument("--lr", type=ranges["lr"], default=0.1, help="learning rate (default 0.1)")
    p.add_argument("--momentum", type=ranges["momentum"], default=0.0,
                   help="SGD momentum (default 0)")
    p.add_argument("--zero", choices=("plan", "0", "1", "2", "3"), default="plan",
                   help="the ZeRO stage (default: the plan's chosen.memory.zero_stage; "
                   "another runs with a warning)")
    p.add_argument("--seed", type=ranges["seed"], default=0,
                   help="model init; iteration i trains on the batch of seed + 1 + i")
    p.add_argument("--threads", type=ranges["threads"], default=1,
                   help="torch CPU threads per rank (1 to this host's usable cores)")
    p.add_argument("--out", help="write rank<R>.pt per rank (and summary.json) here")
    p.add_argument("--checkpoint-dir", help="save and resume checkpoints here")
    p.add_argument("--checkpoint-every", type=ranges["checkpoint_every"], default=1,
                   help="iterations between checkpoints (default 1; the last is always saved)")
    p.add_argument("--resume", action="store_true",
                   help="continue from the newest checkpoint in --checkpoint-dir")
    p.add_argument("--nproc", type=opt.integer(1, opt.host_process_limit),
                   help="processes to start on this host: must be the plan's world size "
                   "(default: the plan's, at most 8 per usable core)")
    p.add_argument("--rank", type=opt.integer(0, opt.MAX_RANK),
                   help="run only this rank (otherwise launch all)")
    p.add_argument("--master-addr", type=opt.name, default="127.0.0.1")
    p.add_argument("--master-port", type=opt.integer(1, 65535))
    p.add_argument("--timeout", type=ranges["timeout"], default=300,
                   help="seconds before giving up (on one host: the whole run, every rank "
                   "killed then)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def check_usage(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.resume and not args.checkpoint_dir:
        p.error("--resume needs --checkpoint-dir")
    if args.checkpoint_dir and not args.resume and checkpoints_in(args.checkpoint_dir):
        p.error(f"{args.checkpoint_dir} already holds checkpoints: pass --resume to continue "
                f"from them, or choose another --checkpoint-dir")
    if args.rank is not None and args.master_port is None:
        p.error("--rank needs --master-port")
    if args.rank is not None and args.nproc is not None:
        p.error("--rank runs one process; --nproc is for starting all of this host's")
    if args.precision and args.dtype:
        p.error("--precision and --dtype name the same thing: give one")


def checkpoints_in(root: str) -> bool:
    from .checkpoint import existing  # PyTorch: only when --checkpoint-dir is given
    return existing(root)


def launch_of(args: argparse.Namespace) -> tuple[str, int | None, int | None]:
    """(how the ranks start, this process's rank, the world size the launch says): "rank"
    (--rank), "torchrun" (RANK and WORLD_SIZE in the environment) or "local" (every rank
    here; --nproc or None). ValueError for torchrun variables that are not numbers."""
    if args.rank is not None:
        return "rank", args.rank, None
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        world = opt.env_int("WORLD_SIZE", 1, opt.MAX_RANK + 1)
        return "torchrun", opt.env_int("RANK", 0, world - 1), world
    return "local", None, args.nproc


def check_launch(doc: PlanDoc, launch: tuple[str, int | None, int | None]) -> None:
    """The launch against the plan's rank map (ValueError naming both)."""
    how, rank, world = launch
    plan_world = doc.processes  # world_size x the sequence degree
    where = f"{doc.path}: $.rank_map.world_size" + (
        f" x $.parallelism.sequence.degree" if doc.sequence_degree > 1 else "")
    if how == "torchrun" and world != plan_world:
        raise ValueError(f"{where}: the plan has {plan_world} ranks, torchrun started "
                         f"WORLD_SIZE={world}")
    if how == "rank" and rank is not None and rank >= plan_world:
        raise ValueError(f"--rank {rank}: the plan's ranks are 0 to {plan_world - 1} "
                         f"($.rank_map.world_size {plan_world})")
    if how == "local":
        if world is not None and world != plan_world:
            raise ValueError(f"{where}: the plan has {plan_world} ranks, --nproc {world}")
        opt.check_local_world(plan_world, where)


def options(args: argparse.Namespace) -> Any:
    """The library's options from the parsed command line (everything but --rank)."""
    from .runner import RunOptions
    fields = RunOptions.__dataclass_fields__
    return RunOptions(**{k: v for k, v in vars(args).items() if k in fields})


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    try:
        return run(sys.argv[1:] if argv is None else argv, started)
    except KeyboardInterrupt:
        opt.fail(PROG, "interrupted", code=130)
    except Exception as e:  # noqa: BLE001 - the one top-level handler (exit 3)
        opt.internal_error(PROG, e)


def run(argv: list[str], started: float) -> int:
    p = parser()
    args = p.parse_args(argv)
    check_usage(p, args)
    try:
        opt.check_spec("--model", args.model)
        if args.data is not None:
            opt.check_spec("--data", args.data)
        launch = launch_of(args)
        doc = read_plan(args.plan)
        check_launch(doc, launch)
    except (PlanError, ValueError) as e:
        opt.fail(PROG, str(e))
    from .runner import RunError, launch_all, run_rank  # PyTorch from here on
    opts = options(args)
    how, rank, world = launch
    try:
        if how == "rank":
            run_rank(opts, rank, None, f"tcp://{args.master_addr}:{args.master_port}")
        elif how == "torchrun":
            run_rank(opts, rank, world)
        else:
            launch_all(opts, deadline=started + args.timeout)
    except RunError as e:
        opt.fail(PROG, str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
