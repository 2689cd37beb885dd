#!/usr/bin/python3
"""scripts/gpu_check.sh --dry-run: the GPU check's every step at tiny sizes on the CPU.

The script is what a lent GPU runs once, so it must work the first time: this runs it
end to end (the tiny SD2 at 64 and 128 px, microbatch 1 and 2, the block profiles, a
one-stage pulse-run) and checks what it leaves in OUT: four files, a results JSON without
a failed step, whole-step times and profiles at every size, profiles the schema accepts
and pulse-plan plans, pulse-run's iterations, and the table. Every step ran in a process
of its own, and the parent never imported torch (on the GPU the first run's steps shared
one process, which kept 139 GiB and left pulse-run none).

Without the dry run: a size or a profile that runs out of memory (stood in by a
RuntimeError with CUDA's message), and a step killed at the end of its share of the time.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
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
        # The budget is a safety on the GPU machine; here it only has to outlast a loaded
        # CI machine (PyTorch 2.13 on 2 shared cores took 200-270 s of the default 270; at a
        # load of 14 on 2 cores, 20 s a step at 64 px, 600 s left microbatch 2 out). As much
        # as the test's CTest timeout (900 s) leaves.
        cls.proc = subprocess.run([SCRIPT, cls.out, "--dry-run", "--budget-s", "840"], env=env,
                                  cwd=common.ROOT, capture_output=True, text=True, timeout=870)
        with open(os.path.join(cls.out, "gpu_check.json")) as f:
            cls.results = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_runs_every_step_without_error(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr[-3000:])
        steps = self.results["steps"]
        self.assertEqual(sorted(steps), ["profile-128", "profile-64", "pulse-run-float32",
                                         "whole-128", "whole-64"])
        for name, step in steps.items():
            self.assertNotIn("error", step, f"{name}: {step.get('traceback')}")
        self.assertEqual(self.results["environment"]["device"], "CPU")

    def test_each_step_in_its_own_process_and_none_in_the_parent(self):
        pids = [step["pid"] for step in self.results["steps"].values()]
        parent = self.results["parent"]
        self.assertEqual(len(set(pids)), 5, pids)
        self.assertNotIn(parent["pid"], pids)
        self.assertFalse(parent["torch_imported"])

    def test_four_files(self):
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
            summaries = step["summaries"]
            self.assertEqual([s["microbatch"] for s in summaries], [1, 2])
            for s, k in zip(summaries, range(2)):
                layers = sum(l["forward_s"]["CPU"][k] + l["backward_s"]["CPU"][k]
                             for l in prof["layers"])
                self.assertAlmostEqual(layers, s["whole_step_s"], delta=1e-7)
            plan = common.plan(OPTS.binary, path, os.path.join(self.tmp.name, "p.json"),
                               "--pp", "1", "--dp", "1", "--microbatch-size", "1",
                               "--global-batch", "2")
            self.assertEqual(sum(len(s["layers"]) for s in plan["stages"]), 47)
            self.assertEqual(plan["inputs"]["model"]["provenance"], "measured")

    def test_pulse_run_ran_the_plan(self):
        run = self.results["steps"]["pulse-run-float32"]
        self.assertTrue(run["ok"], run)
        self.assertEqual(run["dtype"], "float32")
        self.assertEqual(len(run["iteration_s"]), 2)
        comp = self.results["comparisons"]
        self.assertEqual([c["pulse_run_dtype"] for c in comp], ["float32"])
        self.assertGreater(comp[0]["measured_over_predicted"], 0)

    def test_prints_the_table(self):
        self.assertIn("px  mb   step ms", self.proc.stdout)
        self.assertIn("pulse-run pp 1, float32, 2 x microbatch 1", self.proc.stdout)
        with open(os.path.join(self.out, "gpu_check.log")) as f:
            log = f.read()
        self.assertIn("step pulse-run-float32: done", log)
        self.assertIn("  | pulse-run: iteration 2/2", log)  # the step's own output


def load_script(name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(common.ROOT, "scripts", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OOM = "CUDA out of memory. Tried to allocate 2.00 GiB"


@common.requires_torch
class OutOfMemory(unittest.TestCase):
    """A size that runs out of memory (as 768 px at microbatch 32 may on an 80 GB GPU) is
    recorded, the larger ones skipped; a profile that does is measured again, in a fresh
    process, without its largest size."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.gc = load_script("gpu_check")
        self.steps = load_script("gpu_check_steps")
        self.check = self.gc.Check(self.gc.parse_args(
            [self.tmp.name, "--dry-run", "--sizes", "1,2,4", "--images", "64"]))
        self.step = self.steps.Step(self.check.results["options"])

    def tearDown(self):
        self.check.close()
        self.tmp.cleanup()

    def test_whole_steps_record_and_skip(self):
        timer = self.steps.steptimer
        real = timer.time_plain_step

        def step(model, batch, b, clock):
            if b >= 2:
                raise RuntimeError(OOM)
            return real(model, batch, b, clock)
        timer.time_plain_step = step
        try:
            rows = self.steps.whole(self.step, {"image": 64,
                                                "deadline_unix": time.time() + 600})["sizes"]
        finally:
            timer.time_plain_step = real
        self.assertIn("step_s", rows[0])
        self.assertTrue(rows[1]["out_of_memory"])
        self.assertEqual(rows[2], {"microbatch": 4, "skipped": "microbatch 2 ran out of memory"})
        self.check.results["steps"]["whole-64"] = {"sizes": rows}
        self.assertEqual(self.gc.profile_sizes(self.check, 64, 60)[0], [1])

    def test_the_profile_process_reports_out_of_memory(self):
        real = self.steps.profiler.run_profile

        def run_profile(model, args, device):
            raise RuntimeError(OOM)
        self.steps.profiler.run_profile = run_profile
        try:
            result = self.steps.profile(self.step, {"image": 64, "sizes": [1, 2]})
        finally:
            self.steps.profiler.run_profile = real
        self.assertTrue(result["out_of_memory"])
        self.assertEqual(os.listdir(self.tmp.name), ["gpu_check.log"])  # no profile written

    def test_profile_drops_the_largest_size_that_does_not_fit(self):
        tried = []

        def child(request, timeout_s):
            tried.append(list(request["sizes"]))
            if 2 in request["sizes"]:
                return {"out_of_memory": True, "error": OOM}, ""
            return {"file": "p.json", "sizes": request["sizes"], "summaries": []}, ""
        self.check.child = child
        step = self.gc.profile_step(self.check, 64)
        self.assertEqual(tried, [[1, 2, 4], [1, 2], [1]])
        self.assertEqual(step["sizes"], [1])
        self.assertNotIn("error", step)
        self.assertEqual([n.split(":")[0] for n in step["notes"]],
                         ["microbatch 4", "microbatch 2"])


