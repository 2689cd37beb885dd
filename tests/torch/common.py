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

try:
    import torch  # noqa: F401
    TORCH_ERROR = None
except ImportError as e:  # only a machine without python3-torch gets here
    TORCH_ERROR = f"PyTorch is not importable ({e}); install Debian's python3-torch"

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


def plan(binary, model, out, *options):
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
