#!/usr/bin/env python3
"""The GPU check: the SD2 UNet on one GPU, measured three ways, in about four minutes.

    scripts/gpu_check.sh OUT                  # one CUDA GPU, bf16, eager
    scripts/gpu_check.sh OUT --dry-run        # the same steps at tiny sizes on the CPU

Steps (each runs on its own; an error is recorded in the results and the next step runs):

  whole-<px>    the whole forward + backward step of examples/sd2_unet.py at 512 and 768 px,
                microbatch 1..32: CUDA events around a plain step (no per-block marks),
                warm-ups, then the median of the timed steps; peak memory per size
                (torch.cuda.max_memory_allocated). A size that runs out of memory is
                recorded, and the larger ones are skipped.
  profile-<px>  pulse-profile's block profile (python/pulse_runtime/profiler.py) at the sizes
                that fit, in the pulse.model/v1 format the planner reads, with the blocks'
                sum against the whole step.
  pulse-run     a one-stage (pp 1) plan of SD2 at 512 px run by pulse-run on this GPU (the
                plan is checked in: scripts/gpu_check_data/); in bf16 if this pulse-run
                offers --dtype bfloat16, else, or if that fails, in float32.

Writes OUT/gpu_check.json (every measurement, the environment, errors; rewritten after each
step, so a killed run keeps what it measured), OUT/gpu_check.log, and one profile per image
size (OUT/sd2-unet-<px>.<device>-<dtype>.profile.json). Prints a table at the end.
docs/fidelity.md ("The GPU check") says how to read the results.

scripts/gpu_check_plans.py regenerates the checked-in plans.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import io
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
import traceback
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
DATA = os.path.join(ROOT, "scripts", "gpu_check_data")
MODEL_FILE = "examples/sd2_unet.py"  # relative to ROOT, where every command runs
# (variant, dtype) -> the checked-in one-stage plan; --make-plans writes them.
PLANS = {("full", "bfloat16"): "sd2-unet-512-pp1-bf16.plan.json",
         ("full", "float32"): "sd2-unet-512-pp1-fp32.plan.json",
         ("tiny", "float32"): "sd2-tiny-pp1-fp32.plan.json"}
FACTORY = {"full": "build", "tiny": "build_tiny"}  # the plans' model: 512 px / the tiny one
PROGRESS = re.compile(r"pulse-run: iteration (\d+)/(\d+): loss (\S+), ([0-9.]+) s")


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
    p.add_argument("--budget-s", type=float, default=270,
                   help="wall-clock seconds for all steps (default 270); a step that would "
                   "overrun skips its remaining sizes, and says so")
    p.add_argument("--skip", default="", help="comma-separated steps to skip: whole, "
                   "profile, pulse-run")
    args = p.parse_args(argv)
    dry = args.dry_run
    args.device = args.device or ("cpu" if dry else "cuda")
    args.dtype = args.dtype or ("float32" if dry else "bfloat16")
    args.images = [int(x) for x in (args.images or ("64,128" if dry else "512,768")).split(",")]
    args.sizes = [int(x) for x in (args.sizes or ("1,2" if dry else "1,2,4,8,16,32")).split(",")]
    args.width = 0.1 if dry else 1.0
    args.variant = "tiny" if dry else "full"
    if dry:
        args.warmup, args.repeats = min(args.warmup, 1), min(args.repeats, 2)
        args.profile_repeats, args.iterations = min(args.profile_repeats, 2), 2
    args.skip = set(filter(None, args.skip.split(",")))
    return args


class Check:
    """The run's state: options, the clock, the results (rewritten after every step), the
    log."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        from pulse_runtime import blocklist, profiler, steptimer
        self.args, self.torch, self.profiler, self.steptimer = args, torch, profiler, steptimer
        os.makedirs(args.out, exist_ok=True)
        self.log_file = open(os.path.join(args.out, "gpu_check.log"), "a", buffering=1)
        self.start = time.monotonic()
        self.deadline = self.start + args.budget_s
        if args.device == "cuda" and not torch.cuda.is_available():
            raise SystemExit("gpu_check: CUDA is not available (--dry-run runs on the CPU)")
        self.device = torch.device(args.device)
        self.dtype = getattr(torch, args.dtype)
        self.clock = steptimer.Clock(self.device)
        self.make = blocklist.load_factory(os.path.join(ROOT, MODEL_FILE) + ":make")
        self.results: dict[str, Any] = {"schema": "pulse.gpu-check/v1", "options": {
            k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()},
            "environment": {}, "steps": {}}

    def log(self, text: str) -> None:
        line = f"[{time.monotonic() - self.start:7.1f} s] {text}"
        print(line, flush=True)
        self.log_file.write(line + "\n")

    def save(self) -> None:
        from pulse_runtime.profiler import write_atomically
        write_atomically(os.path.join(self.args.out, "gpu_check.json"),
                         json.dumps(self.results, indent=2) + "\n")

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def step(self, name: str, fn: Callable[[], Any]) -> None:
        """Run one step; whatever it raises is recorded, and the run goes on."""
        t0 = time.monotonic()
        self.log(f"step {name}: start ({self.left_s():.0f} s of the budget left)")
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001: one failing step must not lose the others
            result = {"error": f"{type(e).__name__}: {e}"[:2000],
                      "traceback": traceback.format_exc()[-4000:]}
            self.log(f"step {name}: FAILED: {result['error'][:300]}")
        result["wall_s"] = round(time.monotonic() - t0, 3)
        self.results["steps"][name] = result
        self.free()
        self.save()
        self.log(f"step {name}: done in {result['wall_s']:.1f} s")

    def free(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            self.torch.cuda.empty_cache()

    def build(self, image: int) -> Any:
        model = self.make(image, self.args.width, self.dtype, self.device, seed=0)
        model.train()
        return model

    def peak_reset(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.reset_peak_memory_stats(self.device)

    def peak(self) -> dict:
        if self.device.type != "cuda":
            return {}
        return {"peak_allocated_bytes": guarded(
                    lambda: self.torch.cuda.max_memory_allocated(self.device)),
                "peak_reserved_bytes": guarded(
                    lambda: self.torch.cuda.max_memory_reserved(self.device))}


def gib(n: Any) -> float:
    """Bytes in GiB for the table; nan where no number was recorded (no GPU, or a torch
    without the call)."""
    return n / 2**30 if isinstance(n, (int, float)) else float("nan")


def is_oom(e: BaseException) -> bool:
    return "out of memory" in str(e).lower()


def guarded(fn: Callable[[], Any]) -> Any:
    """A value for the record, or the reason there is none (one missing attribute in
    another torch version must not lose the rest)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return f"unavailable: {type(e).__name__}: {e}"[:200]


def git_commit() -> Any:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True, timeout=10)
    return proc.stdout.strip() or None


def environment(c: Check) -> dict:
    torch = c.torch
    env = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "host": platform.node(), "python": platform.python_version(),
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "cpu": c.profiler.cpu_model(), "cpu_count": os.cpu_count(),
           "fused_attention": hasattr(torch.nn.functional, "scaled_dot_product_attention"),
           "git_commit": guarded(git_commit), "device": "CPU"}
    if c.device.type == "cuda":
        props = torch.cuda.get_device_properties(c.device)
        env.update(device=props.name, capability=f"{props.major}.{props.minor}",
                   memory_bytes=props.total_memory,
                   multiprocessors=guarded(lambda: props.multi_processor_count),
                   cudnn=guarded(torch.backends.cudnn.version),
                   cudnn_benchmark=guarded(lambda: torch.backends.cudnn.benchmark),
                   matmul_allow_tf32=guarded(lambda: torch.backends.cuda.matmul.allow_tf32),
                   cudnn_allow_tf32=guarded(lambda: torch.backends.cudnn.allow_tf32))
    return env


# --- whole steps -------------------------------------------------------------------------------

def time_size(c: Check, model: Any, b: int, budget_s: float) -> dict:
    """Warm-ups, then timed plain steps at microbatch b: at least 2 timed, up to --repeats
    while the size's share of the budget lasts."""
    args = c.args
    batch = model.make_batch(b, seed=b, device=c.device)
    c.peak_reset()
    times: list[float] = []
    error = None
    t0 = time.monotonic()
    try:
        for k in range(args.warmup + args.repeats):
            t = c.steptimer.time_plain_step(model, batch, b, c.clock)
            if k >= args.warmup:
                times.append(t)
                if len(times) >= 2 and time.monotonic() - t0 > budget_s:
                    break
    except RuntimeError as e:
        if not is_oom(e):
            raise
        error = f"out of memory: {str(e)[:300]}"
    if error is not None:  # outside the except block: its traceback held the activations
        del batch
        c.free()
        return {"microbatch": b, "out_of_memory": True, "error": error}
    return dict({"microbatch": b, "step_s": statistics.median(times),
                 "per_sample_s": statistics.median(times) / b, "timed_steps": times}, **c.peak())


def whole_steps(c: Check, image: int, budget_s: float) -> dict:
    deadline = time.monotonic() + budget_s
    model = c.build(image)
    rows: list[dict] = []
    reason = None
    for i, b in enumerate(c.args.sizes):
        left = deadline - time.monotonic()
        if reason is None and left < 1:
            reason = "time budget spent"
        if reason is not None:
            rows.append({"microbatch": b, "skipped": reason})
            continue
        row = time_size(c, model, b, left / (len(c.args.sizes) - i))
        rows.append(row)
        if row.get("out_of_memory"):
            reason = f"microbatch {b} ran out of memory"
        else:
            c.log(f"  {image} px, microbatch {b}: {1e3 * row['step_s']:.1f} ms per step, "
                  f"peak {gib(row.get('peak_allocated_bytes')):.1f} GiB")
    params = sum(p.numel() for p in model.parameters())
    return {"image_px": image, "latent": model.cfg.latent, "params": params,
            "method": "CUDA events (host clock on the CPU) around one plain forward + loss + "
                      "backward, parameter gradients accumulating; "
                      f"{c.args.warmup} warm-up step(s), median of up to {c.args.repeats}",
            "sizes": rows}


# --- block profiles ----------------------------------------------------------------------------

def device_slug(c: Check) -> str:
    if c.device.type != "cuda":
        return "cpu"
    name = c.torch.cuda.get_device_name(c.device).lower().replace("nvidia", "")
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")


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


def profile_step(c: Check, image: int, budget_s: float) -> dict:
    sizes, notes = profile_sizes(c, image, budget_s)
    label = c.profiler.DTYPES[c.args.dtype][1]
    name = f"sd2-unet-{image}.{device_slug(c)}-{label}"
    spec = f"{MODEL_FILE}:make(image_size={image}, width={c.args.width:g})"
    model = c.build(image)
    while True:
        args = c.profiler.parse_args(
            ["--model", spec, "--sizes", ",".join(map(str, sizes)), "--dtype", c.args.dtype,
             "--warmup", str(c.args.profile_warmup), "--repeats", str(c.args.profile_repeats),
             "--device", c.device.type, "--name", name]
            + (["--device-type", c.args.device_type] if c.args.device_type else []))
        error, said = None, io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                profile, summaries, findings = c.profiler.run_profile(model, args, c.device)
        except RuntimeError as e:
            if not is_oom(e) or len(sizes) == 1:
                raise
            error = str(e)[:200]
        finally:
            for line in said.getvalue().splitlines():
                c.log(f"  {line}")
        if error is None:
            break
        notes.append(f"microbatch {sizes.pop()}: out of memory in the profiler ({error})")
        c.free()
    path = os.path.join(c.args.out, f"{name}.profile.json")
    c.profiler.write_atomically(path, json.dumps(profile, indent=2) + "\n")
    checks = [a for a in profile["provenance"]["assumptions"]
              if a.startswith(("Step-sum", "Small-batch", "Inversion"))]
    for s in summaries:
        c.log(f"  {image} px, microbatch {s['microbatch']}: whole step "
              f"{1e3 * s['whole_step_s']:.1f} ms, blocks' sum {1e3 * s['blocks_sum_s']:.1f} ms "
              f"({100 * s['deviation']:+.1f}%)")
    return {"image_px": image, "file": os.path.basename(path), "sizes": sizes, "notes": notes,
            "summaries": summaries, "findings": findings, "checks": [x[:600] for x in checks]}


# --- pulse-run ---------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pulse_run_child(argv: list[str]) -> int:
    """In a fresh process: pulse-run's own CLI as one rank (--rank 0), then the peak memory
    it allocated, as a JSON line on stdout."""
    import torch
    from pulse_runtime import cli
    rc = cli.main(argv)
    peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
    print(json.dumps({"rc": rc, "peak_allocated_bytes": peak}), flush=True)
    return rc or 0


def run_pulse(c: Check, dtype: str, budget_s: float) -> dict:
    plan_path = os.path.join(DATA, PLANS[(c.args.variant, dtype)])
    with open(plan_path) as f:
        par = json.load(f)["parallelism"]
    spec = f"{MODEL_FILE}:{FACTORY[c.args.variant]}"
    cmd = [sys.executable, os.path.abspath(__file__), "--pulse-run-child",
           "--plan", os.path.relpath(plan_path, ROOT), "--model", spec,
           "--iterations", str(c.args.iterations), "--dtype", dtype, "--lr", "1e-4",
           "--rank", "0", "--master-port", str(free_port()),
           "--threads", "1" if c.device.type == "cpu" else "8", "--timeout", str(int(budget_s))]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"),
                                           os.environ.get("PYTHONPATH", "")]))
    c.log(f"  pulse-run {dtype}: {' '.join(cmd[2:])}")
    out = {"dtype": dtype, "plan": os.path.relpath(plan_path, ROOT), "model": spec,
           "microbatch_size": par["microbatch_size"],
           "num_microbatches": par["num_microbatches"], "global_batch": par["global_batch"]}
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=budget_s)
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-2000:]
        return dict(out, ok=False, error=f"timed out after {budget_s:.0f} s",
                    stderr_tail=tail.decode(errors="replace") if isinstance(tail, bytes) else tail)
    its = [(int(m.group(1)), float(m.group(4))) for m in PROGRESS.finditer(proc.stderr)]
    last = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    child = json.loads(last[-1]) if last else {}
    out.update(rc=proc.returncode, iteration_s=[s for _, s in its],
               peak_allocated_bytes=child.get("peak_allocated_bytes"),
               stderr_tail=proc.stderr[-1500:])
    timed = [s for i, s in its if i > 1] or [s for _, s in its]
    out["ok"] = proc.returncode == 0 and bool(timed)
    if timed:
        out["median_iteration_s"] = statistics.median(timed)
        out["median_microbatch_s"] = out["median_iteration_s"] / par["num_microbatches"]
    return out


