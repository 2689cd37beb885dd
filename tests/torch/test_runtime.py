#!/usr/bin/python3
"""The reference runtime executes one plan: same loss, gradients and updated parameters as
single-process training on the same batch, and exactly the plan's point-to-point bytes.

    test_runtime.py --binary build/pulse-plan --strategy pulse --pp 4 --dp 2 \
        --global-batch 8 --microbatch-size 1

--strategy is any strategy the planner offers; --split-backward plans I/W ops. A test whose
strategy or option this pulse-plan build lacks exits 77 (skipped). Plans the checked-in
float64 profile of the test-size UNet (tests/torch/data/) on the CPU
cluster, runs examples/torch_runtime/runtime.py for one iteration in float64 (float32
rounding alone reaches 4e-6 relative on some parameters, too close to the 1e-5 tolerance),
and compares with python/pulse_runtime/reference.py.
"""

import json
import os
import sys
import tempfile
import unittest

import common

OPTS = None


def close(a, b, tol):
    """Every element within tol relative to the tensor's largest reference value (an
    element-wise relative test would be dominated by entries that are nearly zero)."""
    scale = b.abs().max().item()
    return bool(((a - b).abs() <= tol * scale).all()) if scale > 0 else bool((a == 0).all())


@common.requires_torch
class RunPlan(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        from pulse_runtime import blocklist
        cls.tmp = tempfile.TemporaryDirectory()
        plan_path = os.path.join(cls.tmp.name, "plan.json")
        cls.plan = common.plan(OPTS.binary, OPTS.profile, plan_path,
                               "--strategy", OPTS.strategy, "--pp", str(OPTS.pp),
                               "--dp", str(OPTS.dp), "--global-batch", str(OPTS.global_batch),
                               "--microbatch-size", str(OPTS.microbatch_size),
                               *(["--split-backward"] if OPTS.split_backward else []))
        out = os.path.join(cls.tmp.name, "run")
        common.run([sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"),
                    "--plan", plan_path, "--model", OPTS.model, "--dtype", OPTS.dtype,
                    "--iterations", "1", "--seed", "0", "--lr", "0.1", "--out", out,
                    "--timeout", "240"])
        with open(os.path.join(out, "summary.json")) as f:
            cls.summary = json.load(f)
        world = cls.plan["rank_map"]["world_size"]
        cls.ranks = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]
        from pulse_runtime import reference
        model = blocklist.load_factory(OPTS.model)(seed=0, dtype=getattr(torch, OPTS.dtype))
        # The runtime's first iteration uses the batch of seed + 1.
        cls.ref = reference.reference_step(model, OPTS.global_batch, seed=1, lr=0.1)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def replica(self, index, key):
        merged = {}
        for r in self.ranks:
            if r["replica"] == index:
                overlap = set(merged) & set(r[key])
                self.assertFalse(overlap, f"parameters on two ranks of replica {index}")
                merged.update(r[key])
        return merged

    def test_plan_shape(self):
        par = self.plan["parallelism"]
        self.assertEqual((par["pp"], par["dp"]), (OPTS.pp, OPTS.dp))
        self.assertEqual(len(self.ranks), OPTS.pp * OPTS.dp)
        if OPTS.strategy != "pulse":  # the baselines move skips between devices
            self.assertGreater(self.plan["comm"]["skip_bytes_per_iteration"], 0)
        ops = {op["op"] for d in self.plan["schedule"] for op in d["ops"]}
        self.assertEqual(ops, {"F", "I", "W"} if OPTS.split_backward else {"F", "B"})

    def test_loss(self):
        loss = self.summary["loss"][0]
        self.assertLessEqual(abs(loss - self.ref["loss"]), OPTS.tolerance * abs(self.ref["loss"]),
                             (loss, self.ref["loss"]))

    def check_named(self, key):
        for index in range(OPTS.dp):
            got = self.replica(index, key)
            self.assertEqual(set(got), set(self.ref[key]), f"replica {index}: parameter names")
            bad = [n for n in got if not close(got[n], self.ref[key][n], OPTS.tolerance)]
            self.assertFalse(bad, f"replica {index}: {key} differ for {bad[:8]}")

    def test_gradients(self):
        self.check_named("grads")

    def test_parameters_after_step(self):
        self.check_named("params")

    def test_bytes_equal_the_plan(self):
        comm = self.plan["comm"]
        self.assertEqual(self.summary["p2p_bytes_per_iteration"], comm["p2p_bytes_per_iteration"])
        by_kind = self.summary["p2p_bytes_by_kind"]
        for kind in ("activation", "skip", "carried"):
            self.assertEqual(by_kind[kind], comm[f"{kind}_bytes_per_iteration"], kind)


if __name__ == "__main__":
    OPTS, argv = common.main([
        (("--strategy",), {"required": True}),
        (("--pp",), {"type": int, "required": True}),
        (("--dp",), {"type": int, "required": True}),
        (("--global-batch",), {"type": int, "required": True}),
        (("--microbatch-size",), {"type": int, "default": 1}),
        (("--profile",), {"default": common.TEST_PROFILE}),
        (("--model",), {"default": common.SMALL_UNET + ":build_test"}),
        (("--dtype",), {"default": "float64"}),
        (("--tolerance",), {"type": float, "default": 1e-5}),
        (("--split-backward",), {"action": "store_true"}),
    ])
    common.skip_unless_planner_has(OPTS.binary, OPTS.strategy,
                                   *(["--split-backward"] if OPTS.split_backward else []))
    unittest.main(argv=argv)
