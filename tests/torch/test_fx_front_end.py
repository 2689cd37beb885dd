#!/usr/bin/python3
"""The torch.fx front end on models written the usual way: examples/fx_unet.py (a UNet whose
forward pushes encoder outputs on a list and pops them in the decoder) and
examples/fx_uvit.py (a U-ViT: transformer blocks with long skips).

    test_fx_front_end.py --binary build/pulse-plan --model unet|uvit

For the model: the layers, skips and carried tensors found in the graph are the ones the
code says; the layers run one after another give the module's output exactly; the profiler
writes a schema-valid profile whose parameters and skip bytes equal the module's (measured
independently, with forward hooks on the original module); pulse-plan keeps every skip
local; pulse-run trains it by a pp 2 plan (pulse, then the sequential baseline that relays
skips) with the gradients and parameters of one-process training, in float64. And the front
end refuses, with a clear message, what it cannot split.
"""

import json
import os
import sys
import tempfile
import textwrap
import unittest

import common

OPTS = None
SCHEMA = os.path.join(common.ROOT, "schema", "model.schema.json")
MODELS = {
    "unet": {
        "spec": os.path.join(common.ROOT, "examples", "fx_unet.py") + ":build",
        "layers": ["time_embedding", "conv_in"] + [f"down_blocks.{i}" for i in range(5)]
                  + ["mid_block"] + [f"up_blocks.{i}" for i in range(6)]
                  + ["norm_out", "conv_out"],
        # conv_in and every down block push; up block i pops the (5 - i)-th.
        "skips": [("conv_in", "up_blocks.5")] + [(f"down_blocks.{i}", f"up_blocks.{4 - i}")
                                                 for i in range(5)],
        "carried": ["time_embedding"],
    },
    "uvit": {
        "spec": os.path.join(common.ROOT, "examples", "fx_uvit.py") + ":build",
        "layers": ["time_embed", "patch_embed"] + [f"in_blocks.{i}" for i in range(3)]
                  + ["mid_block"] + [f"out_blocks.{i}" for i in range(3)]
                  + ["norm", "decoder_pred"],
        # The time token joins the patch tokens in the first block (a short skip over
        # patch_embed), then the long skips, LIFO.
        "skips": [("time_embed", "in_blocks.0")] + [(f"in_blocks.{i}", f"out_blocks.{2 - i}")
                                                   for i in range(3)],
        "carried": [],
    },
}


def close(a, b, tol):
    scale = b.abs().max().item()
    return bool(((a - b).abs() <= tol * scale).all()) if scale > 0 else bool((a == 0).all())