def pulse_run_step(c: Check, budget_s: float) -> dict:
    from pulse_runtime import runner
    deadline = time.monotonic() + budget_s
    attempts: list[dict] = []
    dtypes = list(dict.fromkeys([c.args.dtype, "float32"]))
    for dtype in dtypes:
        if dtype not in runner.DTYPES:
            attempts.append({"dtype": dtype, "ok": False, "skipped":
                             f"this pulse-run has no --dtype {dtype} (it offers "
                             f"{', '.join(runner.DTYPES)})"})
        elif (c.args.variant, dtype) not in PLANS:
            attempts.append({"dtype": dtype, "ok": False, "skipped": "no checked-in plan"})
        elif deadline - time.monotonic() < 20:
            attempts.append({"dtype": dtype, "ok": False, "skipped": "time budget spent"})
        else:
            left = deadline - time.monotonic()
            # A run that hangs (say, in NCCL's set-up) must leave the fallback its time.
            share = left if dtype == dtypes[-1] else min(left, max(90.0, 0.55 * left))
            attempts.append(run_pulse(c, dtype, share))
            c.log(f"  pulse-run {dtype}: ok={attempts[-1]['ok']}, iterations "
                  f"{attempts[-1].get('iteration_s')}")
        if attempts[-1]["ok"]:
            break
    return {"attempts": attempts, "note": "iteration_s: pulse-run's own per-iteration time "
            "(every microbatch's forward and backward, the loss read back per microbatch, the "
            "optimizer step); the first iteration is a warm-up, the median is over the rest"}


