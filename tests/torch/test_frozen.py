#!/usr/bin/python3
"""pulse-run executes a plan's frozen encoders where the plan places them, and each resolution
bucket with its own microbatching: the example with a VAE-like and a text encoder
(examples/small_frozen.py:build_test, float64), planned on the CPU cluster from its measured
profile (tests/torch/data/small-frozen-test-f64.json, pulse-profile with frozen[]), trained on
gloo ranks for two iterations, has one process's losses, gradients and parameters.

    test_frozen.py --binary build/pulse-plan --frozen before_step --pp 2 --dp 1 \
        --global-batch 4 [--microbatch-size 2] [--buckets FILE]

The denoiser reads the encoded latents and text embeddings (first_input and the first block
fail without them), so a frozen op left out fails the run; outputs put on the wrong samples or
a bucket run at another microbatching change the losses and gradients beyond the tolerance.
The ranks' records say which frozen ops ran where (the plan's, device by device; bubble ops on
the next iteration's samples) and that the frozen parameters got no gradient and no optimizer
state.
"""

import json
import os
import sys
import tempfile
import unittest

import common

OPTS = None
PROFILE = os.path.join(common.ROOT, "tests", "torch", "data", "small-frozen-test-f64.json")
MODEL = os.path.join(common.ROOT, "examples", "small_frozen.py") + ":build_test"
ITERATIONS = 2
TOLERANCE = 1e-5  # as test_runtime.py (float64: the runs agree to about 1e-15)


def close(a, b, tol):
    """Every element within tol relative to the tensor's largest reference value."""
    scale = b.abs().max().item()
    return bool(((a - b).abs() <= tol * scale).all()) if scale > 0 else bool((a == 0).all())


