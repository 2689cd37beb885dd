#!/usr/bin/env python3
"""One step of the GPU check (scripts/gpu_check.py), in a process of its own.

    gpu_check_steps.py REQUEST.json RESULT.json

gpu_check.py never imports torch: each step that uses the GPU (the whole steps at one image
size, one block profile, one pulse-run) runs here, in a fresh process, and every byte it
held goes back to the driver when it exits. In the first H200 run all steps shared one
process: the block profile at 768 px ran out of memory with 138.65 GiB allocated (the
profiler's byte count kept every size's autograd graph alive: steptimer.SavedBytes), and
pulse-run's process, started beside it, could not even select the device.

Within a step, memory is freed between microbatch sizes (del, gc.collect,
torch.cuda.empty_cache) and the peak counter is reset before each size, so each size's
peak (torch.cuda.max_memory_allocated) is its own; the bytes allocated before and after
each size are recorded too (after == before: the size left nothing behind).

The request holds the step ("whole", "profile" or "pulse-run"), the parent's options and
the step's own fields; the result is the step's record, with the process id, the
environment (GPU, torch, CUDA) and any error with its traceback. The step's printed lines
are the parent's to log.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import re
import statistics
import sys
import time
import traceback
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
MODEL_FILE = "examples/sd2_unet.py"  # relative to ROOT, where every command runs

import torch  # noqa: E402  (after the path: pulse_runtime is uninstalled)

from pulse_runtime import blocklist, profiler, steptimer  # noqa: E402


def log(text: str) -> None:
    print(text, flush=True)


def is_oom(e: BaseException) -> bool:
    return "out of memory" in str(e).lower()


def guarded(fn: Any) -> Any:
    """A value for the record, or the reason there is none (one missing attribute in
    another torch version must not lose the rest)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return f"unavailable: {type(e).__name__}: {e}"[:200]


class Step:
    """The device, dtype and model factory a step runs with (from the parent's options)."""

    def __init__(self, options: dict) -> None:
        self.options = options
        if options["device"] == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available (--dry-run runs on the CPU)")
        self.device = torch.device(options["device"])
        self.dtype = getattr(torch, options["dtype"])
        self.clock = steptimer.Clock(self.device)
        self.make = blocklist.load_factory(os.path.join(ROOT, MODEL_FILE) + ":make")

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def build(self, image: int) -> Any:
        model = self.make(image, self.options["width"], self.dtype, self.device, seed=0)
        model.train()
        return model

    def free(self) -> None:
        gc.collect()
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()

    def reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)

    def allocated(self) -> Any:
        return guarded(lambda: torch.cuda.memory_allocated(self.device)) if self.cuda else None

    def peak(self) -> dict:
        if not self.cuda:
            return {}
        return {"peak_allocated_bytes": guarded(
                    lambda: torch.cuda.max_memory_allocated(self.device)),
                "peak_reserved_bytes": guarded(
                    lambda: torch.cuda.max_memory_reserved(self.device))}

    def slug(self) -> str:
        if not self.cuda:
            return "cpu"
        name = torch.cuda.get_device_name(self.device).lower().replace("nvidia", "")
        return re.sub(r"[^a-z0-9]+", "-", name).strip("-")


def environment(s: Step) -> dict:
    import datetime
    import platform
    env = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "host": platform.node(), "python": platform.python_version(),
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "cpu": profiler.cpu_model(), "cpu_count": os.cpu_count(),
           "fused_attention": hasattr(torch.nn.functional, "scaled_dot_product_attention"),
           "device": "CPU"}
    if s.cuda:
        props = torch.cuda.get_device_properties(s.device)
        env.update(device=props.name, capability=f"{props.major}.{props.minor}",
                   memory_bytes=props.total_memory,
                   multiprocessors=guarded(lambda: props.multi_processor_count),
                   driver=guarded(lambda: torch.cuda.driver_version()
                                  if hasattr(torch.cuda, "driver_version") else None),
                   cudnn=guarded(torch.backends.cudnn.version),
                   cudnn_benchmark=guarded(lambda: torch.backends.cudnn.benchmark),
                   matmul_allow_tf32=guarded(lambda: torch.backends.cuda.matmul.allow_tf32),
                   cudnn_allow_tf32=guarded(lambda: torch.backends.cudnn.allow_tf32))
    return env


# --- whole steps -------------------------------------------------------------------------------

def time_size(s: Step, model: Any, b: int, budget_s: float) -> dict:
    """Warm-ups, then timed plain steps at microbatch b: at least 2 timed, up to --repeats
    while the size's share of the budget lasts. The peak is this size's alone."""
    opts = s.options
    s.free()
    s.reset_peak()
    before = s.allocated()
    batch = model.make_batch(b, seed=b, device=s.device)
    times: list[float] = []
    error = None
    t0 = time.monotonic()
    try:
        for k in range(opts["warmup"] + opts["repeats"]):
            t = steptimer.time_plain_step(model, batch, b, s.clock)
            if k >= opts["warmup"]:
                times.append(t)
                if len(times) >= 2 and time.monotonic() - t0 > budget_s:
                    break
    except RuntimeError as e:
        if not is_oom(e):
            raise
        error = f"out of memory: {str(e)[:300]}"
    # Outside the except block: its traceback held the step's activations.
    row = dict({"microbatch": b}, **s.peak())
    del batch
    s.free()
    if s.cuda:
        row.update(allocated_before_bytes=before, allocated_after_bytes=s.allocated())
    if error is not None:
        return dict(row, out_of_memory=True, error=error)
    return dict(row, step_s=statistics.median(times), per_sample_s=statistics.median(times) / b,
                timed_steps=times)


