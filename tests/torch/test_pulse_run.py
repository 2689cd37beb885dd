#!/usr/bin/python3
"""The pulse_runtime package as a user gets it: `pip install ./python` into a venv that sees
Debian's PyTorch, then `pulse-run` on plans from pulse-plan.

    test_pulse_run.py --binary build/pulse-plan [TestClass ...]

- Train: the test-size example UNet (float64) from a pp 2 x dp 2 plan on 4 CPU processes:
  loss, every gradient and every updated parameter equal one-process training; a progress
  line per iteration with the same loss.
- Resume: a run killed (SIGKILL to its process group) after a checkpoint and resumed with
  --resume ends with bit-identical parameters and losses to an uninterrupted run.
- ZeRO-1: a plan made with --zero 1, trained with Adam: parameters equal one-process Adam;
  each replica holds optimizer state for its half of the parameters only.
- Waves: a plan with 2 stages per side on each device (8 stages on 2 devices, zig-zag),
  with split backward and with dp 2: gradients equal one-process training.
- Torchrun: the same plan under torchrun (one process per rank, env://).
- Mismatch: plans that do not fit the model (another model size, another dtype, a renamed
  layer) stop before training with exit 2 and say what differs.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import common

sys.path.insert(0, os.path.join(common.ROOT, "tests"))
from plan_edits import wave_plan  # noqa: E402

OPTS = None
ENV = {}  # the venv, set up once


def close(a, b, tol):
    scale = b.abs().max().item()
    return bool(((a - b).abs() <= tol * scale).all()) if scale > 0 else bool((a == 0).all())


def setUpModule():
    """A venv and the package installed from a copy of python/ (pip builds in the source
    folder it is given), offline (--no-index): PyTorch is the one this test runs under
    (build-venv's, by a .pth file naming its site-packages), setuptools and wheel the system's
    (--system-site-packages, as python/README.md installs it)."""
    if common.TORCH_ERROR:
        return
    import torch
    ENV["tmp"] = tempfile.TemporaryDirectory()
    tmp = ENV["tmp"].name
    src = os.path.join(tmp, "src")
    shutil.copytree(common.PYTHON_DIR, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__"))
    venv = os.path.join(tmp, "venv")
    base = getattr(sys, "_base_executable", sys.executable)
    common.run([base, "-m", "venv", "--system-site-packages", venv])
    python = os.path.join(venv, "bin", "python")
    purelib = common.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                         ).stdout.strip()
    torch_site = os.path.dirname(os.path.dirname(torch.__file__))
    with open(os.path.join(purelib, "pulse-test-torch.pth"), "w") as f:
        f.write(torch_site + "\n")
    common.run([os.path.join(venv, "bin", "pip"), "install", "--quiet", "--no-build-isolation",
                "--no-index", "--no-deps", src])
    ENV["bin"] = os.path.join(venv, "bin")
    ENV["python"] = python


def tearDownModule():
    if "tmp" in ENV:
        ENV["tmp"].cleanup()


def pulse_run(*args, **kw):
    """pulse-run from the venv, from a folder outside the checkout (the installed package,
    not the source tree, must be what runs)."""
    return common.run([os.path.join(ENV["bin"], "pulse-run"), *args], cwd=ENV["tmp"].name,
                      **kw)


def load_ranks(out, world):
    import torch
    return [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]


def replica(ranks, index, key):
    merged = {}
    for r in ranks:
        if r["replica"] == index:
            merged.update(r[key])
    return merged


def test_model(dtype="float64"):
    from pulse_runtime import models
    import torch
    return models.load(common.SMALL_UNET + ":build_test", seed=0, dtype=getattr(torch, dtype))


class Base(common.TempDirCase):
    def plan(self, *options, profile=common.TEST_PROFILE):
        out = self.path("plan.json")
        return out, common.plan(OPTS.binary, profile, out, *options)

    def assert_matches(self, ranks, ref, dp, key, tol):
        for index in range(dp):
            got = replica(ranks, index, key)
            self.assertEqual(set(got), set(ref[key]), f"replica {index}: parameter names")
            bad = [n for n in got if not close(got[n], ref[key][n], tol)]
            self.assertFalse(bad, f"replica {index}: {key} differ for {bad[:8]}")


@common.requires_torch
class Train(Base):
    def test_pp2_dp2_equals_one_process(self):
        from pulse_runtime import optim, reference
        plan_path, plan = self.plan("--pp", "2", "--dp", "2", "--global-batch", "8",
                                    "--microbatch-size", "2")
        out = self.path("run")
        proc = pulse_run("--plan", plan_path, "--model", common.SMALL_UNET + ":build_test",
                         "--dtype", "float64", "--iterations", "2", "--out", out)
        ranks = load_ranks(out, 4)
        ref = reference.reference_train(test_model(), 8, 0, 2, optim.Config("sgd", 0.1))
        self.assert_matches(ranks, ref, 2, "grads", 1e-9)   # the second step's gradients
        self.assert_matches(ranks, ref, 2, "params", 1e-9)  # after two steps
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        for got, want in zip(summary["loss"], ref["losses"]):
            self.assertAlmostEqual(got, want, delta=1e-9 * want)
        progress = [line for line in proc.stderr.splitlines() if ": loss " in line]
        self.assertEqual(len(progress), 2, proc.stderr)
        self.assertIn(f"iteration 2/2: loss {ref['losses'][1]:.6f}", progress[1])
        self.assertEqual(summary["p2p_bytes_per_iteration"],
                         plan["comm"]["p2p_bytes_per_iteration"])


@common.requires_torch
class Resume(Base):
    ITERATIONS = 24

    def test_killed_and_resumed_equals_uninterrupted(self):
        import torch
        plan_path, _ = self.plan("--pp", "2", "--dp", "2", "--global-batch", "8",
                                 "--microbatch-size", "2")
        common_args = ["--plan", plan_path, "--model", common.SMALL_UNET + ":build_test",
                       "--dtype", "float64", "--iterations", str(self.ITERATIONS),
                       "--optimizer", "sgd", "--momentum", "0.9", "--quiet"]
        pulse_run(*common_args, "--out", self.path("full"))
        ck = self.path("ck")
        killed = subprocess.Popen([os.path.join(ENV["bin"], "pulse-run"), *common_args,
                                   "--checkpoint-dir", ck, "--checkpoint-every", "2", "--out",
                                   self.path("killed")], start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not self._complete_checkpoint(ck, 4) and killed.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        os.killpg(killed.pid, signal.SIGKILL)  # the launcher and its 4 forked ranks
        killed.wait()
        self.assertFalse(os.path.exists(self.path("killed")),
                         "the run finished before it was killed: nothing was tested")
        proc = pulse_run(*common_args, "--checkpoint-dir", ck, "--resume",
                         "--out", self.path("resumed"))
        self.assertNotIn("pulse-run:", proc.stderr)  # --quiet: no progress, no "resuming" line
        with open(os.path.join(self.path("resumed"), "summary.json")) as f:
            resumed = json.load(f)
        with open(os.path.join(self.path("full"), "summary.json")) as f:
            full = json.load(f)
        start = resumed["first_iteration"] - 1
        self.assertTrue(4 <= start < self.ITERATIONS, start)
        print(f"killed, resumed after iteration {start} of {self.ITERATIONS}", file=sys.stderr)
        self.assertEqual(resumed["loss"], full["loss"][start:])
        for a, b in zip(load_ranks(self.path("resumed"), 4), load_ranks(self.path("full"), 4)):
            for name, p in b["params"].items():
                self.assertTrue(torch.equal(a["params"][name], p), name)

    @staticmethod
    def _complete_checkpoint(root, at_least):
        if not os.path.isdir(root):
            return False
        for name in os.listdir(root):
            if name.startswith("iter-") and int(name[5:]) >= at_least and \
                    all(os.path.exists(os.path.join(root, name, f"rank{r}.pt")) for r in range(4)):
                return True
        return False

    def test_fresh_run_refuses_a_used_checkpoint_dir(self):
        plan_path, _ = self.plan("--pp", "2", "--dp", "1", "--global-batch", "4")
        ck = self.path("ck")
        args = ["--plan", plan_path, "--model", common.SMALL_UNET + ":build_test", "--dtype",
                "float64", "--checkpoint-dir", ck, "--quiet"]
        pulse_run(*args)
        proc = subprocess.run([os.path.join(ENV["bin"], "pulse-run"), *args],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("already holds checkpoints: pass --resume", proc.stderr)


@common.requires_torch
class Zero(Base):
    def test_zero1_adam_equals_one_process(self):
        from pulse_runtime import optim, reference
        plan_path, plan = self.plan("--pp", "2", "--dp", "2", "--global-batch", "8",
                                    "--microbatch-size", "2", "--zero", "1")
        self.assertEqual(plan["options"]["memory"]["zero_stage"], 1)
        args = ["--plan", plan_path, "--model", common.SMALL_UNET + ":build_test", "--dtype",
                "float64", "--iterations", "3", "--optimizer", "adam", "--lr", "0.01", "--quiet"]
        pulse_run(*args, "--out", self.path("zero"))
        pulse_run(*args, "--zero", "0", "--out", self.path("full"))
        zero, full = load_ranks(self.path("zero"), 4), load_ranks(self.path("full"), 4)
        ref = reference.reference_train(test_model(), 8, 0, 3, optim.Config("adam", 0.01))
        self.assert_matches(zero, ref, 2, "params", 1e-9)
        self.assert_matches(full, ref, 2, "params", 1e-9)
        for z, f in zip(zero, full):
            n = sum(p.numel() for p in f["params"].values())
            self.assertEqual((z["zero"], f["zero"]), (1, 0))
            self.assertEqual(z["executed"]["sharding"], "ZeroRedundancyOptimizer")
            self.assertEqual(f["optimizer_state_numel"], 2 * n)  # Adam: two moments
            # ZeroRedundancyOptimizer shares out whole tensors: each replica holds a part.
            self.assertTrue(0 < z["optimizer_state_numel"] < 2 * n, z["optimizer_state_numel"])
        # The two replicas of one pipeline device hold the two parts, together everything.
        for device in (0, 1):
            pair = [z for z in zero if z["device"] == device]
            n = sum(p.numel() for p in pair[0]["params"].values())
            self.assertEqual(sum(z["optimizer_state_numel"] for z in pair), 2 * n)


@common.requires_torch
class Waves(Base):
    def run_waves(self, dp, split):
        from pulse_runtime import optim, reference
        with open(common.TEST_PROFILE) as f:
            profile = json.load(f)
        gb = 4 * dp
        plan_path, plan = self.plan("--pp", "2", "--dp", str(dp), "--global-batch", str(gb),
                                    "--microbatch-size", "1",
                                    *(["--split-backward"] if split else []))
        plan = wave_plan(plan, profile)
        self.assertEqual([s["device"] for s in plan["stages"]], [0, 1, 1, 0, 0, 1, 1, 0])
        self.assertTrue(any(not s["local"] for s in plan["skips"]))
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        out = self.path("run")
        pulse_run("--plan", plan_path, "--model", common.SMALL_UNET + ":build_test",
                  "--dtype", "float64", "--out", out, "--quiet")
        ref = reference.reference_train(test_model(), gb, 0, 1, optim.Config("sgd", 0.1))
        ranks = load_ranks(out, 2 * dp)
        self.assertEqual({len([s for s in plan["stages"] if s["device"] == r["device"]])
                          for r in ranks}, {4})
        self.assert_matches(ranks, ref, dp, "grads", 1e-9)
        self.assert_matches(ranks, ref, dp, "params", 1e-9)

    def test_waves(self):
        self.run_waves(dp=1, split=False)

    def test_waves_split_backward_dp2(self):
        self.run_waves(dp=2, split=True)


@common.requires_torch
class Torchrun(Base):
    def test_under_torchrun(self):
        from pulse_runtime import optim, reference
        plan_path, _ = self.plan("--pp", "2", "--dp", "2", "--global-batch", "8",
                                 "--microbatch-size", "2")
        out = self.path("run")
        # Debian's torch 1.13 under Python 3.11 cannot parse torchrun's default --redirects 0
        # / --tee 0 (Python 3.11 no longer iterates zero-valued flag members); 1 and 2 work.
        common.run([ENV["python"], "-m", "torch.distributed.run", "--standalone",
                    "--nproc_per_node", "4", "--redirects", "1", "--tee", "2",
                    "--log_dir", self.path("logs"), "--monitor_interval", "0.2",
                    "-m", "pulse_runtime", "--plan", plan_path, "--model",
                    common.SMALL_UNET + ":build_test", "--dtype", "float64", "--out", out],
                   env=dict(os.environ, GLOO_SOCKET_IFNAME="lo"), cwd=ENV["tmp"].name)
        ref = reference.reference_train(test_model(), 8, 0, 1, optim.Config("sgd", 0.1))
        self.assert_matches(load_ranks(out, 4), ref, 2, "grads", 1e-9)


@common.requires_torch
class Mismatch(Base):
    def refused(self, plan_path, *args):
        proc = subprocess.run([os.path.join(ENV["bin"], "pulse-run"), "--plan", plan_path,
                               *args], capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(proc.stdout, "")
        return proc.stderr

    def test_other_model_size(self):
        plan_path, _ = self.plan("--pp", "2", "--global-batch", "4")
        err = self.refused(plan_path, "--model", common.SMALL_UNET + ":build", "--dtype",
                           "float64")
        self.assertIn("tensor sizes differ from the model's in fp64", err)
        self.assertIn("skip 'embed->up0_res1': plan 8192 bytes per sample, model 147456", err)

    def test_other_dtype(self):
        """A plan made for fp64 run as fp32: refused naming both; forced, the fp64 tensor
        sizes are not fp32's."""
        plan_path, _ = self.plan("--pp", "2", "--global-batch", "4")
        err = self.refused(plan_path, "--model", common.SMALL_UNET + ":build_test", "--dtype",
                           "float32")
        self.assertIn("the plan is made for precision fp64 ($.options.memory.precision), this "
                      "run asks for fp32 (--dtype float32)", err)
        err = self.refused(plan_path, "--model", common.SMALL_UNET + ":build_test",
                           "--precision", "fp32", "--force-precision")
        self.assertIn("in fp32 (was the profile measured in another dtype? --dtype)", err)

    def test_renamed_layer(self):
        plan_path, plan = self.plan("--pp", "2", "--global-batch", "4")
        # Renamed everywhere the plan names it (a plan naming a layer its stages lack is
        # refused by the reader before any model is compared: test_plan_reader.py).
        old = plan["stages"][1]["layers"][0]
        plan["stages"][1]["layers"][0] = "down9_res"
        for tensor in plan["skips"] + plan["carried"]:
            for end in ("producer", "consumer"):
                if tensor.get(end) == old:
                    tensor[end] = "down9_res"
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        err = self.refused(plan_path, "--model", common.SMALL_UNET + ":build_test", "--dtype",
                           "float64")
        self.assertIn("do not list the model's 15 layers in order (layers the model lacks: "
                      "['down9_res']; model layers in no stage:", err)

    def test_fx_model_against_a_block_list_plan(self):
        plan_path, _ = self.plan("--pp", "2", "--global-batch", "4")
        err = self.refused(plan_path, "--model",
                           os.path.join(common.ROOT, "examples", "fx_unet.py") + ":build")
        self.assertIn("layers the model lacks: ['embed',", err)


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
