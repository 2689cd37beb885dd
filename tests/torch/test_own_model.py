#!/usr/bin/python3
"""Your own model, end to end in bf16 on the CPU, and handed to torchtitan.

    test_own_model.py --binary build/pulse-plan [Bf16|Torchtitan ...]

- Bf16: for examples/small_unet.py:build (block-list) and examples/fx_unet.py:build (torch.fx
  front end): pulse-profile --dtype bfloat16 (the mixed regime pulse-run trains: autocast,
  fp32 master weights) writes a profile saying `mixed`, whose crossing tensors are counted in
  bfloat16 (half the float32 profile's bytes); `plan --precision mixed` of it; pulse-run
  --dtype bfloat16 trains two iterations at pp 2 with finite losses, float32 parameters, and
  the plan's point-to-point bytes. The same profile planned for pure bf16 is refused under
  --dtype bfloat16, naming both precisions.
- Torchtitan: `python -m pulse_runtime.torchtitan` on a V plan of each model: the TOML's
  [parallelism] fields (degree, V schedule, the CSV, microbatch size, FSDP for ZeRO-3,
  one module list per stage) and [training] batch; every module name resolves in the model
  and the lists cover its layers in order; the CSV loads with PyTorch's
  `_PipelineScheduleRuntime._load_csv`, which places the stages as torchtitan's V style does
  (rank d: stages d and 2P-1-d) and finds every F and B of every stage and microbatch. A wave
  plan and a ZeRO-1 plan are refused (exit 2).
"""

import json
import math
import os
import subprocess
import sys
import tomllib
import unittest

import common

OPTS = None
MODELS = {"small_unet": common.SMALL_UNET + ":build",
          "fx_unet": os.path.join(common.ROOT, "examples", "fx_unet.py") + ":build"}
PROFILES = {}  # model -> mixed-regime profile, measured once


def setUpModule():
    if common.TORCH_ERROR:
        return
    import tempfile
    PROFILES["tmp"] = tempfile.TemporaryDirectory()
    for name, spec in MODELS.items():
        out = os.path.join(PROFILES["tmp"].name, f"{name}-mixed.json")
        common.run([sys.executable, os.path.join(common.ROOT, "scripts", "profile_torch.py"),
                    "--model", spec, "--dtype", "bfloat16", "--sizes", "1,2", "--warmup", "1",
                    "--repeats", "1", "--keep-failed", "-o", out], timeout=600)
        PROFILES[name] = out


def tearDownModule():
    if "tmp" in PROFILES:
        PROFILES["tmp"].cleanup()


class Base(common.TempDirCase):
    def plan(self, model, *options, name="plan.json"):
        """pp 2 x dp 1, microbatches of 2, global batch 4, unless `options` say otherwise."""
        out = self.path(name)
        defaults = {"--pp": "2", "--dp": "1", "--global-batch": "4", "--microbatch-size": "2"}
        given = [d for k, v in defaults.items() if k not in options for d in (k, v)]
        return out, common.plan(OPTS.binary, PROFILES[model], out, *given, *options)


