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

--dtype bfloat16 or float16 trains in mixed precision (float32 master weights, autocast,
values between stages in the low precision, loss scaling for float16). --data FILE.py:FUNC
takes the batches from a function of yours (docs/torch.md). The summary compares measured
with predicted time, per iteration and per stage, and warns beyond 20%.

Exit codes: 0 success, 1 a rank failed or timed out, 2 bad usage or a plan that does not fit
the model, 3 internal error.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import checkpoint, optim
from .runner import DTYPES, RunError, RunOptions, launch_all, run_rank


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pulse-run", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--plan", required=True, help="a pulse.plan/v1 plan (pulse-plan plan -o)")
    p.add_argument("--model", required=True,
                   help="FILE.py:FUNCTION returning a block-list model or any traceable "
                   "nn.Module (docs/torch.md)")
    p.add_argument("--iterations", type=int, default=1, help="iterations in total (default 1)")
    p.add_argument("--dtype", choices=DTYPES, default="float32",
                   help="float32/float64: the model in that dtype; bfloat16/float16: mixed "
                   "precision (default float32)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="cuda: NCCL, one rank per GPU; cpu: gloo (default: CUDA if present)")
    p.add_argument("--data", help="FILE.py:FUNCTION yielding the global batches (called as "
                   "FUNCTION(global_batch=, seed=, device=, model=); default: the model's "
                   "make_batch)")
    p.add_argument("--optimizer", choices=optim.OPTIMIZERS, default="sgd")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
    p.add_argument("--momentum", type=float, default=0.0, help="SGD momentum (default 0)")
    p.add_argument("--zero", choices=("plan", "0", "1"), default="plan",
                   help="shard optimizer state over the replicas (ZeRO-1); default: as the "
                   "plan's options.memory.zero_stage says")
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
