"""pulse-profile: measure a PyTorch model into a pulse.model/v1 profile.

    pulse-profile --model examples/small_unet.py:build --sizes 1,2,4,8 \
        -o profiles/models/small-unet-cpu.json

For every block and microbatch size it measures, on CUDA if present and else on the CPU:
forward time, backward time, parameters, the bytes autograd saves for the block's backward,
and the bytes of its main-path output, of the skip tensors it produces and of the carried
tensors it makes. The model is a block-list model or any traceable nn.Module, which the
torch.fx front end splits into layers (models.py, docs/torch.md). scripts/profile_torch.py
runs this too.

Timing: each timed run is one whole training step (all blocks' forward, the loss, one
backward through the whole autograd graph), with time stamps between blocks and no host
synchronisation inside the step: CUDA events on the GPU, the host clock on the CPU. In the
forward a stamp follows each block; in the backward a gradient hook on each block's outputs
stamps the moment its backward starts. The time between consecutive stamps belongs to the
block that ran in it, so the block times add up to the stamped step. Each size's plain step
(the same step without stamps or hooks) is timed beside it, and the blocks' shares of the
stamped step are applied to the plain step (whole-step attribution): where the GPU waits for
the host, the stamps' own host time lengthens the stamped step, and the profile's blocks
must add up to the step a run takes. The provenance gives both sums and the factor.
Every size is warmed up before anything is timed and the timed repeats visit the sizes in a
rotating order, so one-time costs and drift in the machine's load fall on no size in
particular. --concurrent N runs N-1 copies of the training step beside the measurement, as
N ranks per host contend in the run.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import statistics
import sys
from typing import Any, Optional

import torch

from . import blocklist, frozen_profile, models, profile_cli
from .options import fail
from .profile_cli import parse_args  # noqa: F401 (scripts/gpu_check_steps.py calls it here)
from .precision import Precision, precision
from .profilechecks import (FAILING_CHECKS, check_lines, method_lines, small_batch_findings,
                            step_findings, verdict)
from .steptimer import Clock, Row, account, attributed_step, plain_step, time_plain_step

PROG = profile_cli.PROG

# What each precision (precision.py's names, the planner's) measures: the regime line.
REGIMES = {
    "fp32": "pure fp32 (weights, activations and gradients in float32; no autocast)",
    "fp64": "pure fp64 (weights, activations and gradients in float64; no autocast)",
    "bf16": "pure bf16 (weights, activations and gradients in bfloat16; no autocast, no fp32 "
            "master copy)",
    "mixed": "mixed bf16 (float32 weights and gradients, the forward under torch.autocast to "
             "bfloat16; tensors between blocks counted in bfloat16, as pulse-run sends them)",
    "fp16-mixed": "mixed fp16 (float32 weights and gradients, the forward under "
                  "torch.autocast to float16; tensors between blocks counted in float16, as "
                  "pulse-run sends them; no loss scaling in the timed steps)"}

def pick_device(choice: str) -> torch.device:
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        fail(PROG, "--device cuda: this PyTorch sees no CUDA device")
    return torch.device(choice)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def device_description(device: torch.device) -> tuple[str, str]:
    if device.type == "cuda":
        return "CUDA", torch.cuda.get_device_name(device)
    return "CPU", f"{cpu_model()}, {torch.get_num_threads()} torch thread(s)"


# --- measuring ---------------------------------------------------------------------------------

class SizeRun:
    """One microbatch size: its batch, the bytes of one forward, and its timed steps."""

    def __init__(self, model: Any, size: int, seed: int, device: torch.device,
                 prec: Precision | None = None) -> None:
        prec = prec or precision("fp32", device.type)
        self.size, self.prec = size, prec
        # A model with frozen parts: the denoiser is timed on its encoded inputs (the frozen
        # forwards are measured on their own, frozen_profile.py).
        self.batch = frozen_profile.encode(model, model.make_batch(size, seed=seed + size,
                                                                   device=device))
        with prec.autocast():
            self.bytes = account(model, self.batch, prec.comm_dtype)
        self.forward: list[list[float]] = [[] for _ in model.blocks]
        self.backward: list[list[float]] = [[] for _ in model.blocks]
        self.plain: list[float] = []      # whole steps without stamps or hooks
        self.stamped: list[float] = []    # sums over blocks of the stamped steps

    def run(self, model: Any, clock: Clock, keep: bool) -> None:
        """A plain step and a stamped one, adjacent, their order alternating."""
        plain_first = len(self.plain) % 2 == 0
        with self.prec.autocast():  # the regime measured (mixed: the forward under autocast)
            plain = time_plain_step(model, self.batch, self.size, clock) if plain_first else 0.0
            fwd, bwd = attributed_step(model, self.batch, self.size, clock)
            if not plain_first:
                plain = time_plain_step(model, self.batch, self.size, clock)
        if keep:
            self.plain.append(plain)
            self.stamped.append(sum(fwd) + sum(bwd))
            for i, (f, b) in enumerate(zip(fwd, bwd)):
                self.forward[i].append(f)
                self.backward[i].append(b)

    def stamped_medians(self) -> tuple[list[float], list[float]]:
        return ([statistics.median(t) for t in self.forward],
                [statistics.median(t) for t in self.backward])

    def rows(self) -> list[Row]:
        """Per block: its bytes and its share of the median plain step (attribute()),
        rounded as the profile writes them (the checks then agree with the file to the
        last digit)."""
        fwd, bwd, _ = attribute(*self.stamped_medians(), statistics.median(self.plain))
        return [dict(self.bytes[i], forward_s=round_s(fwd[i]), backward_s=round_s(bwd[i]))
                for i in range(len(self.bytes))]

    def summary(self) -> dict:
        """The whole step (median plain step), the blocks' sum as written, and the stamped
        blocks' sum (of the per-block medians) with the factor that maps it to the whole
        step."""
        blocks = sum(r["forward_s"] + r["backward_s"] for r in self.rows())
        whole = statistics.median(self.plain)
        fwd, bwd = self.stamped_medians()
        stamped = sum(fwd) + sum(bwd)
        return {"microbatch": self.size, "whole_step_s": whole, "blocks_sum_s": blocks,
                "stamped_blocks_sum_s": stamped,
                "stamped_step_s": statistics.median(self.stamped),
                "scale": whole / stamped, "stamp_overhead": stamped / whole - 1.0,
                "deviation": blocks / whole - 1.0}


def attribute(forward: list[float], backward: list[float],
              whole: float) -> tuple[list[float], list[float], float]:
    """Whole-step attribution: the plain step's time shared out over the blocks in
    proportion to their stamped times. The stamps and hooks cost host time; where the GPU
    waits for the host, that time lengthens the stamped step (the SD2 UNet on an H200: +12%
    at microbatch 1, +8% at 2, within 1.2% from 4 up), and a profile whose blocks add up
    to more than the step a run takes predicts a slower run. Returns the shares and the
    factor (plain step over stamped sum)."""
    stamped = sum(forward) + sum(backward)
    if not stamped > 0 or not whole > 0:
        raise ValueError(f"attribute: no time to share (stamped {stamped}, whole {whole})")
    scale = whole / stamped
    return [f * scale for f in forward], [b * scale for b in backward], scale


def rotation(sizes: list[int], k: int) -> list[int]:
    """The order in which repeat k visits the sizes: rotated by one each repeat, so every
    size comes first, last and in between equally often."""
    k %= len(sizes)
    return sizes[k:] + sizes[:k]


def measure_all(model: Any, args: argparse.Namespace, device: torch.device,
                clock: Clock) -> dict[int, SizeRun]:
    """Warm every size up, then time the sizes interleaved."""
    prec = precision(args.precision, device.type)
    runs = {b: SizeRun(model, b, args.seed, device, prec) for b in args.sizes}
    for _ in range(max(args.warmup, 1)):
        for b in args.sizes:
            runs[b].run(model, clock, keep=False)
    for k in range(args.repeats):
        for b in rotation(args.sizes, k):
            runs[b].run(model, clock, keep=True)
    for b in args.sizes:
        s = runs[b].summary()
        print(f"pulse-profile: microbatch {b}: whole step {s['whole_step_s']:.4f} s, stamped "
              f"blocks {s['stamped_blocks_sum_s']:.4f} s ({100 * s['stamp_overhead']:+.1f}%), "
              f"blocks as written {s['blocks_sum_s']:.4f} s", file=sys.stderr)
    return runs


# --- concurrent load ---------------------------------------------------------------------------

def _contender(model_spec: str, precision_name: str, device_name: str, threads: int, seed: int,
               sizes: list[int], ready: Any, stop: Any) -> None:
    """A rank's worth of load: the whole training step, over and over, until told to stop."""
    blocklist.keep_freed_memory()
    torch.set_num_threads(threads)
    device = torch.device(device_name)
    prec = precision(precision_name, device.type)
    model = models.load(model_spec, seed=seed, dtype=prec.param_dtype).to(device)
    model.train()
    batches = [frozen_profile.encode(model, model.make_batch(b, seed=seed + b, device=device))
               for b in sizes]
    ready.set()
    k = 0
    while not stop.is_set():
        with prec.autocast():
            plain_step(model, batches[k % len(sizes)], sizes[k % len(sizes)])
        model.zero_grad(set_to_none=True)
        k += 1


