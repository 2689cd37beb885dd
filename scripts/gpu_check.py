#!/usr/bin/env python3
"""The GPU check: the SD2 UNet on one GPU, measured three ways, in under three minutes.

    scripts/gpu_check.sh OUT                  # one CUDA GPU, bf16, eager
    scripts/gpu_check.sh OUT --dry-run        # the same steps at tiny sizes on the CPU

Steps, each in a process of its own (scripts/gpu_check_steps.py), so that the GPU memory a
step held is the driver's again when the next one starts; this process never imports
torch. A step that fails or overruns is recorded, and the next step runs.

  whole-<px>     the whole forward + backward step of examples/sd2_unet.py at 512 and 768
                 px, microbatch 1..32: CUDA events around a plain step (no per-block marks),
                 warm-ups, then the median of the timed steps; each size's own peak memory.
                 A size that runs out of memory is recorded, and the larger ones skipped.
  profile-<px>   pulse-profile's block profile (python/pulse_runtime/profiler.py) at the
                 sizes whose whole step ran, in the pulse.model/v1 format the planner
                 reads; out of memory: again without the largest size, in a fresh process.
  pulse-run-<dtype>  a one-stage (pp 1) plan of SD2 at 512 px run by pulse-run on this GPU
                 (the plans are checked in: scripts/gpu_check_data/), in bfloat16 (mixed
                 precision, where this pulse-run offers it) and in float32.

Writes four files to OUT: gpu_check.json (every measurement, the environment, errors;
rewritten after each step, so a killed run keeps what it measured), gpu_check.log (the
steps' output too), and one profile per image size
(sd2-unet-<px>.<device>-<dtype>.profile.json). Prints a table at the end. docs/fidelity.md
("The GPU check") says how to read the results.

scripts/gpu_check_plans.py regenerates the checked-in plans.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "scripts", "gpu_check_data")
STEPS_SCRIPT = os.path.join(ROOT, "scripts", "gpu_check_steps.py")
MODEL_FILE = "examples/sd2_unet.py"  # relative to ROOT, where every command runs
# (variant, dtype) -> the checked-in one-stage plan; scripts/gpu_check_plans.py writes them.
PLANS = {("full", "bfloat16"): "sd2-unet-512-pp1-bf16.plan.json",
         ("full", "float32"): "sd2-unet-512-pp1-fp32.plan.json",
         ("tiny", "float32"): "sd2-tiny-pp1-fp32.plan.json"}
FACTORY = {"full": "build", "tiny": "build_tiny"}  # the plans' model: 512 px / the tiny one
PROGRESS = re.compile(r"pulse-run: iteration (\d+)/(\d+): loss (\S+), ([0-9.]+) s")
# Each step's share of --budget-s: the most it may take (it is killed then). Expected on an
# H200 (docs/fidelity.md): about 20 s per whole-step size set, 17 s and 28 s for the
# profiles, 20-30 s per pulse-run, each with a few seconds of process start.
SHARE = {"whole": 0.2, "profile": 0.25, "pulse-run": 0.3}
START_S = 12.0     # process start, torch import, CUDA context, model build: not profiling
MIN_STEP_S = 15.0  # a step with less time left is skipped


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="directory for the results (created)")
    p.add_argument("--dry-run", action="store_true",
                   help="tiny model (a tenth of the width) at 64 and 128 px on the CPU, "
                   "sizes 1,2, few repeats: checks the script, measures nothing of interest")
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda (cpu with --dry-run)")
    p.add_argument("--dtype", choices=["bfloat16", "float32"],
                   help="default: bfloat16 (float32 with --dry-run)")
    p.add_argument("--images", help="image sizes in px, multiples of 64 (default 512,768; "
                   "64,128 with --dry-run)")
    p.add_argument("--sizes", help="microbatch sizes (default 1,2,4,8,16,32; 1,2 with --dry-run)")
    p.add_argument("--device-type", help="device type the profiles name (default: the CUDA "
                   "device name, or CPU), to match a cluster profile")
    p.add_argument("--warmup", type=int, default=2, help="untimed whole steps per size")
    p.add_argument("--repeats", type=int, default=5, help="timed whole steps per size")
    p.add_argument("--profile-warmup", type=int, default=1)
    p.add_argument("--profile-repeats", type=int, default=5)
    p.add_argument("--iterations", type=int, default=5,
                   help="pulse-run iterations (the first is a warm-up)")
    p.add_argument("--budget-s", type=float,
                   help="wall-clock seconds for all steps (default 170; 270 with --dry-run); "
                   "a step that would overrun leaves out its largest sizes and says so")
    p.add_argument("--skip", default="", help="comma-separated steps to skip: whole, "
                   "profile, pulse-run")
    args = p.parse_args(argv)
    dry = args.dry_run
    args.device = args.device or ("cpu" if dry else "cuda")
    args.dtype = args.dtype or ("float32" if dry else "bfloat16")
    args.images = [int(x) for x in (args.images or ("64,128" if dry else "512,768")).split(",")]
    args.sizes = [int(x) for x in (args.sizes or ("1,2" if dry else "1,2,4,8,16,32")).split(",")]
    args.budget_s = args.budget_s or (270.0 if dry else 170.0)
    args.width = 0.1 if dry else 1.0
    args.variant = "tiny" if dry else "full"
    if dry:
        args.warmup, args.repeats = min(args.warmup, 1), min(args.repeats, 2)
        args.profile_repeats, args.iterations = min(args.profile_repeats, 2), 2
    args.skip = set(filter(None, args.skip.split(",")))
    return args


def write_atomically(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # appears complete or not at all


class Check:
    """The run's state: options, the clock, the results (rewritten after every step), the
    log, and the processes the steps run in."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        os.makedirs(args.out, exist_ok=True)
        self.log_file = open(os.path.join(args.out, "gpu_check.log"), "a", buffering=1)
        self.tmp = tempfile.TemporaryDirectory(prefix="gpu_check.")  # requests, not in OUT
        self.start = time.monotonic()
        self.deadline = self.start + args.budget_s
        self.results: dict[str, Any] = {"schema": "pulse.gpu-check/v2", "options": {
            k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()},
            "environment": {}, "steps": {}}

    def close(self) -> None:
        self.log_file.close()
        self.tmp.cleanup()

    def log(self, text: str) -> None:
        line = f"[{time.monotonic() - self.start:7.1f} s] {text}"
        print(line, flush=True)
        self.log_file.write(line + "\n")

    def save(self) -> None:
        write_atomically(os.path.join(self.args.out, "gpu_check.json"),
                         json.dumps(self.results, indent=2) + "\n")

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def share_s(self, kind: str) -> float:
        """A step's time: its share of the budget, or what is left."""
        return min(SHARE[kind] * self.args.budget_s, self.left_s())

    def child(self, request: dict, timeout_s: float) -> tuple[dict, str]:
        """Run one step in a fresh process (gpu_check_steps.py); its result and output.
        Past timeout_s the process (and anything it started) is killed."""
        n = len(os.listdir(self.tmp.name))
        req, res, out = (os.path.join(self.tmp.name, f"{n}.{x}")
                         for x in ("request.json", "result.json", "output.txt"))
        with open(req, "w") as f:
            json.dump(dict(request, options=self.results["options"]), f)
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo",
                   PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"),
                                               os.environ.get("PYTHONPATH", "")]))
        with open(out, "w") as f:
            proc = subprocess.Popen([sys.executable, STEPS_SCRIPT, req, res], cwd=ROOT,
                                    env=env, stdout=f, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                rc, killed = proc.wait(timeout=max(timeout_s, 1)), False
            except subprocess.TimeoutExpired:
                rc, killed = None, True
            finally:  # past its time, or this process told to stop: the step goes too
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)  # its own session: all it started
                    rc = proc.wait()
        with open(out, errors="replace") as f:
            text = f.read()
        for line in text.splitlines():
            self.log(f"  | {line}")
        if os.path.exists(res):
            with open(res) as f:
                return json.load(f), text
        why = (f"killed after {timeout_s:.0f} s (its share of the budget)" if killed
               else f"its process exited {rc} without a result")
        return {"error": why, "output_tail": text[-3000:]}, text

    def step(self, name: str, fn: Callable[[], dict]) -> None:
        """Run one step; whatever fails is recorded, and the run goes on."""
        t0 = time.monotonic()
        self.log(f"step {name}: start ({self.left_s():.0f} s of the budget left)")
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001: one failing step must not lose the others
            result = {"error": f"{type(e).__name__}: {e}"[:2000],
                      "traceback": traceback.format_exc()[-4000:]}
        if "environment" in result:
            env = result.pop("environment")
            self.results["environment"] = self.results["environment"] or env
        if "error" in result:
            self.log(f"step {name}: FAILED: {result['error'][:300]}")
        result["wall_s"] = round(time.monotonic() - t0, 3)
        self.results["steps"][name] = result
        self.save()
        self.log(f"step {name}: done in {result['wall_s']:.1f} s")


