#!/usr/bin/python3
"""pulse-run as a trainer (examples/torch_runtime/runtime.py, the package uninstalled).

    test_trainer.py --binary build/pulse-plan [TestClass ...]

- MixedPrecision: `--dtype bfloat16` trains the shipped small UNet (full size) at pp 2 on 2
  gloo ranks with a first loss within 5% of float32's and every later loss finite; the values
  between stages travel in bfloat16 (the bytes equal a bfloat16 plan's); float16 runs where
  this PyTorch can autocast to it on the CPU and is refused with the reason where it cannot.
- Recompute: a plan made with --recompute names the layers it recomputes per stage and trains to the gradients of
  one-process training (float64, 1e-9), with B and with I/W.
- DataHook: batches from a user function (--data) instead of the model's make_batch.
- Summary: measured against predicted time, per iteration and per stage, with a warning
  beyond 20% (on a plan whose predictions are edited to be 1000x too small, and on
  hand-made rank records whose ratios are known).
- PlanDoc: a plan missing a key, or with a key of the wrong type, is refused naming the JSON
  path.
"""

import json
import math
import os
import subprocess
import sys
import unittest

import common

OPTS = None
TEST_MODEL = common.SMALL_UNET + ":build_test"
FULL_MODEL = common.SMALL_UNET + ":build"


def close(a, b, tol):
    scale = b.abs().max().item()
    return bool(((a - b).abs() <= tol * scale).all()) if scale > 0 else bool((a == 0).all())


class Base(common.TempDirCase):
    def plan(self, profile, *options, name="plan.json"):
        out = self.path(name)
        return out, common.plan(OPTS.binary, profile, out, *options)

    def pulse_run(self, *args, check=True):
        cmd = [sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"), *args,
               "--timeout", "240"]
        if check:
            return common.run(cmd, timeout=300)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    def summary(self, out):
        with open(os.path.join(out, "summary.json")) as f:
            return json.load(f)

    def ranks(self, out, world):
        import torch
        return [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]

    def assert_grads(self, ranks, ref, tol):
        got = {}
        for r in ranks:
            got.update(r["grads"])
        self.assertEqual(set(got), set(ref["grads"]))
        bad = [n for n in got if not close(got[n], ref["grads"][n], tol)]
        self.assertFalse(bad, f"gradients differ for {bad[:8]}")


def halved_profile(src, dst):
    """The float32 profile with every byte count halved: the sizes bfloat16 values have."""
    with open(src) as f:
        p = json.load(f)
    for layer in p["layers"]:
        for key in ("activation_bytes_per_sample", "output_bytes_per_sample"):
            layer[key] //= 2
    for entry in p["skips"] + p["carried"]:
        entry["bytes_per_sample"] //= 2
    p["dtype"] = "mixed"  # the regime whose values cross stages in bfloat16
    p["name"] += "-bf16-bytes"
    with open(dst, "w") as f:
        json.dump(p, f)