class Contention:
    """N-1 processes running the training step while the profiler measures."""

    def __init__(self, args: argparse.Namespace, device: torch.device) -> None:
        self.procs: list[Any] = []
        self.stop: Any = None
        if args.concurrent <= 1:
            return
        ctx = multiprocessing.get_context("spawn")
        self.stop = ctx.Event()
        readies = []
        for n in range(args.concurrent - 1):
            ready = ctx.Event()
            proc = ctx.Process(target=_contender, daemon=True,
                               args=(args.model, args.precision, str(device), args.threads,
                                     args.seed + 1000 * (n + 1), args.sizes, ready, self.stop))
            proc.start()
            self.procs.append(proc)
            readies.append(ready)
        for ready, proc in zip(readies, self.procs):
            while not ready.wait(1.0):
                if not proc.is_alive():
                    self.close()
                    raise SystemExit(f"pulse-profile: a --concurrent copy exited "
                                     f"({proc.exitcode}) before it started")

    def close(self) -> None:
        if self.stop is not None:
            self.stop.set()
        for proc in self.procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        self.procs = []


# --- the profile -------------------------------------------------------------------------------

def exact_per_sample(values_by_size: dict[int, int], what: str) -> int:
    """Bytes of a tensor per sample: must divide exactly and agree at every size."""
    per = {v // b for b, v in values_by_size.items()}
    if len(per) != 1 or any(v % b for b, v in values_by_size.items()):
        raise SystemExit(f"pulse-profile: {what} is not proportional to the microbatch "
                         f"size: {values_by_size}")
    return per.pop()


def round_s(x: float) -> float:
    return max(round(x, 9), 1e-9)  # nanosecond quantum, like the planner; never 0


def layer_entry(model: Any, i: int, per: list[Row], sizes: list[int], device_type: str,
                kind: str) -> dict:
    name = model.block_names[i]
    return {
        "name": name,
        "kind": kind,
        "params": sum(p.numel() for _, p in blocklist.block_named_parameters(model, i)),
        "forward_s": {device_type: [round_s(r["forward_s"]) for r in per]},
        "backward_s": {device_type: [round_s(r["backward_s"]) for r in per]},
        "activation_bytes_per_sample": max(math.ceil(r["saved"] / b)
                                           for r, b in zip(per, sizes)),
        "output_bytes_per_sample": exact_per_sample(
            {b: r["output"] for r, b in zip(per, sizes)}, f"{name} output"),
        **stated_shape(model, i),
    }


def stated_shape(model: Any, i: int) -> dict:
    """What the model states of block i beside the measurement (docs/torch.md): its forward
    FLOPs per sample (`block_flops`) and what a sequence-parallel layout splits of it
    (`block_sequence`: tokens, heads, head_dim, attention_flops_per_sample), when given."""
    out: dict = {}
    flops = getattr(model, "block_flops", None)
    if flops is not None and flops[i] is not None:
        out["forward_flops_per_sample"] = flops[i]
    sequence = getattr(model, "block_sequence", None)
    if sequence is not None and sequence[i] is not None:
        out["sequence"] = {k: sequence[i][k] for k in ("tokens", "heads", "head_dim",
                                                       "attention_flops_per_sample")}
    return out


def build_profile(model: Any, by_size: dict[int, list[Row]], args: argparse.Namespace,
                  device_type: str, provenance_obj: dict, dtype_label: str) -> dict:
    sizes = args.sizes
    layers, skip_bytes, carried_bytes = [], {}, {}
    kinds = getattr(model, "block_kinds", ["block"] * len(model.blocks))
    for i in range(len(model.blocks)):
        per = [by_size[b][i] for b in sizes]
        layers.append(layer_entry(model, i, per, sizes, device_type, kinds[i]))
        for key, target in (("skips", skip_bytes), ("carried", carried_bytes)):
            for tname in per[0][key]:
                target[tname] = exact_per_sample(
                    {b: r[key][tname] for r, b in zip(per, sizes)}, f"{key} {tname}")
    return {
        "schema": "pulse.model/v1",
        "name": args.name,
        "description": f"{args.model} measured block by block with PyTorch.",
        "provenance": provenance_obj,
        "dtype": dtype_label,
        "timing": {"microbatch_sizes": sizes, "device_types": [device_type]},
        "layers": layers,
        "skips": [{"name": s["name"], "producer": s["producer"], "consumer": s["consumer"],
                   "bytes_per_sample": skip_bytes[s["name"]]} for s in model.skips],
        "carried": [{"name": c["name"], "producer": c["producer"],
                     "bytes_per_sample": carried_bytes[c["name"]],
                     "needs_gradient": bool(c["needs_gradient"])} for c in model.carried],
    }


REGIME_LINE = "Regime"


def regime(precision_name: str) -> str:
    return (f"{REGIME_LINE}: {REGIMES[precision_name]}, precision {precision_name}; eager (the "
            f"profiler compiles nothing: no torch.compile, no CUDA graphs).")


def clock_name(args: argparse.Namespace, device_desc: tuple[str, str]) -> str:
    if device_desc[0] == "CUDA":
        return "CUDA events"
    return ("the profiling thread's CPU time (--clock thread)" if args.clock == "thread"
            else "the host's wall clock")


def provenance(args: argparse.Namespace, device_desc: tuple[str, str], summaries: list[dict],
               findings: tuple[list[str], ...]) -> dict:
    alone = ("alone" if args.concurrent == 1 else
             f"with {args.concurrent - 1} other process(es) running the same training step "
             f"(--concurrent {args.concurrent})")
    return {
        "method": "measured",
        "source": (f"pulse-profile --model {args.model} on host "
                   f"{platform.node()} ({device_desc[0]}: {device_desc[1]}), PyTorch "
                   f"{torch.__version__}, Python {platform.python_version()}, dtype "
                   f"precision {args.precision}, seed {args.seed}; every size warmed up with "
                   f"{max(args.warmup, 1)} step(s), then the median of {args.repeats} "
                   f"stamped steps per size (each beside a plain step) with the sizes "
                   f"interleaved, timed on {clock_name(args, device_desc)}; measured {alone}"),
        "generator": "pulse-profile (python/pulse_runtime/profiler.py)",
        "assumptions": [regime(args.precision)] + method_lines()
        + check_lines(args, summaries, findings),
    }


# Findings printed before the verdict without --verbose (every one is in the provenance).
SHOWN_FINDINGS = 3


def print_findings(findings: dict[str, list[str]], verbose: bool) -> None:
    """The failing checks' findings first, the small-batch check's only when verbose."""
    lines = [f"pulse-profile: {check} check: {line}"
             for check in FAILING_CHECKS + ("small-batch",) for line in findings[check]
             if verbose or check != "small-batch"]
    shown = lines if verbose else lines[:SHOWN_FINDINGS]
    for line in shown:
        print(line, file=sys.stderr)
    if len(shown) < len(lines):
        print(f"pulse-profile: ... and {len(lines) - len(shown)} more (--verbose lists them)",
              file=sys.stderr)


def run_profile(model: Any, args: argparse.Namespace,
                device: torch.device) -> tuple[dict, list[dict], dict[str, list[str]]]:
    """Measure ``model`` (already on ``device``, in train mode) as ``args`` say. Returns the
    profile, the per-size whole-step summaries and the findings by check ("small-batch" and
    FAILING_CHECKS)."""
    kind, desc = device_description(device)
    device_type = args.device_type or (desc if kind == "CUDA" else "CPU")
    runs = measure_all(model, args, device, Clock(device, args.clock))
    by_size = {b: run.rows() for b, run in runs.items()}
    summaries = [runs[b].summary() for b in args.sizes]
    per_sample, inversions = small_batch_findings(model, by_size, args.sizes,
                                                  args.max_small_batch_ratio, args.max_inversion)
    steps = step_findings(summaries, "deviation", args.max_step_deviation)
    stamps = step_findings(summaries, "stamp_overhead", args.max_stamp_overhead)
    findings = {"small-batch": per_sample, "inversion": inversions, "step-sum": steps,
                "stamp-overhead": stamps}
    print_findings(findings, getattr(args, "verbose", False))
    prov = provenance(args, (kind, desc), summaries, (per_sample, inversions, steps, stamps))
    profile = build_profile(model, by_size, args, device_type, prov, args.precision)
    frozen = frozen_profile.measure(model, args.sizes, args.seed, device, args.warmup,
                                    args.repeats, Clock(device, args.clock), device_type)
    if frozen:
        profile["frozen"] = frozen
    return profile, summaries, findings


def write_atomically(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # appears complete or not at all


def main(argv: Optional[list[str]] = None) -> None:
    """pulse-profile (profile_cli.main: options checked, one line on any refusal)."""
    profile_cli.main(argv)


def measure(args: argparse.Namespace) -> None:
    """Measures as the checked options say (profile_cli.parse_args) and writes the profile."""
    blocklist.keep_freed_memory()
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    try:
        prec = precision(args.precision, device.type)
        model = models.load(args.model, seed=args.seed, dtype=prec.param_dtype).to(device)
    except (ValueError, TypeError, OSError, SyntaxError, ImportError) as e:
        fail(PROG, f"--model {args.model}: {e}")
    model.train()
    if args.name is None:
        stem = os.path.splitext(os.path.basename(args.model.rpartition(":")[0]))[0]
        args.name = f"{stem.replace('_', '-')}-{device.type}"
    contention = Contention(args, device)
    try:
        profile, _, findings = run_profile(model, args, device)
    finally:
        contention.close()
    count = sum(len(f) for f in findings.values())
    if count and args.strict:
        raise SystemExit(f"pulse-profile: {count} finding(s) over --max-small-batch-ratio "
                         f"{args.max_small_batch_ratio:g}, --max-inversion "
                         f"{args.max_inversion:g}, --max-step-deviation "
                         f"{args.max_step_deviation:g} or --max-stamp-overhead "
                         f"{args.max_stamp_overhead:g}; nothing written (--strict)")
    line, write = verdict({c: findings[c] for c in FAILING_CHECKS}, len(findings["small-batch"]),
                          cuda=device.type == "cuda", thread_clock=args.clock == "thread",
                          keep=args.keep_failed)
    if not write:
        raise SystemExit(line)
    text = json.dumps(profile, indent=2) + "\n"
    if args.output:
        write_atomically(args.output, text)
    else:
        sys.stdout.write(text)
    print(line, file=sys.stderr)


if __name__ == "__main__":
    main()