@common.requires_torch
class Bf16(Base):
    def run_model(self, model):
        with open(PROFILES[model]) as f:
            profile = json.load(f)
        self.assertEqual(profile["dtype"], "mixed")
        self.assertTrue(profile["provenance"]["assumptions"][0].startswith(
            "Regime: mixed bf16 (float32 weights and gradients, the forward under "
            "torch.autocast to bfloat16"))
        plan_path, plan = self.plan(model)
        self.assertEqual(plan["options"]["memory"]["precision"], "mixed")
        out = self.path("run")
        common.run([sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"), "--plan",
                    plan_path, "--model", MODELS[model], "--dtype", "bfloat16", "--iterations",
                    "2", "--quiet", "--out", out, "--timeout", "240"], timeout=300)
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        self.assertTrue(all(math.isfinite(x) for x in summary["loss"]), summary["loss"])
        self.assertEqual(summary["executed"]["precision"], "mixed")
        self.assertEqual(summary["p2p_bytes_per_iteration"],
                         plan["comm"]["p2p_bytes_per_iteration"])
        import torch
        rank = torch.load(os.path.join(out, "rank0.pt"))
        self.assertTrue(all(p.dtype == torch.float32 for p in rank["params"].values()))
        return profile

    def test_small_unet(self):
        profile = self.run_model("small_unet")
        # The crossing tensors in bfloat16: half of the float32 profile's bytes.
        with open(common.MEASURED_PROFILE) as f:
            fp32 = json.load(f)
        self.assertEqual([s["bytes_per_sample"] * 2 for s in profile["skips"]],
                         [s["bytes_per_sample"] for s in fp32["skips"]])

    def test_fx_unet(self):
        self.run_model("fx_unet")

    def test_pure_bf16_plan_refused_under_bfloat16(self):
        plan_path, _ = self.plan("small_unet", "--precision", "bf16")
        proc = subprocess.run([sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"),
                               "--plan", plan_path, "--model", MODELS["small_unet"], "--dtype",
                               "bfloat16"], capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("the plan is made for precision bf16 ($.chosen.memory.precision), this "
                      "run asks for mixed (--dtype bfloat16)", proc.stderr)


@common.requires_torch
class Torchtitan(Base):
    def export(self, model, *options, check=True):
        plan_path, plan = self.plan(model, *options)
        csv = self.path("plan.csv")
        common.run([OPTS.binary, "export", plan_path, "--format", "torch-csv", "-o", csv])
        cmd = [sys.executable, "-m", "pulse_runtime.torchtitan", "--plan", plan_path, "--csv",
               csv, "--model", MODELS[model], "-o", self.path("tt")]
        if not check:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=common.PYTHON_DIR)
        common.run(cmd, cwd=common.PYTHON_DIR)
        with open(self.path("tt/job.toml"), "rb") as f:
            return plan, tomllib.load(f)

    def check_model(self, model, root_of):
        from pulse_runtime import models
        plan, job = self.export(model, "--family", "v", "--dp", "1")
        par = job["parallelism"]
        self.assertEqual(par["pipeline_parallel_degree"], 2)
        self.assertEqual(par["pipeline_parallel_schedule"], "ZBVZeroBubble")
        self.assertEqual(par["pipeline_parallel_microbatch_size"], 2)
        self.assertEqual(job["training"]["local_batch_size"], 4)
        self.assertEqual(job["training"]["mixed_precision_param"], "bfloat16")
        parts = par["module_fqns_per_model_part"]
        self.assertEqual(len(parts), len(plan["stages"]))
        m = models.load(MODELS[model], seed=0)
        root = root_of(m)
        names = [n for part in parts for n in part]
        self.assertEqual(len(names), len(m.blocks))
        for i, name in enumerate(names):  # each name is the layer's module, in order
            self.assertIs(root.get_submodule(name), m.blocks[i] if root is m else
                          root.get_submodule(m.block_names[i]))
        self.assertEqual([len(p) for p in parts], [len(s["layers"]) for s in plan["stages"]])
        self.check_csv(par["pipeline_parallel_schedule_csv"], plan)
        return par

    def check_csv(self, path, plan):
        from torch.distributed.pipelining.schedules import (_ComputationType,
                                                            _PipelineScheduleRuntime)
        # _load_csv without stages or a process group: the attributes it reads, set by hand.
        runtime = object.__new__(_PipelineScheduleRuntime)
        runtime._num_stages = len(plan["stages"])
        runtime._n_microbatches = plan["parallelism"]["num_microbatches"]
        runtime.pipeline_order, runtime.stage_index_to_group_rank = {}, {}
        runtime.pp_group_size, runtime._stages, runtime._defer_pp_recv = 2, [], False
        runtime._load_csv(path, format="compute_only")
        stages = len(plan["stages"])
        self.assertEqual(runtime.stage_index_to_group_rank,
                         {s: min(s, stages - 1 - s) for s in range(stages)})  # the V style
        done = {(a.stage_index, a.computation_type, a.microbatch_index)
                for row in runtime.pipeline_order.values() for a in row if a is not None}
        want = {(s, t, mb) for s in range(stages) for mb in range(runtime._n_microbatches)
                for t in (_ComputationType.FORWARD, _ComputationType.FULL_BACKWARD)}
        self.assertEqual(done, want)

    def test_block_list_model(self):
        par = self.check_model("small_unet", lambda m: m)
        self.assertEqual(par["module_fqns_per_model_part"][0][0], "blocks.0")

    def test_fx_model(self):
        par = self.check_model("fx_unet", lambda m: m.module)
        self.assertIn("conv_in", par["module_fqns_per_model_part"][0])

    def test_zero3_is_fsdp(self):
        _, job = self.export("small_unet", "--family", "v", "--dp", "2", "--global-batch", "8",
                             "--zero", "3")
        par = job["parallelism"]
        self.assertEqual((par["data_parallel_shard_degree"], par["fsdp_reshard_after_forward"]),
                         (2, "always"))

    def test_refused(self):
        proc = self.export("small_unet", "--dp", "2", "--global-batch", "8", "--zero", "1",
                           "--family", "v", check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("ZeRO-1 (chosen.memory.zero_stage): torchtitan shards optimizer state "
                      "only together with gradients", proc.stderr)
        proc = self.export("small_unet", "--family", "w2", check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("torchtitan places a loop", proc.stderr)
        self.assertFalse(os.path.exists(self.path("tt/job.toml")))


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