def gib(n: Any) -> float:
    """Bytes in GiB for the table; nan where no number was recorded (no GPU, or a torch
    without the call)."""
    return n / 2**30 if isinstance(n, (int, float)) else float("nan")


def git_commit() -> Any:
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        return f"unavailable: {e}"
    return proc.stdout.strip() or None


# --- the steps ---------------------------------------------------------------------------------

def whole_step(c: Check, image: int) -> dict:
    """The sizes' time runs to 2 s before the process is killed: the process start, however
    long, comes out of it (time.time(): one clock for both processes)."""
    share = c.share_s("whole")
    result, _ = c.child({"step": "whole", "image": image,
                         "deadline_unix": time.time() + share - 2}, share)
    return result


def profile_sizes(c: Check, image: int, budget_s: float) -> tuple[list[int], list[str]]:
    """The sizes whose whole step ran, largest dropped while the profile's estimated time
    (warm-ups and repeats of a plain and a stamped step, plus the byte count) overruns."""
    whole = c.results["steps"].get(f"whole-{image}", {}).get("sizes", [])
    step_s = {r["microbatch"]: r["step_s"] for r in whole if "step_s" in r}
    sizes = [b for b in c.args.sizes if b in step_s] if step_s else list(c.args.sizes)
    notes = [f"microbatch {b}: no whole step measured" for b in c.args.sizes if b not in sizes]
    runs = 2 * (max(c.args.profile_warmup, 1) + c.args.profile_repeats) + 1
    while step_s and len(sizes) > 1 and runs * sum(step_s[b] for b in sizes) > budget_s:
        notes.append(f"microbatch {sizes.pop()}: left out, the time budget would not cover it")
    return sizes, notes


