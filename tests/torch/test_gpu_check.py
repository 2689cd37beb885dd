#!/usr/bin/python3
"""scripts/gpu_check.sh --dry-run: the GPU check's every step at tiny sizes on the CPU.

The script is what a lent GPU runs once, so it must work the first time: this runs it
end to end (the tiny SD2 at 64 and 128 px, microbatch 1 and 2, the block profiles, a
one-stage pulse-run) and checks what it leaves in OUT: few files (the device returns at
most 8), a results JSON without a failed step, whole-step times and profiles at every size,
profiles the schema accepts and pulse-plan plans, pulse-run's iterations, and the table.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import common

SCRIPT = os.path.join(common.ROOT, "scripts", "gpu_check.sh")
SCHEMA = os.path.join(common.ROOT, "schema", "model.schema.json")
OPTS = None


@common.requires_torch
class DryRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, "out")
        env = dict(os.environ, PYTHON=sys.executable)
        cls.proc = subprocess.run([SCRIPT, cls.out, "--dry-run"], env=env, cwd=common.ROOT,
                                  capture_output=True, text=True, timeout=280)
        with open(os.path.join(cls.out, "gpu_check.json")) as f:
            cls.results = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_runs_every_step_without_error(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr[-3000:])
        steps = self.results["steps"]
        self.assertEqual(sorted(steps), ["profile-128", "profile-64", "pulse-run",
                                         "whole-128", "whole-64"])
        for name, step in steps.items():
            self.assertNotIn("error", step, f"{name}: {step.get('traceback')}")
        self.assertEqual(self.results["environment"]["device"], "CPU")

    def test_few_small_files(self):
        files = sorted(os.listdir(self.out))
        self.assertEqual(files, ["gpu_check.json", "gpu_check.log",
                                 "sd2-unet-128.cpu-fp32.profile.json",
                                 "sd2-unet-64.cpu-fp32.profile.json"])

    def test_whole_steps_at_every_size(self):
        for image in (64, 128):
            rows = self.results["steps"][f"whole-{image}"]["sizes"]
            self.assertEqual([r["microbatch"] for r in rows], [1, 2])
            for r in rows:
                self.assertGreater(r["step_s"], 0)
                self.assertEqual(len(r["timed_steps"]), 2)

    def test_profiles_are_valid_and_plan(self):
        import jsonschema
        with open(SCHEMA) as f:
            schema = json.load(f)
        for image in (64, 128):
            step = self.results["steps"][f"profile-{image}"]
            path = os.path.join(self.out, step["file"])
            with open(path) as f:
                prof = json.load(f)
            jsonschema.validate(prof, schema)
            self.assertEqual(len(prof["layers"]), 47)
            self.assertEqual(len(prof["skips"]), 12)
            self.assertEqual(prof["timing"]["microbatch_sizes"], [1, 2])
            self.assertEqual([s["microbatch"] for s in step["summaries"]], [1, 2])
            plan = common.plan(OPTS.binary, path, os.path.join(self.tmp.name, "p.json"),
                               "--pp", "1", "--dp", "1", "--microbatch-size", "1",
                               "--global-batch", "2")
            self.assertEqual(sum(len(s["layers"]) for s in plan["stages"]), 47)
            self.assertEqual(plan["inputs"]["model"]["provenance"], "measured")

    def test_pulse_run_ran_the_plan(self):
        attempts = self.results["steps"]["pulse-run"]["attempts"]
        self.assertTrue(attempts[0]["ok"], attempts)
        self.assertEqual(attempts[0]["dtype"], "float32")
        self.assertEqual(len(attempts[0]["iteration_s"]), 2)
        comp = self.results["comparisons"]["pulse_run_vs_profile"]
        self.assertGreater(comp["measured_over_predicted"], 0)

    def test_prints_the_table(self):
        self.assertIn("px  mb   step ms", self.proc.stdout)
        self.assertIn("pulse-run pp 1, float32, 2 x microbatch 1", self.proc.stdout)
        with open(os.path.join(self.out, "gpu_check.log")) as f:
            self.assertIn("step pulse-run: done", f.read())


def load_gpu_check():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "gpu_check", os.path.join(common.ROOT, "scripts", "gpu_check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@common.requires_torch
class OutOfMemory(unittest.TestCase):
    """A size that runs out of memory (as 768 px at microbatch 32 may on an 80 GB GPU) is
    recorded, the larger ones skipped, the profile measured at the sizes that fit; the
    out-of-memory error stood in by a RuntimeError with CUDA's message."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        gc = load_gpu_check()
        self.gc = gc
        self.check = gc.Check(gc.parse_args([self.tmp.name, "--dry-run", "--sizes", "1,2,4",
                                             "--images", "64"]))

    def tearDown(self):
        self.check.log_file.close()
        self.tmp.cleanup()

    def test_whole_steps_record_and_skip(self):
        real = self.check.steptimer.time_plain_step

        def step(model, batch, b, clock):
            if b >= 2:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return real(model, batch, b, clock)
        self.check.steptimer.time_plain_step = step
        try:
            rows = self.gc.whole_steps(self.check, 64, 60)["sizes"]
        finally:
            self.check.steptimer.time_plain_step = real
        self.assertIn("step_s", rows[0])
        self.assertTrue(rows[1]["out_of_memory"])
        self.assertEqual(rows[2], {"microbatch": 4, "skipped": "microbatch 2 ran out of memory"})
        self.check.results["steps"]["whole-64"] = {"sizes": rows}
        self.assertEqual(self.gc.profile_sizes(self.check, 64, 60)[0], [1])

    def test_profile_drops_the_largest_size_that_does_not_fit(self):
        real = self.check.profiler.run_profile
        tried = []

        def run_profile(model, args, device):
            tried.append(list(args.sizes))
            if 2 in args.sizes:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return real(model, args, device)
        self.check.profiler.run_profile = run_profile
        try:
            step = self.gc.profile_step(self.check, 64, 120)
        finally:
            self.check.profiler.run_profile = real
        self.assertEqual(tried, [[1, 2, 4], [1, 2], [1]])
        self.assertEqual(step["sizes"], [1])
        self.assertEqual([n.split(":")[0] for n in step["notes"]],
                         ["microbatch 4", "microbatch 2"])
        self.assertTrue(os.path.exists(os.path.join(self.tmp.name, step["file"])))


class Usage(unittest.TestCase):
    def test_no_out_is_a_usage_error(self):
        proc = subprocess.run([SCRIPT], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("usage", proc.stderr)


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