@common.requires_torch
class Frozen(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        from pulse_runtime import blocklist, optim, reference
        cls.tmp = tempfile.TemporaryDirectory()
        plan_path = os.path.join(cls.tmp.name, "plan.json")
        extra = ["--microbatch-size", str(OPTS.microbatch_size)] if OPTS.microbatch_size else []
        extra += ["--buckets", OPTS.buckets] if OPTS.buckets else []
        cls.plan = common.plan(OPTS.binary, PROFILE, plan_path, "--frozen", OPTS.frozen,
                               "--pp", str(OPTS.pp), "--dp", str(OPTS.dp), "--global-batch",
                               str(OPTS.global_batch), *extra)
        out = os.path.join(cls.tmp.name, "run")
        data = ["--data", os.path.join(common.ROOT, "examples", "small_frozen.py") +
                ":cached_data"] if OPTS.frozen == "cached" else []
        cls.proc = common.run([sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"),
                               "--plan", plan_path, "--model", MODEL, "--iterations",
                               str(ITERATIONS), "--seed", "0", "--lr", "0.1", "--out", out,
                               "--timeout", "240", *data])
        with open(os.path.join(out, "summary.json")) as f:
            cls.summary = json.load(f)
        cls.processes = OPTS.pp * OPTS.dp
        cls.ranks = [torch.load(os.path.join(out, f"rank{r}.pt"))
                     for r in range(cls.processes)]
        model = blocklist.load_factory(MODEL)(seed=0, dtype=torch.float64)
        shapes = [bucket_shape(cls.plan, i) for i in range(ITERATIONS)]
        cls.ref = reference.reference_train(model, OPTS.global_batch, 0, ITERATIONS,
                                            optim.Config("sgd", 0.1), shapes)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_plan_places_them(self):
        frozen = self.plan["frozen"]
        self.assertEqual(frozen["placement"], OPTS.frozen)
        self.assertEqual(frozen["components"], ["vae", "text"])
        slots = {op["slot"] for op in frozen.get("ops", [])}
        want = {"before_step": {"before_step"}, "bubbles": {"bubble"}, "cached": set()}
        self.assertTrue(want[OPTS.frozen] <= slots, slots)

    def test_each_rank_ran_its_devices_ops(self):
        """Rank by rank and iteration by iteration: the plan's ops of its device; bubble ops
        on the next iteration's samples (so none in the last), and on the first iteration
        the bubble ops once more before the step, for its own samples."""
        ops = self.plan["frozen"].get("ops", [])
        for r, result in enumerate(self.ranks):
            mine = [o for o in ops if o["device"] == result["device"]]
            before = [(o["component"], "before_step", o["first_sample"], o["samples"])
                      for o in mine if o["slot"] == "before_step"]
            bubble = [(o["component"], "bubble", o["first_sample"], o["samples"])
                      for o in mine if o["slot"] == "bubble"]
            first = [(c, "first_iteration", f, n) for c, _, f, n in bubble]
            want = [before + first + bubble, before]
            got = [sorted(map(tuple, it)) for it in result["frozen"]["ops"]]
            self.assertEqual(got, [sorted(w) for w in want], f"rank {r}")

    def test_each_bucket_ran_its_microbatching(self):
        """Iteration i ran bucket rows[i mod n]: its shape, microbatch size and count (as
        many F ops per stage of the device as it has microbatches)."""
        rows = self.plan.get("buckets", {}).get("rows", [])
        if not rows:
            self.skipTest("no buckets")
        self.assertNotEqual({(r["microbatch_size"], r["num_microbatches"]) for r in rows[:2]},
                            {(rows[0]["microbatch_size"], rows[0]["num_microbatches"])},
                            "the test's buckets should differ in microbatching")
        for r, result in enumerate(self.ranks):
            stages = len(result["stages"])
            got = result["buckets"]
            self.assertEqual(len(got), ITERATIONS)
            for it, run in enumerate(got):
                row = rows[it % len(rows)]
                self.assertEqual(run["name"], row["name"])
                self.assertEqual(run["shape"], {"height": row["height"], "width": row["width"]})
                self.assertEqual((run["microbatch_size"], run["num_microbatches"]),
                                 (row["microbatch_size"], row["num_microbatches"]))
                self.assertEqual(run["ops"], stages * row["num_microbatches"], f"rank {r}")

    def test_frozen_parameters_are_not_trained(self):
        for r, result in enumerate(self.ranks):
            f = result["frozen"]
            self.assertGreater(f["params"], 0)
            self.assertFalse(f["requires_grad"], r)
            self.assertFalse(f["with_grad"], r)
            self.assertFalse(f["in_optimizer"], r)
            self.assertFalse([n for n in result["grads"] if "vae" in n or "text_enc" in n])

    def test_losses(self):
        self.assertEqual(len(self.summary["loss"]), ITERATIONS)
        for got, want in zip(self.summary["loss"], self.ref["losses"]):
            self.assertLessEqual(abs(got - want), TOLERANCE * abs(want), (got, want))

    def check_named(self, key):
        for replica in range(OPTS.dp):
            got = {}
            for result in self.ranks:
                if result["replica"] == replica:
                    got.update(result[key])
            self.assertEqual(set(got), set(self.ref[key]), f"replica {replica}: names")
            bad = [n for n in got if not close(got[n], self.ref[key][n], TOLERANCE)]
            self.assertEqual(len(bad), 0, f"replica {replica}: {key} differ for {bad[:8]}")

    def test_gradients(self):
        self.check_named("grads")

    def test_parameters_after_the_steps(self):
        self.check_named("params")


@common.requires_torch
class ProfiledFrozen(unittest.TestCase):
    """pulse-profile's frozen[] (python/pulse_runtime/frozen_profile.py) on the example: the
    checked-in profile's components are the model's, with its parameter counts, float64
    weight bytes and exact output bytes, and a fresh measurement agrees."""

    def test_the_profile_lists_the_models_frozen_parts(self):
        import torch
        from pulse_runtime import blocklist, frozen_profile
        from pulse_runtime.steptimer import Clock
        model = blocklist.load_factory(MODEL)(seed=0, dtype=torch.float64)
        with open(PROFILE) as f:
            listed = json.load(f)["frozen"]
        # 4 latent channels x 8 x 8 and 6 tokens x 32 values, 8 bytes each
        self.assertEqual([(c["name"], c["kind"], c["output_bytes_per_sample"])
                          for c in listed],
                         [("vae", "vae_encoder", 4 * 8 * 8 * 8),
                          ("text", "text_encoder", 6 * 32 * 8)])
        fresh = frozen_profile.measure(model, [1, 2], 0, torch.device("cpu"), 0, 1,
                                       Clock(torch.device("cpu")), "CPU")
        for c, got, module in zip(listed, fresh, (model.vae, model.text_encoder)):
            params = sum(p.numel() for p in module.parameters())
            self.assertEqual((c["params"], c["weight_bytes"]), (params, 8 * params))
            for key in ("name", "kind", "params", "weight_bytes", "output_bytes_per_sample",
                        "activation_bytes_per_sample"):
                self.assertEqual(got[key], c[key], key)
            self.assertEqual(len(got["forward_s"]["CPU"]), 2)
            self.assertTrue(all(t > 0 for t in got["forward_s"]["CPU"]))


def bucket_shape(plan, iteration):
    """The shape make_batch draws at iteration i: the bucket pulse-run runs then (the rows in
    the plan's order, round robin), {} without buckets."""
    rows = plan.get("buckets", {}).get("rows")
    if not rows:
        return {}
    row = rows[iteration % len(rows)]
    return {"height": row["height"], "width": row["width"]}


if __name__ == "__main__":
    OPTS, argv = common.main([(("--frozen",), {"default": "before_step"}),
                              (("--pp",), {"type": int, "default": 2}),
                              (("--dp",), {"type": int, "default": 1}),
                              (("--global-batch",), {"type": int, "default": 4}),
                              (("--microbatch-size",), {"type": int}),
                              (("--buckets",), {})])
    common.skip_unless_planner_has(OPTS.binary, "--frozen")
    unittest.main(argv=argv)