def zero_gradients(model: Any) -> None:
    """Gradients allocated before any size is timed: every size's step accumulates into
    existing .grad (as from an iteration's second microbatch on) and every size starts
    from the same bytes (weights and gradients)."""
    with torch.no_grad():
        for p in model.parameters():
            p.grad = torch.zeros_like(p)


def whole(s: Step, req: dict) -> dict:
    image, sizes = req["image"], s.options["sizes"]
    deadline = time.monotonic() + (req["deadline_unix"] - time.time())
    model = s.build(image)
    zero_gradients(model)
    rows: list[dict] = []
    reason = None
    for i, b in enumerate(sizes):
        left = deadline - time.monotonic()
        if reason is None and left < 1:
            reason = "time budget spent"
        if reason is not None:
            rows.append({"microbatch": b, "skipped": reason})
            continue
        row = time_size(s, model, b, left / (len(sizes) - i))
        rows.append(row)
        if row.get("out_of_memory"):
            reason = f"microbatch {b} ran out of memory"
            log(f"{image} px, microbatch {b}: out of memory")
        else:
            peak = row.get("peak_allocated_bytes")
            log(f"{image} px, microbatch {b}: {1e3 * row['step_s']:.1f} ms per step"
                + (f", peak {peak / 2**30:.2f} GiB" if isinstance(peak, int) else ""))
    return {"image_px": image, "latent": model.cfg.latent,
            "params": sum(p.numel() for p in model.parameters()),
            "method": "CUDA events (host clock on the CPU) around one plain forward + loss + "
                      "backward, parameter gradients accumulating into allocated .grad; "
                      f"{s.options['warmup']} warm-up step(s), median of up to "
                      f"{s.options['repeats']}; peak memory per size "
                      "(torch.cuda.max_memory_allocated after a reset, weights and "
                      "gradients included)",
            "sizes": rows}


# --- a block profile ---------------------------------------------------------------------------

def profile(s: Step, req: dict) -> dict:
    """pulse-profile at the sizes the parent chose; out of memory is a result (the parent
    retries without the largest size, in a fresh process)."""
    opts, image, sizes = s.options, req["image"], req["sizes"]
    # The check profiles pure regimes (docs/fidelity.md): bfloat16 is pure bf16 here.
    label = {"bfloat16": "bf16", "float32": "fp32"}[opts["dtype"]]
    name = f"sd2-unet-{image}.{s.slug()}-{label}"
    spec = f"{MODEL_FILE}:make(image_size={image}, width={opts['width']:g})"
    args = profiler.parse_args(
        ["--model", spec, "--sizes", ",".join(map(str, sizes)), "--precision", label,
         "--warmup", str(opts["profile_warmup"]), "--repeats", str(opts["profile_repeats"]),
         "--device", s.device.type, "--name", name]
        + (["--device-type", opts["device_type"]] if opts["device_type"] else []))
    model = s.build(image)
    s.reset_peak()
    said, oom = io.StringIO(), None
    try:
        with contextlib.redirect_stderr(said):
            prof, summaries, _ = profiler.run_profile(model, args, s.device)
    except RuntimeError as e:
        if not is_oom(e):
            raise
        oom = str(e)[:300]
    finally:
        for line in said.getvalue().splitlines():
            log(line)
    if oom is not None:
        return {"image_px": image, "sizes": sizes, "out_of_memory": True, "error": oom}
    path = os.path.join(opts["out"], f"{name}.profile.json")
    profiler.write_atomically(path, json.dumps(prof, indent=2) + "\n")
    checks = [a for a in prof["provenance"]["assumptions"]
              if a.startswith(("Step-sum", "Stamp-overhead", "Small-batch", "Inversion"))]
    out = dict({"image_px": image, "file": os.path.basename(path), "sizes": sizes,
                "summaries": summaries, "checks": [x[:600] for x in checks]}, **s.peak())
    del model, prof
    s.free()
    if s.cuda:
        out["allocated_after_bytes"] = s.allocated()  # model and batches gone: ~0 left
    return out


# --- pulse-run ---------------------------------------------------------------------------------

def pulse_run(s: Step, req: dict) -> dict:
    """pulse-run's own command line as one rank (--rank 0); its progress lines go to this
    process's output, which the parent reads."""
    from pulse_runtime import cli, runner
    if req["dtype"] not in runner.DTYPES:
        return {"skipped": f"this pulse-run has no --dtype {req['dtype']} (it offers "
                           f"{', '.join(runner.DTYPES)})"}
    rc = cli.main(req["argv"])
    out = {"rc": rc or 0}
    if s.cuda:
        out["peak_allocated_bytes"] = guarded(torch.cuda.max_memory_allocated)
    return out


STEPS = {"whole": whole, "profile": profile, "pulse-run": pulse_run}


def run(req: dict) -> dict:
    t0 = time.monotonic()
    try:
        s = Step(req["options"])
        result = STEPS[req["step"]](s, req)
        if req["step"] != "pulse-run":  # pulse-run selects its device itself
            result["environment"] = environment(s)
    except (Exception, SystemExit) as e:  # noqa: BLE001: the parent records any failure
        result = {"error": f"{type(e).__name__}: {e}"[:2000],
                  "traceback": traceback.format_exc()[-4000:]}
    result.update(pid=os.getpid(), process_s=round(time.monotonic() - t0, 3))
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: gpu_check_steps.py REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        req = json.load(f)
    blocklist.keep_freed_memory()
    profiler.write_atomically(argv[1], json.dumps(run(req)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
