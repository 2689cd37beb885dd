"""What the command lines accept, checked before PyTorch is imported or any process started:
the vocabularies (precision names, optimizers), bounded option types for argparse, the
parser whose every refusal is one line and exit 2, and how many processes one host starts.

pulse-run (cli.py), pulse-profile (profile_cli.py) and the torchtitan export use them; an
option outside its range is refused by the parser with one line naming it and the range.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Callable, NoReturn

# --- vocabularies (precision.py and optim.py use these) -----------------------------------

# The precision names (the planner's, plan --precision): name -> (parameter dtype, autocast
# dtype or None), as torch dtype names.
PRECISIONS = {"fp32": ("float32", None), "fp64": ("float64", None),
              "bf16": ("bfloat16", None), "mixed": ("float32", "bfloat16"),
              "fp16-mixed": ("float32", "float16")}
ALIASES = {"bf16-mixed": "mixed", "float32": "fp32", "float64": "fp64", "bfloat16": "mixed",
           "float16": "fp16-mixed"}
NAMES = tuple(PRECISIONS) + ("bf16-mixed",)
DTYPES = ("float32", "float64", "bfloat16", "float16")  # --dtype, the older spelling
DEFAULT_PLAN_PRECISION = "mixed"  # a plan without options.memory.precision (the planner's)
OPTIMIZERS = ("sgd", "adam")


def canonical(name: str) -> str:
    """The precision `name` (or an alias) stands for; ValueError naming the choices."""
    name = ALIASES.get(name, name)
    if name not in PRECISIONS:
        raise ValueError(f"precision {name!r}: expected one of {list(NAMES)} (or --dtype "
                         f"{'/'.join(DTYPES)})")
    return name


# --- ranges -------------------------------------------------------------------------------

MAX_ITERATIONS = (1 << 31) - 1
# Seeds: torch.manual_seed takes integers below 2^64; the runtime seeds batch i with
# seed + 1 + i, so seeds stop well below.
MAX_SEED = 1 << 62
# Seconds: the plan's own limit on any time (kMaxSeconds in include/pulse/base/limits.hpp,
# 11.6 days); beyond it datetime.timedelta and the process groups' timeouts overflow.
MAX_SECONDS = 1e6
# Processes one host starts per usable core: a rank trains on --threads cores, so more only
# queue behind each other (and each holds PyTorch and the model, a few hundred MB).
RANKS_PER_CORE = 8


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def host_process_limit() -> int:
    """The most processes pulse-run (or pulse-profile --concurrent) starts on this host."""
    return max(8, RANKS_PER_CORE * usable_cores())


def integer(low: int, high: int | Callable[[], int]) -> Callable[[str], int]:
    """An argparse type: an integer from `low` to `high` (a number, or a function giving it
    when the option is read)."""
    def parse(text: str) -> int:
        top = high() if callable(high) else high
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {top}, got "
                                             f"{text[:40]!r}") from None
        if not low <= value <= top:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {top}, got "
                                             f"{value}")
        return value
    return parse


def number(low: float, high: float = math.inf, low_open: bool = False,
           high_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number from `low` to `high` (an open end excluded)."""
    span = f"{'>' if low_open else '>='} {low:g}" + (
        "" if high == math.inf else f" and {'<' if high_open else '<='} {high:g}")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (low < value if low_open else low <= value) and \
            (value < high if high_open else value <= high)
        if not ok:
            raise argparse.ArgumentTypeError(f"expected a finite number {span}, got "
                                             f"{text[:40]!r}")
        return value
    return parse


# Ranks: the planner's limit (kMaxRanks, plan_doc.MAX_RANKS).
MAX_RANK = (1 << 20) - 1

# pulse-run's options with a range, by RunOptions field: the parser's types, and what
# check_run_options holds a library caller's RunOptions to.
RUN_RANGES: dict[str, Callable[[str], object]] = {
    "iterations": integer(1, MAX_ITERATIONS),
    "checkpoint_every": integer(1, MAX_ITERATIONS),
    "seed": integer(0, MAX_SEED),
    "threads": integer(1, usable_cores),
    "timeout": number(0, MAX_SECONDS, low_open=True),
    "lr": number(0),
    "momentum": number(0, 1),
}


def check_run_options(values: dict[str, object]) -> None:
    """Each value of RUN_RANGES's fields in its range; ValueError naming the option."""
    for key, parse in RUN_RANGES.items():
        if key in values:
            try:
                parse(repr(values[key]))
            except argparse.ArgumentTypeError as e:
                raise ValueError(f"--{key.replace('_', '-')}: {e}") from None


def check_local_world(world: int, where: str) -> None:
    """At most host_process_limit() ranks on this host; ValueError saying so."""
    limit = host_process_limit()
    if world > limit:
        raise ValueError(f"{where}: the plan has {world} ranks; pulse-run starts at most "
                         f"{limit} processes on one host ({RANKS_PER_CORE} per usable core, "
                         f"{usable_cores()} here, at least 8): run it across hosts with "
                         f"torchrun")


def check_spec(option: str, spec: str) -> None:
    """A FILE.py:FUNCTION option names a Python file that exists (what is in it is checked
    when it is imported); ValueError naming the option otherwise."""
    path, sep, func = spec.rpartition(":")
    if not sep or not path.endswith(".py") or not func:
        raise ValueError(f"{option} {spec[:80]!r}: expected FILE.py:FUNCTION")
    if not os.path.isfile(path):
        raise ValueError(f"{option} {spec[:80]!r}: no file {path[:80]!r}")


def name(value: str) -> str:
    """An argparse type: a non-empty string without control characters."""
    if not value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise argparse.ArgumentTypeError(f"expected a non-empty name without control "
                                         f"characters, got {value[:40]!r}")
    return value


def one_line(message: str) -> str:
    """`message` on one line: control characters (a newline from a file name or a plan's
    string) shown escaped."""
    return "".join(c if c >= " " and c != "\x7f" else repr(c)[1:-1] for c in message)


class Parser(argparse.ArgumentParser):
    """argparse, but a refusal is one line on stderr (no usage block) and exit 2, opening with
    `tag` (default: the program's name)."""

    def __init__(self, *args: object, tag: str | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.tag = tag or self.prog

    def error(self, message: str) -> NoReturn:
        fail(self.tag, f"{message} ({self.prog} --help lists the options)")


def fail(prog: str, message: str, code: int = 2) -> NoReturn:
    print(f"{prog}: {one_line(message)}", file=sys.stderr, flush=True)
    sys.exit(code)


def env_int(name: str, low: int, high: int) -> int:
    """An integer from the environment (torchrun's RANK, WORLD_SIZE, LOCAL_RANK); ValueError
    naming it otherwise."""
    raw = os.environ.get(name, "")
    try:
        value = int(raw, 10)
    except ValueError:
        raise ValueError(f"environment {name}={raw[:40]!r}: expected an integer from {low} to "
                         f"{high}") from None
    if not low <= value <= high:
        raise ValueError(f"environment {name}={value}: expected an integer from {low} to {high}")
    return value


def internal_error(prog: str, e: BaseException) -> NoReturn:
    """The top-level handler's one line for an exception no check expected (exit 3);
    PULSE_TRACEBACK=1 re-raises it for the traceback."""
    if os.environ.get("PULSE_TRACEBACK"):
        raise e
    where = ""
    tb = e.__traceback__
    while tb is not None:
        where = f" at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    fail(prog, f"internal error: {type(e).__name__}: {str(e)[:300]}{where} (PULSE_TRACEBACK=1 "
         f"shows the traceback)", code=3)
