#!/usr/bin/python3
"""examples/sd2_unet.py, the Stable Diffusion 2 UNet in the block-list protocol.

- Full size, built on the meta device (parameters counted, nothing allocated): the 47
  blocks, their order, names, parameter counts (exact) and the 12 skip pairs equal
  profiles/models/sd2-unet-512.json; 865,910,724 parameters in all, the published count.
- Every tensor the model makes is made on its input's device: the whole forward runs on the
  meta device, where one CPU tensor (a timestep table built on the CPU, issue 28) fails, as
  the negative control shows.
- The checked-in one-stage plans the GPU check runs (scripts/gpu_check_data/) fit the model
  in their dtype: layer names, skips, carried tensors and every byte count, the bf16 plan
  refused for a float32 model. Where pulse-run offers mixed precision (issue 28: float32
  weights, bf16 autocast, bf16 sent between stages), the bf16 plan fits that run too.
- The tiny model (a tenth of the width) trains on the CPU: run stage by stage with
  pulse_runtime's BlockRange it gives the loss and gradients of the one-piece forward.
"""

import json
import math
import os
import unittest

import common

SD2 = os.path.join(common.ROOT, "examples", "sd2_unet.py")
PROFILE = os.path.join(common.ROOT, "profiles", "models", "sd2-unet-512.json")
DATA = os.path.join(common.ROOT, "scripts", "gpu_check_data")


def load_plan(path, model):
    """plan.Plan(path, model), or Plan.load where the runtime reads the document first
    (issue 28's pulse_runtime)."""
    from pulse_runtime import plan
    load = getattr(plan.Plan, "load", None)
    return load(path, model) if load else plan.Plan(path, model)


def mixed_precision():
    try:
        from pulse_runtime import precision
    except ImportError:
        return None
    return precision


def load_sd2():
    from pulse_runtime import blocklist
    return blocklist.load_module(SD2 + ":make")[0]


