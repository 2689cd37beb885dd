"""Shared helpers of the PyTorch tests (front end and runtime)."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUNTIME_DIR = os.path.join(ROOT, "examples", "torch_runtime")  # runtime.py: pulse-run uninstalled
PYTHON_DIR = os.path.join(ROOT, "python")
sys.path.insert(0, PYTHON_DIR)  # the pulse_runtime package, uninstalled

SKIP_RETURN_CODE = 77  # CTest reports the test as skipped (SKIP_RETURN_CODE in CMakeLists)
MIN_TORCH = (2, 6)

# tests/torch/CMakeLists.txt sets PULSE_REQUIRE_TORCH=2.6 unless configured with
# -DPULSE_REQUIRE_TORCH=OFF: then a missing or older PyTorch fails the test instead of
# skipping it (CI must never report a torch test skipped for the version).
REQUIRED = os.environ.get("PULSE_REQUIRE_TORCH", "0") not in ("", "0")


def _torch_error():
    try:
        import torch
    except ImportError as e:
        return f"PyTorch is not importable by {sys.executable} ({e})"
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < MIN_TORCH:
        return (f"PyTorch {torch.__version__} under {sys.executable} is older than "
                f"{MIN_TORCH[0]}.{MIN_TORCH[1]}")
    return None


TORCH_ERROR = _torch_error()
if TORCH_ERROR:
    TORCH_ERROR += ("; scripts/setup.sh makes build-venv/ with PyTorch 2.13.0 (configure with "
                    "-DPULSE_TORCH_PYTHON=build-venv/bin/python)")

requires_torch = unittest.skipIf(TORCH_ERROR is not None, TORCH_ERROR or "")

CPU_CLUSTER = os.path.join(ROOT, "profiles", "clusters", "cpu-localhost.json")
TEST_PROFILE = os.path.join(ROOT, "tests", "torch", "data", "small-unet-test-f64.json")
MEASURED_PROFILE = os.path.join(ROOT, "profiles", "models", "small-unet-cpu.json")
SMALL_UNET = os.path.join(ROOT, "examples", "small_unet.py")


def run(cmd, cwd=ROOT, **kw):
    """Run a command, fail the test with its output when it exits non-zero."""
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, **kw)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    return proc


PROFILE_PRECISION = {"fp64": "fp64", "fp32": "fp32", "bf16": "bf16", "mixed": "mixed"}


def plan(binary, model, out, *options):
    """`pulse-plan plan` on the CPU cluster. Without --precision in `options`, the plan is made
    for the regime the profile was measured in (its `dtype`: fp64, fp32, bf16 or mixed), as
    pulse-run then runs it (a plan for another precision is refused)."""
    if "--precision" not in options:
        with open(model) as f:
            dtype = json.load(f).get("dtype")
        if dtype in PROFILE_PRECISION:
            options = (*options, "--precision", PROFILE_PRECISION[dtype])
    run([binary, "plan", "--model", model, "--cluster", CPU_CLUSTER, "-o", out, "--quiet",
         *options])
    with open(out) as f:
        return json.load(f)


def plan_help(binary):
    return subprocess.run([binary, "plan", "--help"], capture_output=True, text=True).stdout


def skip_unless_planner_has(binary, *words):
    """Exit 77 (skipped) when this pulse-plan's `plan --help` lacks an option or strategy
    a test needs: the runtime supports more than some planner builds offer."""
    text = plan_help(binary)
    missing = [w for w in words if w not in text]
    if missing:
        print(f"SKIP: {binary} plan --help does not mention {missing}")
        sys.exit(SKIP_RETURN_CODE)


def main(argv_options):
    """Parse the options every test file takes, then run unittest (exit 77 without torch)."""
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True, help="path to pulse-plan")
    for args, kwargs in argv_options:
        p.add_argument(*args, **kwargs)
    opts, rest = p.parse_known_args()
    if TORCH_ERROR is not None:
        if REQUIRED:
            print(f"FAIL: {TORCH_ERROR} (PULSE_REQUIRE_TORCH)")
            sys.exit(1)
        print(f"SKIP: {TORCH_ERROR}")
        sys.exit(SKIP_RETURN_CODE)
    return opts, [sys.argv[0]] + rest


class TempDirCase(unittest.TestCase):
    """A test case with a temporary folder, removed after each test."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)