@common.requires_torch
class Overrun(unittest.TestCase):
    def test_a_step_past_its_time_is_killed_and_recorded(self):
        gc = load_script("gpu_check")
        with tempfile.TemporaryDirectory() as tmp:
            check = gc.Check(gc.parse_args([tmp, "--dry-run", "--images", "64"]))
            try:
                t0 = time.monotonic()
                result, _ = check.child({"step": "whole", "image": 64,
                                          "deadline_unix": time.time() + 60}, 1)
            finally:
                check.close()
        self.assertLess(time.monotonic() - t0, 30)
        self.assertEqual(result["error"], "killed after 1 s (its share of the budget)")

    def test_a_stopped_check_stops_its_step(self):
        """SIGTERM (a timeout) to the check ends the step's process too, which runs in a
        session of its own and would otherwise keep the GPU."""
        import signal
        with tempfile.TemporaryDirectory() as tmp:
            parent = subprocess.Popen(
                [sys.executable, os.path.join(common.ROOT, "scripts", "gpu_check.py"), tmp,
                 "--dry-run", "--images", "64", "--skip", "profile,pulse-run"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                step = None
                for _ in range(200):
                    step = step_process(parent.pid)
                    if step or parent.poll() is not None:
                        break
                    time.sleep(0.1)
                self.assertIsNotNone(step, "no step process seen")
                parent.send_signal(signal.SIGTERM)
                self.assertEqual(parent.wait(timeout=30), 128 + signal.SIGTERM)
            finally:
                if parent.poll() is None:
                    parent.kill()
                    parent.wait()
        for _ in range(50):  # reaped by the check, or by init once orphaned
            if not os.path.exists(f"/proc/{step}"):
                break
            time.sleep(0.1)
        self.assertFalse(os.path.exists(f"/proc/{step}"), f"step process {step} still runs")


def step_process(parent_pid):
    """The pid of a gpu_check_steps.py process whose parent is parent_pid, or None."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent_pid and b"gpu_check_steps.py" in cmd:
            return int(pid)
    return None


class Usage(unittest.TestCase):
    def test_no_out_is_a_usage_error(self):
        proc = subprocess.run([SCRIPT], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("usage", proc.stderr)


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