@common.requires_torch
class FullSize(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        cls.sd2 = load_sd2()
        cls.model = cls.sd2.make(512, 1.0, torch.bfloat16, device="meta")
        with open(PROFILE) as f:
            cls.profile = json.load(f)

    def test_blocks_and_parameters_equal_the_profile(self):
        layers = self.profile["layers"]
        self.assertEqual(self.model.block_names, [l["name"] for l in layers])
        self.assertEqual(self.model.block_kinds, [l["kind"] for l in layers])
        for layer, block in zip(layers, self.model.blocks):
            self.assertEqual(sum(p.numel() for p in block.parameters()), layer["params"],
                             layer["name"])
        self.assertEqual(sum(p.numel() for p in self.model.parameters()), 865_910_724)

    def test_skips_and_carried_equal_the_profile(self):
        pairs = [(s["producer"], s["consumer"]) for s in self.model.skips]
        self.assertEqual(sorted(pairs),
                         sorted((s["producer"], s["consumer"]) for s in self.profile["skips"]))
        self.assertEqual([(c["name"], c["producer"], c["needs_gradient"])
                          for c in self.model.carried],
                         [(c["name"], c["producer"], c["needs_gradient"])
                          for c in self.profile["carried"]])

    def test_the_768_model_has_the_same_parameters_and_a_larger_latent(self):
        import torch
        m768 = self.sd2.make(768, 1.0, torch.bfloat16, device="meta")
        self.assertEqual(m768.cfg.latent, 96)
        self.assertEqual([sum(p.numel() for p in b.parameters()) for b in m768.blocks],
                         [l["params"] for l in self.profile["layers"]])
        batch = m768.make_batch(1, seed=0, device="meta")
        self.assertEqual(tuple(m768(batch).shape), (1, 4, 96, 96))

    def test_attention_heads_are_64_wide(self):
        heads = [b.block.attn1.heads for b in self.model.blocks if hasattr(b, "block")]
        widths = [b.proj_in.in_features for b in self.model.blocks if hasattr(b, "block")]
        self.assertEqual(len(heads), 16)
        self.assertEqual({w // h for w, h in zip(widths, heads)}, {64})

    def test_forward_makes_every_tensor_on_the_input_device(self):
        batch = self.model.make_batch(2, seed=0, device="meta")
        out = self.model(batch)
        self.assertEqual((out.device.type, tuple(out.shape)), ("meta", (2, 4, 64, 64)))

        def table_on_the_cpu(t, dim):  # the mistake issue 28 found in other examples
            import torch
            half = dim // 2
            freqs = torch.exp(torch.arange(half, dtype=torch.float32) * (-math.log(1e4) / half))
            args = t.to(torch.float32)[:, None] * freqs[None, :]
            return torch.cat([torch.cos(args), torch.sin(args)], dim=1)
        right = self.sd2.timestep_features
        self.sd2.timestep_features = table_on_the_cpu
        try:
            with self.assertRaisesRegex(RuntimeError, "device"):
                self.model(batch)
        finally:
            self.sd2.timestep_features = right

    def test_checked_in_plans_fit_the_model(self):
        import torch
        from pulse_runtime import comm, plan
        for dtype, name in ((torch.bfloat16, "sd2-unet-512-pp1-bf16.plan.json"),
                            (torch.float32, "sd2-unet-512-pp1-fp32.plan.json")):
            path = os.path.join(DATA, name)
            model = self.sd2.make(512, 1.0, dtype, device="meta")
            p = load_plan(path, model)
            self.assertEqual((p.pp, p.dp, p.world_size), (1, 1, 1))
            p.check_bytes(comm.Shapes(model, p.microbatch_size, "meta"), str(dtype))
        fp32 = self.sd2.make(512, 1.0, torch.float32, device="meta")
        bf16_plan = load_plan(os.path.join(DATA, "sd2-unet-512-pp1-bf16.plan.json"), fp32)
        with self.assertRaisesRegex(plan.PlanError, "tensor sizes differ"):
            bf16_plan.check_bytes(comm.Shapes(fp32, 2, "meta"), "float32")

    def test_the_runtime_moves_the_carried_tensors_the_plan_names(self):
        """transfers[].carried is what the runtime sends; a plan without it gets the same
        lists from the planner's rule, and a name the plan does not carry is refused."""
        import subprocess
        import tempfile
        from pulse_runtime import plan
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "sd2-pp4.json")
            subprocess.run([OPTS.binary, "plan", "--model", PROFILE, "--cluster",
                            os.path.join(common.ROOT, "profiles", "clusters",
                                         "atlas800-910a-1n.json"),
                            "--pp", "4", "-q", "-o", path], check=True)
            with open(path) as f:
                doc = json.load(f)
            main = [t for t in doc["transfers"] if t["kind"] == "main"]
            listed = {t["from_stage"]: t["carried"] for t in main}
            self.assertEqual(listed, {0: ["temb", "text_context"], 1: ["temb", "text_context"],
                                      2: ["temb", "text_context"], 4: [], 5: [], 6: []})
            p = load_plan(path, self.model)
            for s in listed:
                self.assertEqual([c.name for c in p.carried_crossing(s)], listed[s])
                self.assertEqual([c.name for c in p._rule_carried(s)], listed[s])
            main[0]["carried"] = ["temb", "no_such_tensor"]
            with open(path, "w") as f:
                json.dump(doc, f)
            with self.assertRaisesRegex(plan.PlanError, "no_such_tensor"):
                load_plan(path, self.model).carried_crossing(0)

    @unittest.skipIf(mixed_precision() is None, "this pulse_runtime has no mixed precision")
    def test_the_bf16_plan_fits_a_mixed_precision_run(self):
        """What pulse-run --dtype bfloat16 checks before it trains (runner.prepare)."""
        import torch
        from pulse_runtime import comm
        prec = mixed_precision().precision("bfloat16", "cpu")
        self.assertEqual(prec.param_dtype, torch.float32)
        model = self.sd2.make(512, 1.0, prec.param_dtype, device="meta")
        p = load_plan(os.path.join(DATA, "sd2-unet-512-pp1-bf16.plan.json"), model)
        p.check_bytes(comm.Shapes(model, p.microbatch_size, "meta", prec.comm_dtype,
                                  prec.autocast), "bfloat16")


@common.requires_torch
class Tiny(unittest.TestCase):
    def test_config_scales_channels_and_heads(self):
        cfg = load_sd2().Config(64, 0.1)
        self.assertEqual((cfg.channels, cfg.head_dim, cfg.context_dim, cfg.latent),
                         ((32, 64, 128, 128), 8, 104, 8))
        full = load_sd2().Config(768, 1.0)
        self.assertEqual((full.channels, full.head_dim, full.context_dim, full.temb_dim),
                         ((320, 640, 1280, 1280), 64, 1024, 1280))
        with self.assertRaisesRegex(ValueError, "multiple of 64"):
            load_sd2().Config(96, 0.1)

    def test_staged_run_equals_the_one_piece_forward(self):
        import torch
        from pulse_runtime import blocklist, models
        model = models.load(SD2 + ":build_tiny", seed=0, dtype=torch.float64)
        batch = model.make_batch(2, seed=1)
        loss = model.loss_sum(model(batch), batch)
        want = torch.autograd.grad(loss, list(model.parameters()))
        # Three stages with detached boundaries, as the runtime cuts them.
        cuts = [(0, 15), (16, 30), (31, len(model.blocks) - 1)]
        env, h, leaves, outs = dict(batch), model.first_input(batch), [], []
        for first, last in cuts:
            stage = blocklist.BlockRange(model, first, last)
            h_in = h if first == 0 else blocklist.detached_leaf(h)
            stage_env = {k: (blocklist.detached_leaf(v) if v.requires_grad else v)
                         for k, v in env.items()}
            h, produced = stage.forward(h_in, stage_env)
            leaves.append((h_in, stage_env))
            outs.append((h, produced))
            env.update(produced)
        staged = model.loss_sum(h, batch)
        self.assertAlmostEqual(staged.item(), loss.item(), places=10)
        torch.autograd.backward(staged)
        for k in reversed(range(len(cuts) - 1)):  # hand gradients back across boundaries
            h_next, env_next = leaves[k + 1]
            pairs = [(outs[k][0], h_next.grad)]
            pairs += [(t, env_next[n].grad) for n, t in outs[k][1].items()
                      if n in env_next and env_next[n].grad is not None]
            for later in leaves[k + 2:]:
                pairs += [(t, later[1][n].grad) for n, t in outs[k][1].items()
                          if n in later[1] and later[1][n].grad is not None]
            torch.autograd.backward([p[0] for p in pairs], [p[1] for p in pairs])
        for p, g in zip(model.parameters(), want):
            self.assertTrue(torch.allclose(p.grad, g, rtol=1e-9, atol=1e-12))


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
