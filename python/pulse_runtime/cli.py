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

Exit codes: 0 success, 1 a rank failed or timed out, 2 bad usage or a plan that does not fit
the model, 3 internal error.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import checkpoint, optim
from .runner import DTYPES, NAMES, RunError, RunOptions, launch_all, run_rank


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pulse-run", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--plan", required=True, help="a pulse.plan/v1 plan (pulse-plan plan -o)")
    p.add_argument("--model", required=True,
                   help="FILE.py:FUNCTION returning a block-list model or any traceable "
                   "nn.Module (docs/torch.md)")
    p.add_argument("--iterations", type=int, default=1, help="iterations in total (default 1)")
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
    p.add_argument("--optimizer", choices=optim.OPTIMIZERS, default="sgd")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
    p.add_argument("--momentum", type=float, default=0.0, help="SGD momentum (default 0)")
    p.add_argument("--zero", choices=("plan", "0", "1", "2", "3"), default="plan",
                   help="the ZeRO stage (default: the plan's options.memory.zero_stage; "
                   "another runs with a warning)")
    p.add_argument("--seed", type=int, default=0,
                   help="model init; iteration i trains on the batch of seed + 1 + i")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per rank")
    p.add_argument("--out", help="write rank<R>.pt per rank (and summary.json) here")
    p.add_argument("--checkpoint-dir", help="save and resume checkpoints here")
    p.add_argument("--checkpoint-every", type=int, default=1,
                   help="iterations between checkpoints (default 1; the last is always saved)")
    p.add_argument("--resume", action="store_true",
                   help="continue from the newest checkpoint in --checkpoint-dir")
    p.add_argument("--rank", type=int, help="run only this rank (otherwise launch all)")
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int)
    p.add_argument("--timeout", type=float, default=300, help="seconds before giving up")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def check_usage(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.iterations < 1:
        p.error("--iterations must be at least 1")
    if args.resume and not args.checkpoint_dir:
        p.error("--resume needs --checkpoint-dir")
    if args.checkpoint_every < 1:
        p.error("--checkpoint-every must be at least 1")
    if args.checkpoint_dir and not args.resume and checkpoint.existing(args.checkpoint_dir):
        p.error(f"{args.checkpoint_dir} already holds checkpoints: pass --resume to continue "
                f"from them, or choose another --checkpoint-dir")
    if args.rank is not None and args.master_port is None:
        p.error("--rank needs --master-port")
    if args.precision and args.dtype:
        p.error("--precision and --dtype name the same thing: give one")


def options(args: argparse.Namespace) -> RunOptions:
    """The library's options from the parsed command line (everything but --rank)."""
    fields = RunOptions.__dataclass_fields__
    return RunOptions(**{k: v for k, v in vars(args).items() if k in fields})


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    check_usage(p, args)
    opts = options(args)
    try:
        if args.rank is not None:
            run_rank(opts, args.rank, None, f"tcp://{args.master_addr}:{args.master_port}")
        elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
            run_rank(opts, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
        else:
            launch_all(opts)
    except RunError as e:
        print(f"pulse-run: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
