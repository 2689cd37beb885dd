#!/usr/bin/env python3
"""CUDA checks for scripts/torch2_check.sh (one GPU is enough):

1. every example model builds its tensors on the input's device: a training step of
   examples/small_unet.py (build, build_test), examples/fx_unet.py and examples/fx_uvit.py
   with the batch on cuda:0;
2. pulse-run on one GPU (NCCL, one rank; a pp 1 plan: both stages of the V on it) with
   --dtype float32, bfloat16 and float16: the first losses of the mixed-precision runs within
   5% of float32's, every loss finite.

    scripts/torch2_cuda_examples.py --binary build/pulse-plan --out DIR    (exit 0: all pass)
"""

import argparse
import json
import math
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "torch"))


def example_steps():
    import torch
    from pulse_runtime import models
    failures = []
    for spec in ("small_unet.py:build", "small_unet.py:build_test", "fx_unet.py:build",
                 "fx_uvit.py:build"):
        try:
            model = models.load(os.path.join(ROOT, "examples", spec), seed=0,
                                dtype=torch.float32).to("cuda")
            batch = model.make_batch(4, seed=1, device="cuda")
            loss = model.loss_sum(model(batch), batch)
            loss.backward()
            print(f"{spec}: step on cuda, loss {loss.item():.6f}")
        except Exception as e:  # report every model, not only the first failure
            failures.append(f"{spec}: {type(e).__name__}: {e}")
    return failures


def pulse_run_cuda(binary, out):
    from test_trainer import halved_profile
    profile = os.path.join(ROOT, "profiles", "models", "small-unet-cpu.json")
    bf16 = os.path.join(out, "bf16-profile.json")
    halved_profile(profile, bf16)
    cluster = os.path.join(ROOT, "profiles", "clusters", "cpu-localhost.json")
    losses, failures = {}, []
    for dtype, prof in (("float32", profile), ("bfloat16", bf16), ("float16", bf16)):
        plan = os.path.join(out, f"{dtype}.plan.json")
        subprocess.run([binary, "plan", "--model", prof, "--cluster", cluster, "--pp", "1",
                        "--dp", "1", "--global-batch", "8", "--microbatch-size", "2",
                        "--family", "v", "-o", plan, "--quiet"], check=True)
        run = os.path.join(out, dtype)
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "torch_runtime",
                                                             "runtime.py"),
                               "--plan", plan, "--model",
                               os.path.join(ROOT, "examples", "small_unet.py") + ":build",
                               "--dtype", dtype, "--device", "cuda", "--iterations", "3",
                               "--out", run, "--timeout", "240"],
                              capture_output=True, text=True, timeout=300)
        print(proc.stderr[-2000:])
        if proc.returncode != 0:
            failures.append(f"pulse-run --dtype {dtype} on cuda exited {proc.returncode}")
            continue
        with open(os.path.join(run, "summary.json")) as f:
            losses[dtype] = json.load(f)["loss"]
    print(json.dumps(losses))
    for dtype in ("bfloat16", "float16"):
        if dtype in losses and "float32" in losses:
            first, ref = losses[dtype][0], losses["float32"][0]
            if abs(first - ref) > 0.05 * ref or not all(map(math.isfinite, losses[dtype])):
                failures.append(f"{dtype}: losses {losses[dtype]} against float32 {ref}")
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failures = example_steps() + pulse_run_cuda(args.binary, args.out)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
