#!/usr/bin/python3
"""pulse-run executes Ulysses sequence parallelism as the plan lays it out: the example DiT
(examples/small_dit.py:build_test, float64), planned with `--sequence 2x1` on the CPU
cluster, trained on dp x 2 gloo processes, has one process's losses, gradients and
parameters.

    test_sequence.py --binary build/pulse-plan --dp 1

Each process of a sequence group holds half the tokens of every sample (their losses differ
and add up to the sample's), attention exchanges q, k, v and its output by all-to-all, and the
gradients are summed over the group and the replicas: a wrong all-to-all (chunks in another
order, the wrong dimension) or a missing reduction changes the gradients beyond the
tolerance. The refusals (heads the degree does not divide, groups that disagree with the
rank map) are cases of the runtime's hostile catalogue (scripts/hostile_runtime/catalogue.py,
class "sequence").
"""

import json
import os
import sys
import tempfile
import unittest

import common

OPTS = None
PROFILE = os.path.join(common.ROOT, "tests", "torch", "data", "small-dit-test-f64.json")
MODEL = os.path.join(common.ROOT, "examples", "small_dit.py") + ":build_test"
ITERATIONS = 2
GLOBAL_BATCH = 4
TOLERANCE = 1e-5  # as test_runtime.py (float64: the runs agree to about 1e-15)


def close(a, b, tol):
    """Every element within tol relative to the tensor's largest reference value."""
    scale = b.abs().max().item()
    return bool(((a - b).abs() <= tol * scale).all()) if scale > 0 else bool((a == 0).all())


@common.requires_torch
class Ulysses(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        from pulse_runtime import blocklist, optim, reference
        cls.tmp = tempfile.TemporaryDirectory()
        plan_path = os.path.join(cls.tmp.name, "plan.json")
        cls.plan = common.plan(OPTS.binary, PROFILE, plan_path, "--sequence", "2x1",
                               "--pp", "1", "--dp", str(OPTS.dp),
                               "--global-batch", str(GLOBAL_BATCH))
        out = os.path.join(cls.tmp.name, "run")
        cls.proc = common.run([sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"),
                               "--plan", plan_path, "--model", MODEL, "--iterations",
                               str(ITERATIONS), "--seed", "0", "--lr", "0.1", "--out", out,
                               "--timeout", "240"])
        with open(os.path.join(out, "summary.json")) as f:
            cls.summary = json.load(f)
        cls.processes = 2 * OPTS.dp
        cls.ranks = [torch.load(os.path.join(out, f"rank{r}.pt"))
                     for r in range(cls.processes)]
        model = blocklist.load_factory(MODEL)(seed=0, dtype=torch.float64)
        cls.ref = reference.reference_train(model, GLOBAL_BATCH, 0, ITERATIONS,
                                            optim.Config("sgd", 0.1))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_plan_lays_out_ulysses_2(self):
        par, rank_map = self.plan["parallelism"], self.plan["rank_map"]
        self.assertEqual(par["sequence"], {"ulysses": 2, "ring": 1, "degree": 2})
        self.assertEqual((par["pp"], par["dp"]), (1, OPTS.dp))
        self.assertEqual(rank_map["world_size"], OPTS.dp)
        self.assertEqual(rank_map["sequence_groups"],
                         [[2 * i, 2 * i + 1] for i in range(OPTS.dp)])

    def test_every_process_ran_its_share(self):
        groups = self.plan["rank_map"]["sequence_groups"]
        self.assertEqual(self.summary["world_size"], self.processes)
        for r, result in enumerate(self.ranks):
            seq = result["executed"]["sequence"]
            self.assertEqual(seq, {"ulysses": 2, "index": r % 2, "group": groups[r // 2]}, r)
            self.assertEqual(result["replica"], r // 2)
        self.assertIn("Ulysses 2 (all-to-all over ranks [0, 1])", self.proc.stderr)

    def test_the_tokens_are_split(self):
        """The two processes of a group see different halves: their losses differ, and
        the sum over all processes is the one-process loss."""
        for i in range(OPTS.dp):
            a, b = self.ranks[2 * i]["losses"], self.ranks[2 * i + 1]["losses"]
            self.assertGreater(abs(a[0] - b[0]), 1e-3 * abs(a[0]), (a, b))

    def test_losses(self):
        for got, want in zip(self.summary["loss"], self.ref["losses"]):
            self.assertLessEqual(abs(got - want), TOLERANCE * abs(want), (got, want))

    def check_named(self, key):
        for r, result in enumerate(self.ranks):
            got = result[key]
            self.assertEqual(set(got), set(self.ref[key]), f"rank {r}: parameter names")
            bad = [n for n in got if not close(got[n], self.ref[key][n], TOLERANCE)]
            self.assertFalse(bad, f"rank {r}: {key} differ for {bad[:8]}")

    def test_gradients(self):
        self.check_named("grads")

    def test_parameters_after_the_steps(self):
        self.check_named("params")


if __name__ == "__main__":
    OPTS, argv = common.main([(("--dp",), {"type": int, "default": 1})])
    common.skip_unless_planner_has(OPTS.binary, "--sequence")
    unittest.main(argv=argv)