# --- summary -----------------------------------------------------------------------------------

def comparisons(c: Check) -> dict:
    """pulse-run's iteration against the profile's blocks (same microbatch size): the
    microbatches' summed block times, as a one-stage plan on this GPU would predict them."""
    steps = c.results["steps"]
    ok = [a for a in steps.get("pulse-run", {}).get("attempts", []) if a.get("ok")]
    prof = steps.get(f"profile-{c.args.images[0]}", {})
    if not ok or ok[0]["dtype"] != c.args.dtype or "summaries" not in prof:
        return {}
    run = ok[0]
    summary = {s["microbatch"]: s for s in prof["summaries"]}.get(run["microbatch_size"])
    if summary is None:
        return {}
    predicted = run["num_microbatches"] * summary["blocks_sum_s"]
    return {"pulse_run_vs_profile": {
        "measured_iteration_s": run["median_iteration_s"],
        "blocks_sum_x_microbatches_s": predicted,
        "measured_over_predicted": run["median_iteration_s"] / predicted}}


def table(c: Check) -> str:
    env, steps = c.results["environment"], c.results["steps"]
    lines = [f"SD2 UNet, {c.args.dtype}, eager, {env.get('device')} (torch {env.get('torch')}, "
             f"{env.get('date_utc')})",
             f"{'px':>4} {'mb':>3} {'step ms':>9} {'ms/sample':>9} {'peak GiB':>8} "
             f"{'blocks ms':>9} {'blocks/step':>11}"]
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
                         + (f"{1e3 * s['blocks_sum_s']:9.1f} {1 + s['deviation']:11.3f}"
                            if s else f"{'-':>9} {'-':>11}"))
    for a in steps.get("pulse-run", {}).get("attempts", []):
        if a.get("ok"):
            lines.append(f"pulse-run pp 1, {a['dtype']}, {a['num_microbatches']} x microbatch "
                         f"{a['microbatch_size']}: median iteration "
                         f"{1e3 * a['median_iteration_s']:.1f} ms, peak "
                         f"{gib(a.get('peak_allocated_bytes')):.2f} GiB")
        else:
            lines.append(f"pulse-run {a['dtype']}: "
                         f"{a.get('skipped') or a.get('error') or 'failed, rc %s' % a.get('rc')}")
    comp = c.results.get("comparisons", {}).get("pulse_run_vs_profile")
    if comp:
        lines.append(f"pulse-run iteration / (blocks' sum x microbatches): "
                     f"{comp['measured_over_predicted']:.3f}")
    for name, step in steps.items():
        if "error" in step:
            lines.append(f"step {name} FAILED: {step['error'][:200]}")
    return "\n".join(lines)


def run_all(c: Check) -> None:
    args = c.args
    c.step("environment", lambda: environment(c))
    c.results["environment"] = c.results["steps"].pop("environment")
    n = len(args.images)
    if "whole" not in args.skip:
        for image in args.images:
            c.step(f"whole-{image}", lambda image=image: whole_steps(
                c, image, 0.30 * args.budget_s / n * (1.5 if image > 512 else 1.0)))
    if "profile" not in args.skip:
        for image in args.images:
            c.step(f"profile-{image}", lambda image=image: profile_step(
                c, image, min(0.35 * args.budget_s / n * (1.5 if image > 512 else 1.0),
                              c.left_s() - 60)))
    if "pulse-run" not in args.skip:
        c.step("pulse-run", lambda: pulse_run_step(c, max(c.left_s(), 60)))
    c.results["comparisons"] = guarded(lambda: comparisons(c))
    c.results["total_wall_s"] = round(time.monotonic() - c.start, 1)
    c.save()
    c.log("results\n" + str(guarded(lambda: table(c))))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--pulse-run-child"]:
        return pulse_run_child(argv[1:])
    c = Check(parse_args(argv))
    run_all(c)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