@common.requires_torch
class MixedPrecision(Base):
    PLAN = ("--pp", "2", "--dp", "1", "--global-batch", "8", "--microbatch-size", "2",
            "--family", "v")

    def test_bfloat16_first_loss_within_5_percent_of_float32(self):
        f32_plan, _ = self.plan(common.MEASURED_PROFILE, *self.PLAN, name="f32.json")
        bf16_profile = self.path("bf16-profile.json")
        halved_profile(common.MEASURED_PROFILE, bf16_profile)
        bf16_plan, plan = self.plan(bf16_profile, *self.PLAN, name="bf16.json")
        args = ["--model", FULL_MODEL, "--iterations", "3", "--quiet"]
        self.pulse_run("--plan", f32_plan, *args, "--out", self.path("f32"))
        self.pulse_run("--plan", bf16_plan, *args, "--dtype", "bfloat16",
                       "--out", self.path("bf16"))
        f32, bf16 = self.summary(self.path("f32")), self.summary(self.path("bf16"))
        print(f"first loss: float32 {f32['loss'][0]:.6f}, bfloat16 {bf16['loss'][0]:.6f}",
              file=sys.stderr)
        self.assertLessEqual(abs(bf16["loss"][0] - f32["loss"][0]), 0.05 * f32["loss"][0])
        self.assertNotEqual(bf16["loss"][0], f32["loss"][0])  # it did run in bfloat16
        self.assertTrue(all(math.isfinite(x) for x in bf16["loss"]))
        self.assertEqual(bf16["p2p_bytes_per_iteration"], plan["comm"]["p2p_bytes_per_iteration"])
        import torch
        for r in self.ranks(self.path("bf16"), 2):  # float32 master weights and gradients
            self.assertTrue(all(p.dtype == torch.float32 for p in r["params"].values()))
            self.assertTrue(all(g.dtype == torch.float32 for g in r["grads"].values()))

    def test_float32_plan_refused_under_bfloat16(self):
        """A plan made for fp32 names both precisions under --dtype bfloat16 (mixed); forced,
        its fp32 tensor sizes are still not the run's."""
        f32_plan, _ = self.plan(common.MEASURED_PROFILE, *self.PLAN)
        proc = self.pulse_run("--plan", f32_plan, "--model", FULL_MODEL, "--dtype", "bfloat16",
                              check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("the plan is made for precision fp32 ($.options.memory.precision), this "
                      "run asks for mixed (--dtype bfloat16)", proc.stderr)
        proc = self.pulse_run("--plan", f32_plan, "--model", FULL_MODEL, "--dtype", "bfloat16",
                              "--force-precision", check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("tensor sizes differ from the model's in mixed", proc.stderr)

    def test_float16(self):
        from pulse_runtime import precision
        bf16_profile = self.path("bf16-profile.json")  # float16 has bfloat16's sizes
        halved_profile(common.MEASURED_PROFILE, bf16_profile)
        plan_path, _ = self.plan(bf16_profile, *self.PLAN, "--precision", "fp16-mixed")
        proc = self.pulse_run("--plan", plan_path, "--model", FULL_MODEL, "--dtype", "float16",
                              "--iterations", "2", "--quiet", "--out", self.path("f16"),
                              check=False)
        import torch
        if precision.autocast_works("cpu", torch.float16):
            self.assertEqual(proc.returncode, 0, proc.stderr)
            loss = self.summary(self.path("f16"))["loss"]
            self.assertTrue(all(math.isfinite(x) for x in loss), loss)
            scale = self.ranks(self.path("f16"), 2)[0]["loss_scale"]
            self.assertGreater(scale, 1.0)  # dynamic loss scaling was on
        else:
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn("cannot autocast to float16 on CPU", proc.stderr)


@common.requires_torch
class Recompute(Base):
    def run_recompute(self, mode, *options):
        """Plans with --recompute MODE, checks which layers the plan names, runs it and
        compares the gradients with one process."""
        from pulse_runtime import optim, reference, models
        import torch
        plan_path, plan = self.plan(common.TEST_PROFILE, "--pp", "2", "--dp", "1",
                                    "--global-batch", "4", "--family", "v",
                                    "--recompute", mode, *options)
        named = [n for st in plan["stages"] for n in st["recomputed"]]
        self.assertEqual([st["recomputed_layers"] for st in plan["stages"]],
                         [len(st["recomputed"]) for st in plan["stages"]])
        self.pulse_run("--plan", plan_path, "--model", TEST_MODEL, "--dtype", "float64",
                       "--quiet", "--out", self.path("run"))
        model = models.load(TEST_MODEL, seed=0, dtype=torch.float64)
        ref = reference.reference_train(model, 4, 0, 1, optim.Config("sgd", 0.1))
        self.assert_grads(self.ranks(self.path("run"), 2), ref, 1e-9)
        return named

    def test_selective_names_the_attention_blocks(self):
        self.assertEqual(sorted(self.run_recompute("selective")),
                         ["down1_res", "mid_res_attn", "up1_res0"])

    def test_full_recompute_split_backward(self):
        named = self.run_recompute("full", "--split-backward")
        self.assertGreater(len(named), 8)

    def test_recomputed_layers_run_twice(self):
        """BlockRange runs the named blocks under checkpoint: their forward runs again in
        the backward, the others' once, and the gradients are the same as without."""
        import torch
        from pulse_runtime import blocklist, models
        grads, calls = [], []
        for recomputed in ((), ("down0_res", "down1_res")):
            model = models.load(TEST_MODEL, seed=0, dtype=torch.float64)
            count = {n: 0 for n in model.block_names}
            # A pre-hook: PyTorch 2.x's non-reentrant checkpoint stops a recomputation once
            # it has what the backward needs, before a forward hook would run.
            for name, block in zip(model.block_names, model.blocks):
                block.register_forward_pre_hook(
                    lambda *_, n=name: count.__setitem__(n, count[n] + 1))
            stage = blocklist.BlockRange(model, 0, 4, recomputed=recomputed)
            batch = model.make_batch(2, 0)
            h, _ = stage.forward(batch["x"], batch)
            h.float().pow(2).sum().backward()
            grads.append({n: p.grad.clone() for n, p in stage.named_parameters()})
            calls.append({n: c for n, c in count.items() if c})
        self.assertEqual(calls[0], {n: 1 for n in calls[0]})
        self.assertEqual(calls[1], {**calls[0], "down0_res": 2, "down1_res": 2})
        for n in grads[0]:
            self.assertTrue(torch.equal(grads[0][n], grads[1][n]), n)

    def test_a_recomputed_layer_outside_its_stage_refused(self):
        plan_path, plan = self.plan(common.TEST_PROFILE, "--pp", "2", "--dp", "1",
                                    "--global-batch", "4", "--family", "v",
                                    "--recompute", "selective")
        plan["stages"][1]["recomputed"] = ["head"]
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        proc = self.pulse_run("--plan", plan_path, "--model", TEST_MODEL, "--dtype", "float64",
                              check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("$.stages[1].recomputed: expected layers of the stage", proc.stderr)
        self.assertIn("got 'head'", proc.stderr)


HOOK = '''
import torch

def batches(global_batch, seed, device, model):
    """Batches of seeds 100, 101, ... in place of the model's own."""
    i = 0
    while True:
        yield model.make_batch(global_batch, seed=100 + i, device=device)
        i += 1

def wrong(global_batch, seed, device, model):
    yield {"x": torch.zeros(global_batch + 1, 4, 8, 8)}
'''


@common.requires_torch
class DataHook(Base):
    def test_batches_from_a_user_function(self):
        from pulse_runtime import optim, reference, models
        import torch
        hook = self.path("data.py")
        with open(hook, "w") as f:
            f.write(HOOK)
        plan_path, _ = self.plan(common.TEST_PROFILE, "--pp", "2", "--dp", "1",
                                 "--global-batch", "4", "--family", "v")
        self.pulse_run("--plan", plan_path, "--model", TEST_MODEL, "--dtype", "float64",
                       "--iterations", "2", "--data", hook + ":batches", "--quiet",
                       "--out", self.path("run"))
        # reference_train takes iteration i's batch from seed + 1 + i: seed 99 gives 100, 101.
        ref = reference.reference_train(models.load(TEST_MODEL, seed=0, dtype=torch.float64),
                                        4, 99, 2, optim.Config("sgd", 0.1))
        self.assert_grads(self.ranks(self.path("run"), 2), ref, 1e-9)
        for got, want in zip(self.summary(self.path("run"))["loss"], ref["losses"]):
            self.assertAlmostEqual(got, want, delta=1e-9 * want)
        proc = self.pulse_run("--plan", plan_path, "--model", TEST_MODEL, "--dtype", "float64",
                              "--data", hook + ":wrong", check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("field 'x' is (5, 4, 8, 8), expected a tensor with the global batch (4) "
                      "first", proc.stderr)


@common.requires_torch
class Summary(Base):
    def test_predictions_1000x_too_small_are_flagged(self):
        plan_path, plan = self.plan(common.TEST_PROFILE, "--pp", "2", "--dp", "1",
                                    "--global-batch", "4", "--family", "v")
        plan["predicted"]["iteration_s"] /= 1000
        for stage in plan["stages"]:
            stage["forward_s"] /= 1000
            stage["backward_s"] /= 1000
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        proc = self.pulse_run("--plan", plan_path, "--model", TEST_MODEL, "--dtype", "float64",
                              "--iterations", "2", "--out", self.path("run"))
        quiet = self.pulse_run("--plan", plan_path, "--model", TEST_MODEL, "--dtype", "float64",
                               "--iterations", "2", "--quiet", "--out", self.path("quiet"))
        self.assertNotIn("warning", quiet.stderr)  # --quiet: in summary.json only
        timing = [w for w in self.summary(self.path("quiet"))["warnings"] if "predicts" in w]
        self.assertEqual(len(timing), 1 + 4)
        s = self.summary(self.path("run"))
        self.assertEqual(s["predicted_iteration_s"], plan["predicted"]["iteration_s"])
        self.assertEqual(s["compared_iterations"], [2])
        self.assertEqual([x["stage"] for x in s["stages"]], [0, 1, 2, 3])
        self.assertGreater(s["iteration_ratio"], 1.2)
        warned = [line for line in proc.stderr.splitlines()
                  if "pulse-run: warning:" in line and "predicts" in line]
        self.assertEqual(len(warned), 1 + 4, proc.stderr)
        self.assertIn("the plan predicts", warned[0])

    def test_ratios_on_hand_made_records(self):
        """Two ranks of one replica, 2 iterations; the first is left out. Stage 0 takes
        1.0 s against a prediction of 2 x (0.3 + 0.2) = 1.0 s: no warning; stage 1 takes
        1.3 s against 1.0 s: x1.3, a warning; the iteration 2.5 s against 2.0 s: x1.25."""
        from pulse_runtime import summary
        from pulse_runtime.plan_doc import (DevicePrediction, Parallelism, PlanDoc, Prediction,
                                            RankMap, StageSpec)
        stages = (StageSpec(0, 0, "encoder", ("a",), 0.3, 0.2),
                  StageSpec(1, 1, "decoder", ("b",), 0.3, 0.2))
        doc = PlanDoc("p.json", "0", "pulse", False, 0, Parallelism(2, 1, 1, 2, 2, 2), stages,
                      (), (), (), {}, RankMap(2, (), (), ()),
                      Prediction(2.0, 2.0, (DevicePrediction(0, 1.0),)))
        trace = {0: [("F", 0, 0, 0.0, 0.25, 0, 0), ("B", 0, 0, 0.25, 0.5, 0, 0),
                     ("F", 0, 1, 0.5, 0.75, 0.0, 0), ("B", 0, 1, 0.75, 1.1, 0.1, 0)],
                 1: [("F", 1, 0, 0.0, 0.4, 0, 0), ("B", 1, 0, 0.4, 0.65, 0, 0),
                     ("F", 1, 1, 0.7, 1.0, 0, 0), ("B", 1, 1, 1.0, 1.35, 0, 0)]}
        results = [{"replica": 0, "traces": [[], trace[d]]} for d in (0, 1)]
        out = summary.measured_vs_predicted(results, [9.0, 2.5], doc)
        self.assertEqual(out["compared_iterations"], [2])
        self.assertAlmostEqual(out["iteration_ratio"], 1.25)
        self.assertAlmostEqual(out["stages"][0]["measured_s"], 1.0)
        self.assertAlmostEqual(out["stages"][1]["ratio"], 1.3)
        self.assertEqual(len(out["warnings"]), 2)
        self.assertTrue(out["warnings"][0].startswith("iteration took 2.5 s"))
        self.assertTrue(out["warnings"][1].startswith("stage 1 (device 1) computed for 1.3 s"))


@common.requires_torch
class PlanDocErrors(Base):
    def edited(self, edit):
        plan_path, plan = self.plan(common.TEST_PROFILE, "--pp", "2", "--dp", "1",
                                    "--global-batch", "4", "--family", "v")
        edit(plan)
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        from pulse_runtime.plan_doc import PlanError, read_plan
        with self.assertRaises(PlanError) as e:
            read_plan(plan_path)
        return str(e.exception).replace(plan_path, "PLAN")

    def test_missing_and_mistyped_keys(self):
        self.assertEqual(self.edited(lambda p: p["stages"][1].pop("layers")),
                         "PLAN: $.stages[1].layers: missing (expected an array)")
        self.assertEqual(self.edited(lambda p: p["parallelism"].update(pp="2")),
                         "PLAN: $.parallelism.pp: expected an integer, got a string")
        self.assertEqual(self.edited(lambda p: p["schedule"][0]["ops"][0].update(op="X")),
                         "PLAN: $.schedule[0].ops[0].op: expected one of ['F', 'B', 'I', "
                         "'W'], got 'X'")
        self.assertEqual(self.edited(lambda p: p.update(schema="pulse.plan/v0")),
                         "PLAN: not a pulse.plan/v1 plan ($.schema)")


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
