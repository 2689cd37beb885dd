#!/usr/bin/python3
"""ZeRO-2 and ZeRO-3 plans executed with PyTorch's FSDP (python/pulse_runtime/sharding.py).

    test_sharding.py --binary build/pulse-plan [PulseRun|Adapter|Refused ...]

- PulseRun: the test-size example UNet (float64, plans made with --precision fp64) from
  `plan --zero 2` and `--zero 3` at dp 2 (pp 1) and at pp 2 x dp 2 (ZeRO-2 also with a split
  backward), trained by pulse-run with
  Adam for two iterations on gloo ranks: losses, every gradient and every updated parameter
  within 1e-9 of one-process Adam; summary.json states the stage executed (FSDP fully_shard
  over 2 replicas) and per rank the parameter and gradient bytes held, which are exactly the
  local shards FSDP keeps (each tensor cut on its first dimension into ceil(rows / 2) rows),
  and optimizer state of Adam's two moments of those shards. ZeRO-3's total is the plan's
  within 10% (padding); ZeRO-2's is 16/20 of it (the plan keeps ZeRO-2's weights whole, FSDP
  only during the iteration), and the summary warns so.
- Adapter: the same pp 2 x dp 2 plans on PyTorch's `_PipelineScheduleRuntime`
  (examples/torch_pipelining.py): gradients and parameters equal one process.
- Refused (exit 2, one line naming the mode): ZeRO-3 with a split backward; a stage of a kind
  the runtime does not run; a plan precision this runtime has no name for; and, in process,
  the message a PyTorch without fully_shard would get.
"""

import json
import os
import subprocess
import sys
import unittest

import common

OPTS = None
MODEL = common.SMALL_UNET + ":build_test"
ITERATIONS = 2


def close(a, b, tol):
    scale = b.abs().max().item()
    return bool(((a - b).abs() <= tol * scale).all()) if scale > 0 else bool((a == 0).all())


def reference():
    import torch
    from pulse_runtime import models, optim, reference as ref
    model = models.load(MODEL, seed=0, dtype=torch.float64)
    return ref.reference_train(model, 8, 0, ITERATIONS, optim.Config("adam", 0.01))