def profile_step(c: Check, image: int) -> dict:
    """The profile in a fresh process; out of memory: again without the largest size."""
    deadline = time.monotonic() + c.share_s("profile")
    sizes, notes = profile_sizes(c, image, deadline - time.monotonic() - START_S)
    while True:
        left = deadline - time.monotonic()
        result, _ = c.child({"step": "profile", "image": image, "sizes": sizes}, left)
        if not result.get("out_of_memory"):
            break
        notes.append(f"microbatch {sizes[-1]}: out of memory in the profiler "
                     f"({result['error'][:200]})")
        if len(sizes) == 1 or deadline - time.monotonic() < MIN_STEP_S:
            result["error"] = f"out of memory at microbatch {sizes[-1]}, no time or size left"
            break
        c.log(f"  out of memory: again without microbatch {sizes[-1]}")
        sizes = sizes[:-1]
    for s in result.get("summaries", []):
        c.log(f"  {image} px, microbatch {s['microbatch']}: whole step "
              f"{1e3 * s['whole_step_s']:.1f} ms, stamped blocks "
              f"{1e3 * s['stamped_blocks_sum_s']:.1f} ms ({100 * s['stamp_overhead']:+.1f}%), "
              f"blocks as written {1e3 * s['blocks_sum_s']:.1f} ms")
    return dict(result, notes=notes)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pulse_run_step(c: Check, dtype: str) -> dict:
    """pulse-run on the checked-in one-stage plan, as one rank, in a fresh process."""
    plan_path = os.path.join(DATA, PLANS[(c.args.variant, dtype)])
    with open(plan_path) as f:
        par = json.load(f)["parallelism"]
    share = c.share_s("pulse-run")
    spec = f"{MODEL_FILE}:{FACTORY[c.args.variant]}"
    argv = ["--plan", os.path.relpath(plan_path, ROOT), "--model", spec,
            "--iterations", str(c.args.iterations), "--dtype", dtype, "--lr", "1e-4",
            "--rank", "0", "--master-port", str(free_port()),
            "--threads", "1" if c.args.device == "cpu" else "8", "--timeout", str(int(share))]
    c.log(f"  pulse-run {' '.join(argv)}")
    out = {"dtype": dtype, "plan": os.path.relpath(plan_path, ROOT), "model": spec,
           "microbatch_size": par["microbatch_size"],
           "num_microbatches": par["num_microbatches"], "global_batch": par["global_batch"]}
    result, text = c.child({"step": "pulse-run", "dtype": dtype, "argv": argv}, share)
    out.update(result)
    if "skipped" in result:
        return out
    its = [(int(m.group(1)), float(m.group(4))) for m in PROGRESS.finditer(text)]
    out["iteration_s"] = [s for _, s in its]
    timed = [s for i, s in its if i > 1] or [s for _, s in its]
    out["ok"] = result.get("rc") == 0 and bool(timed)
    if not out["ok"]:
        out.setdefault("error", f"rc {result.get('rc')}, {len(its)} iteration(s)")
        out.setdefault("output_tail", text[-2000:])
    if timed:
        out["median_iteration_s"] = statistics.median(timed)
        out["median_microbatch_s"] = out["median_iteration_s"] / par["num_microbatches"]
    return out


