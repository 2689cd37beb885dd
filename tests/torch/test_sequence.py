#!/usr/bin/python3
"""pulse-run executes Ulysses sequence parallelism as the plan lays it out: the example DiT
(examples/small_dit.py:build_test, float64), planned with `--sequence 2x1` on the CPU
cluster, trained on pp x dp x 2 gloo processes, has one process's losses, gradients and
parameters, and sends the plan's point-to-point bytes on each of a group's pipelines.

    test_sequence.py --binary build/pulse-plan --pp 1 --dp 1 [--zero 2]

With --zero N the plan is made with --zero N and trained with Adam (ZeRO-1 on
ZeroRedundancyOptimizer, ZeRO-2/3 on FSDP, sharded over the dp x 2 processes that sum each
gradient), against one-process Adam.

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
        zero = ["--zero", str(OPTS.zero)] if OPTS.zero is not None else []
        cls.plan = common.plan(OPTS.binary, PROFILE, plan_path, "--sequence", "2x1",
                               "--pp", str(OPTS.pp), "--dp", str(OPTS.dp),
                               "--global-batch", str(GLOBAL_BATCH), *zero)
        optimizer, lr = ("adam", "0.01") if zero else ("sgd", "0.1")
        out = os.path.join(cls.tmp.name, "run")
        cls.proc = common.run([sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"),
                               "--plan", plan_path, "--model", MODEL, "--iterations",
                               str(ITERATIONS), "--seed", "0", "--optimizer", optimizer,
                               "--lr", lr, "--out", out, "--timeout", "240"])
        with open(os.path.join(out, "summary.json")) as f:
            cls.summary = json.load(f)
        cls.processes = 2 * OPTS.pp * OPTS.dp
        cls.ranks = [torch.load(os.path.join(out, f"rank{r}.pt"))
                     for r in range(cls.processes)]
        model = blocklist.load_factory(MODEL)(seed=0, dtype=torch.float64)
        cls.ref = reference.reference_train(model, GLOBAL_BATCH, 0, ITERATIONS,
                                            optim.Config(optimizer, float(lr)))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_plan_lays_out_ulysses_2(self):
        par, rank_map = self.plan["parallelism"], self.plan["rank_map"]
        self.assertEqual(par["sequence"], {"ulysses": 2, "ring": 1, "degree": 2})
        self.assertEqual((par["pp"], par["dp"]), (OPTS.pp, OPTS.dp))
        self.assertEqual(rank_map["world_size"], OPTS.pp * OPTS.dp)
        self.assertEqual(rank_map["sequence_groups"],
                         [[2 * i, 2 * i + 1] for i in range(OPTS.pp * OPTS.dp)])

    def test_every_process_ran_its_share(self):
        groups = self.plan["rank_map"]["sequence_groups"]
        self.assertEqual(self.summary["world_size"], self.processes)
        for r, result in enumerate(self.ranks):
            seq = result["executed"]["sequence"]
            self.assertEqual(seq, {"ulysses": 2, "index": r % 2, "group": groups[r // 2]}, r)
            self.assertEqual(result["replica"], r // 2 // OPTS.pp)
        self.assertIn("Ulysses 2 (all-to-all over ranks [0, 1])", self.proc.stderr)
        sharding = {None: "all-reduce", 0: "all-reduce", 1: "ZeroRedundancyOptimizer",
                    2: "FSDP fully_shard", 3: "FSDP fully_shard"}[OPTS.zero]
        for result in self.ranks:
            self.assertEqual(result["executed"]["sharding"], sharding)
            self.assertEqual(result["executed"]["zero_stage"], OPTS.zero or 0)

    def test_the_tokens_are_split(self):
        """The two processes of a group see different halves: their losses differ, and
        the sum over all processes is the one-process loss."""
        last = [r for r in range(self.processes) if self.ranks[r]["stages"][-1] ==
                len(self.plan["stages"]) - 1]  # the processes that compute the loss
        self.assertEqual(len(last), 2 * OPTS.dp)
        for a, b in zip(last[::2], last[1::2]):
            la, lb = self.ranks[a]["losses"], self.ranks[b]["losses"]
            self.assertGreater(abs(la[0] - lb[0]), 1e-3 * abs(la[0]), (la, lb))

    def test_losses(self):
        for got, want in zip(self.summary["loss"], self.ref["losses"]):
            self.assertLessEqual(abs(got - want), TOLERANCE * abs(want), (got, want))

    def test_bytes_are_the_plans_on_each_pipeline(self):
        """The plan counts one process of each group (the first ranks'); every process of
        the group sends as much, on its own share of the tokens."""
        comm = self.plan["comm"]
        self.assertEqual(self.summary["p2p_bytes_per_iteration"],
                         2 * comm["p2p_bytes_per_iteration"])
        for kind in ("activation", "skip", "carried"):
            self.assertEqual(self.summary["p2p_bytes_by_kind"][kind],
                             2 * comm[f"{kind}_bytes_per_iteration"], kind)

    def check_named(self, key):
        """Per replica and share of the tokens: its pipeline's processes together hold every
        parameter, each as one process has it."""
        for replica in range(OPTS.dp):
            for index in range(2):
                got = {}
                for r, result in enumerate(self.ranks):
                    if result["replica"] == replica and r % 2 == index:
                        self.assertFalse(set(got) & set(result[key]), f"rank {r}: twice")
                        got.update(result[key])
                where = f"replica {replica}, share {index}"
                self.assertEqual(set(got), set(self.ref[key]), f"{where}: parameter names")
                bad = [n for n in got if not close(got[n], self.ref[key][n], TOLERANCE)]
                self.assertFalse(bad, f"{where}: {key} differ for {bad[:8]}")

    def test_gradients(self):
        self.check_named("grads")

    def test_parameters_after_the_steps(self):
        self.check_named("params")


if __name__ == "__main__":
    OPTS, argv = common.main([(("--pp",), {"type": int, "default": 1}),
                              (("--dp",), {"type": int, "default": 1}),
                              (("--zero",), {"type": int, "choices": (1, 2, 3)})])
    common.skip_unless_planner_has(OPTS.binary, "--sequence")
    unittest.main(argv=argv)
