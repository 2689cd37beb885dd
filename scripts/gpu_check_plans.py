#!/usr/bin/env python3
"""Regenerate the one-stage plans the GPU check runs with pulse-run (scripts/gpu_check_data/).

    /usr/bin/python3 scripts/gpu_check_plans.py --binary build/pulse-plan

The GPU machine has no pulse-plan build, so scripts/gpu_check.py runs checked-in plans:

- sd2-unet-512-pp1-bf16.plan.json: the shipped analytic profile profiles/models/sd2-unet-512.json
  (its fp16 bytes are bf16's) on one V100 of a DGX-1, pp 1, 4 microbatches of 2;
- sd2-unet-512-pp1-fp32.plan.json: the same with every byte count doubled, for a float32
  run (a derived profile, written to a temporary directory only);
- sd2-tiny-pp1-fp32.plan.json: a CPU profile of examples/sd2_unet.py:build_tiny
  (sd2-tiny-cpu.profile.json, kept beside it) on cpu-localhost, 2 microbatches of 1, for
  --dry-run.

The device type only names the plans' times; pulse-run needs their structure (stages,
schedule, skips, carried tensors) and bytes, which tests/torch/test_sd2_unet.py checks
against the model.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "scripts", "gpu_check_data")
FULL = ("dgx1-v100-32gb-1n.json", "--microbatch-size", "2", "--global-batch", "8")


def plan_with(binary: str, model: str, cluster: str, out: str, *options: str) -> None:
    subprocess.run([binary, "plan", "--model", model, "--cluster",
                    os.path.join(ROOT, "profiles", "clusters", cluster), "-o", out, "--quiet",
                    "--pp", "1", "--dp", "1", *options], check=True)


def fp32_bytes(profile: dict) -> dict:
    """The profile with every byte count doubled: float32 tensors instead of 16-bit ones."""
    profile = json.loads(json.dumps(profile))
    profile["name"], profile["dtype"] = profile["name"] + "-fp32-bytes", "fp32"
    profile["provenance"]["assumptions"].append(
        "Derived by scripts/gpu_check_plans.py: every byte count doubled (float32 tensors), "
        "times unchanged; for a float32 run of the runtime, not for planning.")
    for layer in profile["layers"]:
        layer["activation_bytes_per_sample"] *= 2
        layer["output_bytes_per_sample"] *= 2
    for t in profile["skips"] + profile["carried"]:
        t["bytes_per_sample"] *= 2
    return profile


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", required=True, help="pulse-plan")
    binary = p.parse_args().binary
    os.makedirs(DATA, exist_ok=True)
    shipped = os.path.join(ROOT, "profiles", "models", "sd2-unet-512.json")
    plan_with(binary, shipped, FULL[0], os.path.join(DATA, "sd2-unet-512-pp1-bf16.plan.json"),
              *FULL[1:])
    with open(shipped) as f:
        derived = fp32_bytes(json.load(f))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sd2-unet-512-fp32-bytes.json")
        with open(path, "w") as f:
            json.dump(derived, f, indent=2)
        plan_with(binary, path, FULL[0], os.path.join(DATA, "sd2-unet-512-pp1-fp32.plan.json"),
                  *FULL[1:], "--precision", "fp32")
    tiny = os.path.join(DATA, "sd2-tiny-cpu.profile.json")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "profile_torch.py"),
                    "--model", "examples/sd2_unet.py:build_tiny", "--sizes", "1,2",
                    "--warmup", "1", "--repeats", "3", "--name", "sd2-tiny-cpu", "-o", tiny],
                   check=True, cwd=ROOT)
    plan_with(binary, tiny, "cpu-localhost.json",
              os.path.join(DATA, "sd2-tiny-pp1-fp32.plan.json"),
              "--microbatch-size", "1", "--global-batch", "2", "--precision", "fp32")


if __name__ == "__main__":
    main()