def pulse_run_dtypes(c: Check) -> list[str]:
    return [d for d in dict.fromkeys([c.args.dtype, "float32"]) if (c.args.variant, d) in PLANS]


# --- summary -----------------------------------------------------------------------------------

REGIMES = {"bfloat16": "mixed precision (fp32 weights and optimizer, bf16 autocast)",
           "float32": "float32"}


def comparisons(c: Check) -> list[dict]:
    """Each pulse-run iteration against the first image size's profile at the same
    microbatch size: the microbatches' summed block times, which is what a one-stage plan
    from that profile predicts for the forward and backward work."""
    steps = c.results["steps"]
    prof = {s["microbatch"]: s for s in
            steps.get(f"profile-{c.args.images[0]}", {}).get("summaries", [])}
    out = []
    for dtype in pulse_run_dtypes(c):
        run = steps.get(f"pulse-run-{dtype}", {})
        summary = prof.get(run.get("microbatch_size"))
        if not run.get("ok") or summary is None:
            continue
        predicted = run["num_microbatches"] * summary["blocks_sum_s"]
        out.append({"pulse_run_dtype": dtype, "pulse_run_regime": REGIMES[dtype],
                    "profile_regime": f"pure {c.args.dtype}",
                    "measured_iteration_s": run["median_iteration_s"],
                    "blocks_sum_x_microbatches_s": predicted,
                    "measured_over_predicted": run["median_iteration_s"] / predicted})
    return out