def hooked_output_bytes(model):
    """Bytes per sample of each layer module's output in the original module's forward,
    seen by forward hooks (not by the front end's own execution)."""
    import torch
    seen = {}
    handles = [model.module.get_submodule(name).register_forward_hook(
        lambda mod, args, out, name=name: seen.__setitem__(name, out))
        for name in model.block_names]
    batch = model.make_batch(3, seed=0)
    with torch.no_grad():
        model(batch)
    for h in handles:
        h.remove()
    return {n: t.numel() * t.element_size() // 3 for n, t in seen.items()}


@common.requires_torch
class FrontEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        from pulse_runtime import models
        cls.case = MODELS[OPTS.model]
        cls.model = models.load(cls.case["spec"], seed=0, dtype=torch.float64)
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_graph_split(self):
        m = self.model
        self.assertEqual(m.block_names, self.case["layers"])
        self.assertEqual([(s["producer"], s["consumer"]) for s in m.skips], self.case["skips"])
        self.assertEqual([c["name"] for c in m.carried], self.case["carried"])
        self.assertTrue(all(c["needs_gradient"] for c in m.carried))
        from pulse_runtime import blocklist
        names = [n for n, _ in blocklist.named_parameters(m)]
        self.assertEqual(sorted(names), sorted(n for n, _ in m.module.named_parameters()))

    def test_layers_in_a_row_give_the_modules_output(self):
        import torch
        m = self.model
        batch = m.make_batch(3, seed=5)
        env, h = dict(batch), m.first_input(batch)
        producers = {s["producer"]: s["name"] for s in m.skips}
        with torch.no_grad():
            for name, block in zip(m.block_names, m.blocks):
                h, produced = block(h, env)
                env.update(produced)
                if name in producers:
                    env[producers[name]] = h
            self.assertTrue(torch.equal(h, m(batch)))

    def test_profile_plan_and_run(self):
        import torch
        from pulse_runtime import optim, reference
        prof_path = self.path("profile.json")
        common.run([sys.executable, os.path.join(common.ROOT, "scripts", "profile_torch.py"),
                    "--model", self.case["spec"], "--dtype", "float64", "--sizes", "1,2",
                    "--warmup", "0", "--repeats", "1", "--keep-failed", "-o", prof_path])
        with open(prof_path) as f:
            prof = json.load(f)
        import jsonschema
        with open(SCHEMA) as f:
            jsonschema.validate(prof, json.load(f))
        self.assertEqual([l["name"] for l in prof["layers"]], self.case["layers"])
        self.assertEqual(sum(l["params"] for l in prof["layers"]),
                         sum(p.numel() for p in self.model.module.parameters()))
        hooked = hooked_output_bytes(self.model)
        for s in prof["skips"]:
            self.assertEqual(s["bytes_per_sample"], hooked[s["producer"]], s["name"])
        for layer in prof["layers"][:-1]:
            self.assertEqual(layer["output_bytes_per_sample"], hooked[layer["name"]])
        for strategy, pp, dp in (("pulse", 2, 2), ("sequential", 2, 1)):
            with self.subTest(strategy=strategy):
                plan_path = self.path(f"{strategy}.json")
                family = ("--family", "v") if strategy == "pulse" else ()  # the V: skips local
                plan = common.plan(OPTS.binary, prof_path, plan_path, "--strategy", strategy,
                                   "--pp", str(pp), "--dp", str(dp), *family,
                                   "--global-batch", str(4 * dp), "--microbatch-size", "1")
                if strategy == "pulse":
                    self.assertTrue(plan["partition"]["all_skips_local"])
                else:
                    self.assertGreater(plan["comm"]["skip_bytes_per_iteration"], 0)
                out = self.path(f"{strategy}.run")
                common.run([sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"),
                            "--plan", plan_path, "--model", self.case["spec"], "--dtype",
                            "float64", "--out", out, "--quiet"])
                ranks = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(pp * dp)]
                ref = reference.reference_train(self.model, 4 * dp, 0, 1,
                                                optim.Config("sgd", 0.1))
                self.model.load_state_dict(self.fresh_state())  # undo the reference step
                for index in range(dp):
                    for key in ("grads", "params"):
                        got = {n: t for r in ranks if r["replica"] == index
                               for n, t in r[key].items()}
                        self.assertEqual(set(got), set(ref[key]))
                        bad = [n for n in got if not close(got[n], ref[key][n], 1e-9)]
                        self.assertFalse(bad, f"{key} differ for {bad[:8]}")
                with open(os.path.join(out, "summary.json")) as f:
                    self.assertEqual(json.load(f)["p2p_bytes_per_iteration"],
                                     plan["comm"]["p2p_bytes_per_iteration"])

    def fresh_state(self):
        import torch
        from pulse_runtime import models
        return models.load(self.case["spec"], seed=0, dtype=torch.float64).state_dict()


BAD_MODELS = textwrap.dedent('''
    import torch
    from torch import nn

    def make_batch(n, seed, dtype=None, device="cpu"):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 4, generator=g, dtype=torch.float64).to(dtype or torch.float32)
        return {"x": x, "target": x}

    def loss_sum(out, batch):
        return ((out - batch["target"]) ** 2).sum()

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        def forward(self, x):
            return self.a(self.b(self.a(x)))

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        def forward(self, x):
            h = self.a(x)
            return self.b(h) if h.sum() > 0 else h

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        def forward(self, x):
            return self.a(x), self.b(x)

    def twice(seed=0, dtype=torch.float32):
        return Twice().to(dtype)

    def branchy(seed=0, dtype=torch.float32):
        return Branchy().to(dtype)

    def pair(seed=0, dtype=torch.float32):
        return Pair().to(dtype)

    def no_glue(seed=0, dtype=torch.float32):
        return nn.Sequential(nn.Linear(4, 4))
''')


@common.requires_torch
class Refused(unittest.TestCase):
    def test_what_cannot_be_split(self):
        from pulse_runtime import models
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bad.py")
            with open(path, "w") as f:
                f.write(BAD_MODELS)
            cases = {
                "twice": "submodule(s) ['a'] are called more than once in forward",
                "branchy": "torch.fx cannot trace Branchy.forward",
                "pair": "the model's output must be one tensor computed by its last layer",
            }
            for fn, message in cases.items():
                with self.subTest(fn=fn):
                    with self.assertRaises(models.ModelError) as e:
                        models.load(f"{path}:{fn}")
                    self.assertIn(message, str(e.exception))
            # nn.Sequential has no glue, and bad.py's functions are found only by name.
            os.rename(path, os.path.join(tmp, "noglue.py"))
            with open(os.path.join(tmp, "noglue.py")) as f:
                text = f.read().replace("def make_batch", "def make_a_batch")
            with open(os.path.join(tmp, "noglue.py"), "w") as f:
                f.write(text)
            with self.assertRaises(models.ModelError) as e:
                models.load(os.path.join(tmp, "noglue.py") + ":no_glue")
            self.assertIn("defines make_batch() (the fx front end needs make_batch and "
                          "loss_sum)", str(e.exception))


if __name__ == "__main__":
    OPTS, argv = common.main([(("--model",), {"choices": sorted(MODELS), "default": "unet"})])
    unittest.main(argv=argv)