def shard_bytes(params, dp, element=8):
    """Bytes of one replica's FSDP shards: rows ceil(d0 / dp) of every tensor (the last
    replica's shard is padded to the same size)."""
    total = 0
    for p in params.values():
        rows = p.shape[0] if p.dim() else 1
        total += -(-rows // dp) * (p.numel() // max(rows, 1)) * element
    return total


class Base(common.TempDirCase):
    def plan(self, *options):
        out = self.path("plan.json")
        return out, common.plan(OPTS.binary, common.TEST_PROFILE, out, "--global-batch", "8",
                                "--microbatch-size", "2", *options)

    def ranks(self, out, world):
        import torch
        return [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]

    def assert_equal_to_one_process(self, ranks, ref, dp):
        for key in ("grads", "params"):
            for replica in range(dp):
                got = {}
                for r in ranks:
                    if r["replica"] == replica:
                        got.update(r[key])
                self.assertEqual(set(got), set(ref[key]))
                bad = [n for n in got if not close(got[n], ref[key][n], 1e-9)]
                self.assertFalse(bad, f"replica {replica}: {key} differ for {bad[:6]}")


@common.requires_torch
class PulseRun(Base):
    def run_zero(self, zero, pp, *options):
        plan_path, plan = self.plan("--zero", str(zero), "--pp", str(pp), "--dp", "2",
                                    *(["--family", "v"] if pp > 1 else []), *options)
        self.assertEqual(plan["options"]["memory"]["zero_stage"], zero)
        out = self.path("run")
        common.run([sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"), "--plan",
                    plan_path, "--model", MODEL, "--iterations", str(ITERATIONS), "--optimizer",
                    "adam", "--lr", "0.01", "--quiet", "--out", out, "--timeout", "240"],
                   timeout=300)
        world = plan["rank_map"]["world_size"]
        ranks = self.ranks(out, world)
        ref = reference()
        self.assert_equal_to_one_process(ranks, ref, 2)
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        for got, want in zip(summary["loss"], ref["losses"]):
            self.assertAlmostEqual(got, want, delta=1e-9 * want)
        self.assertEqual(summary["executed"]["zero_stage"], zero)
        self.assertEqual(summary["executed"]["sharding"], "FSDP fully_shard")
        self.assertEqual(summary["executed"]["precision"], "fp64")
        for row, r in zip(summary["memory"], ranks):
            want = shard_bytes(r["params"], 2)
            self.assertEqual(row["params_bytes"], want, row)
            self.assertEqual(row["grads_bytes"], want, row)
            # Adam's two moments of the shards, and one step counter per tensor.
            self.assertGreaterEqual(row["optimizer_bytes"], 2 * want)
            self.assertLessEqual(row["optimizer_bytes"], 2 * want + 8 * len(r["params"]))
            if zero == 3:  # the plan's (8 + 8 + 16) / 2 bytes per parameter, but padding
                self.assertLess(abs(row["ratio"] - 1), 0.1, row)
            else:
                # ZeRO-2 by the plan keeps the weights whole (8 bytes per parameter); FSDP
                # gathers them for the iteration only and holds the shards after it: the plan
                # counts 8 + 4 + 8 = 20, the rank holds 4 + 4 + 8 = 16, a warning.
                self.assertAlmostEqual(row["ratio"], 16 / 20, delta=0.01)
                held = row["params_bytes"] + row["grads_bytes"] + row["optimizer_bytes"]
                line = f"rank {row['rank']} (device {row['device']}) held {held} bytes"
                self.assertTrue(any(w.startswith(line) for w in summary["warnings"]),
                                summary["warnings"])
        return summary

    def test_zero2_dp2(self):
        self.run_zero(2, 1)

    def test_zero3_dp2(self):
        self.run_zero(3, 1)

    def test_zero2_pp2_dp2(self):
        self.run_zero(2, 2)

    def test_zero3_pp2_dp2(self):
        self.run_zero(3, 2)

    def test_zero2_pp2_dp2_split_backward(self):
        """I/W ops under FSDP: the weights gathered for I stay until W (ZeRO-3 is refused)."""
        summary = self.run_zero(2, 2, "--split-backward")
        self.assertEqual(summary["executed"]["zero_stage"], 2)


@common.requires_torch
class Adapter(Base):
    def run_zero(self, zero):
        plan_path, plan = self.plan("--zero", str(zero), "--pp", "2", "--dp", "2", "--family",
                                    "v")
        csv = self.path("plan.csv")
        common.run([OPTS.binary, "export", plan_path, "--format", "torch-csv", "-o", csv])
        out = self.path("run")
        common.run([sys.executable, os.path.join(common.ROOT, "examples", "torch_pipelining.py"),
                    "--plan", plan_path, "--csv", csv, "--model", MODEL, "--optimizer", "adam",
                    "--lr", "0.01", "--iterations", str(ITERATIONS), "--out", out,
                    "--timeout", "240"], timeout=300)
        ranks = self.ranks(out, 4)
        self.assert_equal_to_one_process(ranks, reference(), 2)
        for r in ranks:
            self.assertEqual(r["zero"], zero)
            self.assertEqual(r["held_bytes"]["params"], shard_bytes(r["params"], 2))

    def test_zero2_pp2_dp2(self):
        self.run_zero(2)

    def test_zero3_pp2_dp2(self):
        self.run_zero(3)


@common.requires_torch
class Refused(Base):
    def refused(self, plan_path):
        proc = subprocess.run([sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"),
                               "--plan", plan_path, "--model", MODEL], capture_output=True,
                              text=True, timeout=120)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(proc.stdout, "")
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        return proc.stderr.replace(plan_path, "PLAN")

    def test_zero3_with_split_backward(self):
        plan_path, _ = self.plan("--zero", "3", "--pp", "2", "--dp", "2", "--split-backward")
        self.assertIn("ZeRO-3 with a split backward (I/W ops, $.options.split_backward) is a "
                      "mode pulse-run does not run", self.refused(plan_path))
        # ZeRO-2 with a split backward runs (the gathered weights stay until W).

    def edited(self, edit):
        plan_path, plan = self.plan("--pp", "2", "--dp", "1")
        edit(plan)
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        return self.refused(plan_path)

    def test_a_stage_kind_the_runtime_does_not_run(self):
        err = self.edited(lambda p: p["stages"][1].update(side="frozen"))
        self.assertIn("PLAN: $.stages[1].side: expected one of ['encoder', 'decoder', "
                      "'chain'], got 'frozen'", err)

    def test_a_precision_without_a_name_here(self):
        err = self.edited(lambda p: p["options"]["memory"].update(precision="fp8"))
        self.assertIn("PLAN: $.options.memory.precision: expected one of ['mixed', "
                      "'fp16-mixed', 'bf16', 'fp32', 'fp64'], got 'fp8'", err)

    def test_a_pytorch_without_fully_shard(self):
        from pulse_runtime import sharding
        real = sharding.torch_version
        sharding.torch_version = lambda: (1, 13)
        try:
            with self.assertRaises(sharding.ShardingError) as e:
                sharding.require_fully_shard(3)
        finally:
            sharding.torch_version = real
        self.assertIn("ZeRO-3 (options.memory.zero_stage 3) runs on "
                      "torch.distributed.fsdp.fully_shard, which PyTorch", str(e.exception))
        self.assertIn("it needs 2.6 or later", str(e.exception))


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
