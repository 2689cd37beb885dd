"""pulse-profile's command line: the options, each held to its range, checked before PyTorch is
imported; profiler.measure does the rest (profiler.py's docstring says what is measured).

Every refusal is one line and exit 2 (a measurement --strict refuses is exit 1, an internal
error exit 3 with one line; PULSE_TRACEBACK=1 shows its traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

from . import options as opt
from .options import DTYPES, NAMES, Parser, canonical

PROG = "pulse-profile"
# Microbatch sizes: the planner's limit on a profile's sizes (kMaxMicrobatchSize) and count.
MAX_SIZE = 1 << 20
MAX_SIZES = 64
MAX_STEPS = 10000  # --warmup and --repeats


def sizes(text: str) -> list[int]:
    """An argparse type: strictly increasing microbatch sizes, comma-separated."""
    parse = opt.integer(1, MAX_SIZE)
    parts = text.split(",")
    if len(parts) > MAX_SIZES:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_SIZES} sizes, got {len(parts)}")
    values = [parse(part.strip()) for part in parts]
    if values != sorted(set(values)):
        raise argparse.ArgumentTypeError(f"expected strictly increasing sizes, got {text[:60]!r}")
    return values


def parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="pulse-profile: measure a PyTorch model into a "
               "pulse.model/v1 profile.")
    p.add_argument("--model", required=True, help="FILE.py:FUNCTION that builds the model")
    p.add_argument("--sizes", type=sizes, default=[1, 2, 4, 8],
                   help="microbatch sizes, increasing (1 to 2^20, at most 64 of them)")
    p.add_argument("--warmup", type=opt.integer(0, MAX_STEPS), default=2,
                   help="untimed steps at every size before any timing")
    p.add_argument("--repeats", type=opt.integer(1, MAX_STEPS), default=5,
                   help="timed steps per size, sizes interleaved; the median is kept")
    p.add_argument("--concurrent", type=opt.integer(1, opt.host_process_limit), default=1,
                   metavar="N",
                   help="measure while N-1 other processes run the same training step (N ranks "
                   "per host; default 1: alone; at most 8 per usable core)")
    p.add_argument("--max-small-batch-ratio", type=opt.number(1), default=1.2,
                   help="flag a block whose per-sample time at a microbatch size exceeds this "
                   "times its per-sample time at the next larger size, beyond what the sum "
                   "over all blocks shows between those sizes (default 1.2)")
    p.add_argument("--max-step-deviation", type=opt.number(0, 1, True, True), default=0.05,
                   help="flag a size whose blocks' summed time differs from the plain whole "
                   "step's by more than this fraction (default 0.05)")
    p.add_argument("--max-stamp-overhead", type=opt.number(0, low_open=True), default=0.25,
                   help="flag a size whose stamped step exceeds the plain step by more than "
                   "this fraction: the block times then rest mostly on the attribution "
                   "(default 0.25)")
    p.add_argument("--strict", action="store_true",
                   help="refuse (exit 1, write nothing) instead of flagging a block or a size")
    p.add_argument("--precision", choices=NAMES,
                   help="the training regime measured, named as plan --precision and pulse-run "
                   "name it (default fp32)")
    p.add_argument("--dtype", choices=DTYPES,
                   help="the older spelling, as pulse-run reads it: float32 = fp32, float64 = "
                   "fp64, bfloat16 = mixed, float16 = fp16-mixed (pure bf16: --precision bf16)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--device-type", type=opt.name, help="device type name in the profile "
                   "(default: CPU, or the CUDA device name)")
    p.add_argument("--clock", choices=["auto", "thread"], default="auto",
                   help="auto: CUDA events on a GPU, the wall clock on the CPU; thread: the "
                   "profiling thread's CPU time (CPU only, one thread: steadier on a loaded "
                   "machine, blind to waiting)")
    p.add_argument("--threads", type=opt.integer(1, opt.usable_cores), default=1,
                   help="torch CPU threads (default 1: one core per pipeline rank; at most "
                   "this host's usable cores)")
    p.add_argument("--seed", type=opt.integer(0, opt.MAX_SEED), default=0)
    p.add_argument("--name", type=opt.name,
                   help="profile name (default: from the model file name)")
    p.add_argument("-o", "--output", help="write here instead of stdout")
    return p


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = parser()
    args = p.parse_args(argv)
    if args.precision and args.dtype:
        p.error("--precision and --dtype name the same thing: give one")
    args.precision = canonical(args.precision or args.dtype or "fp32")
    if args.clock == "thread" and (args.device == "cuda" or args.threads != 1):
        p.error("--clock thread needs the CPU and --threads 1")
    try:
        opt.check_spec("--model", args.model)
    except ValueError as e:
        p.error(str(e))
    if args.output is not None:
        folder = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(folder) or os.path.isdir(args.output):
            p.error(f"-o {args.output}: expected a file in an existing folder")
    return args


def main(argv: Optional[list[str]] = None) -> None:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        from .profiler import measure  # PyTorch from here on
        measure(args)
    except KeyboardInterrupt:
        opt.fail(PROG, "interrupted", code=130)
    except Exception as e:  # noqa: BLE001 - the one top-level handler (exit 3)
        opt.internal_error(PROG, e)


if __name__ == "__main__":
    main()
