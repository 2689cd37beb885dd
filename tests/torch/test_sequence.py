#!/usr/bin/python3
"""pulse-run executes sequence parallelism as the plan lays it out: the example DiT
(examples/small_dit.py:build_test, float64), planned with `--sequence UxR` (Ulysses U x ring
R) on the CPU cluster, trained on pp x dp x U x R gloo processes, has one process's losses,
gradients and parameters, and sends the plan's point-to-point bytes on each of a group's
pipelines.

    test_sequence.py --binary build/pulse-plan --sequence 2x1 --pp 1 --dp 1 [--zero 2]

With --zero N the plan is made with --zero N and trained with Adam (ZeRO-1 on
ZeroRedundancyOptimizer, ZeRO-2/3 on FSDP, sharded over the dp x degree processes that sum each
gradient), against one-process Adam.

Each process of a sequence group holds its share of the tokens of every sample (the shares'
losses differ and add up to the sample's), attention exchanges q, k, v and its output by
all-to-all (Ulysses) and passes keys and values around the ring (ring attention), and the
gradients are summed over the group and the replicas: a wrong exchange (chunks in another
order, a ring step left out) or a missing reduction changes the gradients beyond the
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
ULYSSES = RING = DEGREE = 1  # --sequence UxR (set in main)
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
        cls.plan = common.plan(OPTS.binary, PROFILE, plan_path, "--sequence", OPTS.sequence,
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
        cls.processes = DEGREE * OPTS.pp * OPTS.dp
        cls.ranks = [torch.load(os.path.join(out, f"rank{r}.pt"))
                     for r in range(cls.processes)]
        model = blocklist.load_factory(MODEL)(seed=0, dtype=torch.float64)
        cls.ref = reference.reference_train(model, GLOBAL_BATCH, 0, ITERATIONS,
                                            optim.Config(optimizer, float(lr)))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_plan_lays_out_the_sequence(self):
        par, rank_map = self.plan["parallelism"], self.plan["rank_map"]
        self.assertEqual(par["sequence"], {"ulysses": ULYSSES, "ring": RING, "degree": DEGREE})
        self.assertEqual((par["pp"], par["dp"]), (OPTS.pp, OPTS.dp))
        self.assertEqual(rank_map["world_size"], OPTS.pp * OPTS.dp)
        self.assertEqual(rank_map["sequence_groups"],
                         [list(range(DEGREE * i, DEGREE * (i + 1)))
                          for i in range(OPTS.pp * OPTS.dp)])

    def test_every_process_ran_its_share(self):
        groups = self.plan["rank_map"]["sequence_groups"]
        self.assertEqual(self.summary["world_size"], self.processes)
        for r, result in enumerate(self.ranks):
            seq = result["executed"]["sequence"]
            self.assertEqual(seq, {"ulysses": ULYSSES, "ring": RING, "index": r % DEGREE,
                                   "group": groups[r // DEGREE]}, r)
            self.assertEqual(result["replica"], r // DEGREE // OPTS.pp)
        layout = " x ".join([f"Ulysses {ULYSSES}"] * (ULYSSES > 1) + [f"ring {RING}"] * (RING > 1))
        self.assertIn(f"{layout} over ranks {groups[0]}", self.proc.stderr)
        sharding = {None: "all-reduce", 0: "all-reduce", 1: "ZeroRedundancyOptimizer",
                    2: "FSDP fully_shard", 3: "FSDP fully_shard"}[OPTS.zero]
        for result in self.ranks:
            self.assertEqual(result["executed"]["sharding"], sharding)
            self.assertEqual(result["executed"]["zero_stage"], OPTS.zero or 0)

    def test_the_tokens_are_split(self):
        """The processes of a group see different shares: their losses differ (and the sum
        over all processes is the one-process loss, test_losses)."""
        last = [r for r in range(self.processes) if self.ranks[r]["stages"][-1] ==
                len(self.plan["stages"]) - 1]  # the processes that compute the loss
        self.assertEqual(len(last), DEGREE * OPTS.dp)
        for first in last[::DEGREE]:
            la = self.ranks[first]["losses"]
            for other in range(first + 1, first + DEGREE):
                lb = self.ranks[other]["losses"]
                self.assertGreater(abs(la[0] - lb[0]), 1e-3 * abs(la[0]), (la, lb))

    def test_losses(self):
        for got, want in zip(self.summary["loss"], self.ref["losses"]):
            self.assertLessEqual(abs(got - want), TOLERANCE * abs(want), (got, want))

    def test_bytes_are_the_plans_on_each_pipeline(self):
        """The plan counts one process of each group (the first ranks'); every process of
        the group sends as much, on its own share of the tokens."""
        comm = self.plan["comm"]
        self.assertEqual(self.summary["p2p_bytes_per_iteration"],
                         DEGREE * comm["p2p_bytes_per_iteration"])
        for kind in ("activation", "skip", "carried"):
            self.assertEqual(self.summary["p2p_bytes_by_kind"][kind],
                             DEGREE * comm[f"{kind}_bytes_per_iteration"], kind)

    def check_named(self, key):
        """Per replica and share of the tokens: its pipeline's processes together hold every
        parameter, each as one process has it."""
        for replica in range(OPTS.dp):
            for index in range(DEGREE):
                got = {}
                for r, result in enumerate(self.ranks):
                    if result["replica"] == replica and r % DEGREE == index:
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
    OPTS, argv = common.main([(("--sequence",), {"default": "2x1"}),
                              (("--pp",), {"type": int, "default": 1}),
                              (("--dp",), {"type": int, "default": 1}),
                              (("--zero",), {"type": int, "choices": (1, 2, 3)})])
    ULYSSES, RING = (int(x) for x in OPTS.sequence.split("x"))
    DEGREE = ULYSSES * RING
    common.skip_unless_planner_has(OPTS.binary, "--sequence")
    unittest.main(argv=argv)