def table(c: Check) -> str:
    env, steps = c.results["environment"], c.results["steps"]
    lines = [f"SD2 UNet, {c.args.dtype}, eager, {env.get('device')} (torch {env.get('torch')}, "
             f"{env.get('date_utc')})",
             f"{'px':>4} {'mb':>3} {'step ms':>9} {'ms/sample':>9} {'peak GiB':>8} "
             f"{'stamped/step':>12}"]
    for image in c.args.images:
        prof = {s["microbatch"]: s for s in steps.get(f"profile-{image}", {}).get("summaries", [])}
        for row in steps.get(f"whole-{image}", {}).get("sizes", []):
            b = row["microbatch"]
            if "step_s" not in row:
                lines.append(f"{image:>4} {b:>3} {row.get('skipped') or 'out of memory'}")
                continue
            s = prof.get(b)
            lines.append(f"{image:>4} {b:>3} {1e3 * row['step_s']:9.1f} "
                         f"{1e3 * row['per_sample_s']:9.2f} "
                         f"{gib(row.get('peak_allocated_bytes')):8.2f} "
                         + (f"{1 + s['stamp_overhead']:12.3f}" if s else f"{'-':>12}"))
    for dtype in pulse_run_dtypes(c):
        a = steps.get(f"pulse-run-{dtype}")
        if a is None:
            continue
        if a.get("ok"):
            lines.append(f"pulse-run pp 1, {dtype}, {a['num_microbatches']} x microbatch "
                         f"{a['microbatch_size']}: median iteration "
                         f"{1e3 * a['median_iteration_s']:.1f} ms, peak "
                         f"{gib(a.get('peak_allocated_bytes')):.2f} GiB")
        else:
            lines.append(f"pulse-run {dtype}: {a.get('skipped') or a.get('error')}")
    for comp in c.results.get("comparisons") or []:
        if isinstance(comp, dict):
            lines.append(f"pulse-run {comp['pulse_run_dtype']} iteration / (blocks' sum x "
                         f"microbatches): {comp['measured_over_predicted']:.3f}")
    for name, step in steps.items():
        if "error" in step:
            lines.append(f"step {name} FAILED: {step['error'][:200]}")
    return "\n".join(lines)


def skipped(c: Check, fn: Callable[[], dict]) -> Callable[[], dict]:
    """fn, or a record that the budget left no time for it."""
    if c.left_s() >= MIN_STEP_S:
        return fn
    return lambda: {"skipped": f"time budget spent ({c.left_s():.0f} s left)"}


def run_all(c: Check) -> None:
    args = c.args
    c.results["git_commit"] = git_commit()
    if "whole" not in args.skip:
        for image in args.images:
            c.step(f"whole-{image}", skipped(c, lambda image=image: whole_step(c, image)))
    if "profile" not in args.skip:
        for image in args.images:
            c.step(f"profile-{image}",
                   skipped(c, lambda image=image: profile_step(c, image)))
    if "pulse-run" not in args.skip:
        for dtype in pulse_run_dtypes(c):
            c.step(f"pulse-run-{dtype}",
                   skipped(c, lambda dtype=dtype: pulse_run_step(c, dtype)))
    try:
        c.results["comparisons"] = comparisons(c)
    except (KeyError, TypeError, ZeroDivisionError) as e:
        c.results["comparisons"] = f"unavailable: {type(e).__name__}: {e}"
    c.results["total_wall_s"] = round(time.monotonic() - c.start, 1)
    # This process ran no step itself: it never imported torch, so it held no GPU memory.
    c.results["parent"] = {"pid": os.getpid(), "torch_imported": "torch" in sys.modules}
    c.save()
    c.log("results\n" + table(c))


def main(argv: list[str]) -> int:
    # A timeout's SIGTERM unwinds like an exception, so the running step is killed with it
    # (a step's processes have a session of their own and would outlive this one).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    c = Check(parse_args(argv))
    try:
        run_all(c)
    finally:
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
