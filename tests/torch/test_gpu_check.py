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


class Usage(unittest.TestCase):
    def test_no_out_is_a_usage_error(self):
        proc = subprocess.run([SCRIPT], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("usage", proc.stderr)


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
