#!/usr/bin/python3
"""The PyTorch profiler front end on the example UNet: real model -> profile -> plan.

Profiles examples/small_unet.py on the CPU (two small microbatch sizes, few repeats, to stay
within seconds), validates the profile against schema/model.schema.json, checks it against
the model itself (parameters, skip and carried tensor sizes computed independently), plans
it with pulse-plan on the CPU cluster, and checks that the checked-in profiles still
describe the model (their bytes and parameters equal a fresh measurement's).
"""

import json
import os
import sys
import tempfile
import unittest

import common

OPTS = None
SCHEMA = os.path.join(common.ROOT, "schema", "model.schema.json")


def profile(model_spec, out, *extra):
    # Few repeats on a shared machine: what is checked here is the profile's structure, not
    # its timing, so a failed timing check keeps it (--keep-failed).
    common.run([sys.executable, os.path.join(common.ROOT, "scripts", "profile_torch.py"),
                "--model", model_spec, "--keep-failed", "-o", out, *extra])
    with open(out) as f:
        return json.load(f)


def independent_sizes(model):
    """Bytes per sample of every skip and carried tensor, from one plain forward."""
    import torch
    batch = model.make_batch(1, seed=0)
    sizes, env, h = {}, dict(batch), model.first_input(batch)
    with torch.no_grad():
        for name, block in zip(model.block_names, model.blocks):
            h, produced = block(h, env)
            env.update(produced)
            for k, v in produced.items():
                sizes[k] = v.numel() * v.element_size()
            for s in model.skips:
                if s["producer"] == name:
                    env[s["name"]] = h
                    sizes[s["name"]] = h.numel() * h.element_size()
    return sizes


def structure(prof):
    """What must not depend on the machine: names, kinds, parameters and bytes."""
    return {
        "layers": [(l["name"], l["kind"], l["params"], l["output_bytes_per_sample"],
                    l["activation_bytes_per_sample"]) for l in prof["layers"]],
        "skips": prof["skips"], "carried": prof["carried"], "dtype": prof["dtype"],
    }


@common.requires_torch
class ProfileSmallUNet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from pulse_runtime import blocklist
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "small-unet-cpu.json")
        cls.prof = profile(common.SMALL_UNET + ":build", cls.path, "--sizes", "1,2",
                           "--warmup", "1", "--repeats", "3")
        cls.model = blocklist.load_factory(common.SMALL_UNET + ":build")()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_schema(self):
        import jsonschema
        with open(SCHEMA) as f:
            jsonschema.validate(self.prof, json.load(f))
        self.assertEqual(self.prof["provenance"]["method"], "measured")
        self.assertEqual(self.prof["timing"]["device_types"], ["CPU"])
        self.assertIn("PyTorch", self.prof["provenance"]["source"])

    def test_layers_and_parameters(self):
        self.assertEqual([l["name"] for l in self.prof["layers"]], self.model.block_names)
        total = sum(p.numel() for p in self.model.parameters())
        self.assertEqual(sum(l["params"] for l in self.prof["layers"]), total)
        for layer, block in zip(self.prof["layers"], self.model.blocks):
            self.assertEqual(layer["params"], sum(p.numel() for p in block.parameters()))

    def test_skip_and_carried_bytes(self):
        sizes = independent_sizes(self.model)
        self.assertEqual(len(self.prof["skips"]), len(self.model.skips))
        for s, spec in zip(self.prof["skips"], self.model.skips):
            self.assertEqual((s["producer"], s["consumer"]), (spec["producer"], spec["consumer"]))
            self.assertEqual(s["bytes_per_sample"], sizes[spec["name"]], s["name"])
        for c in self.prof["carried"]:
            self.assertEqual(c["bytes_per_sample"], sizes[c["name"]], c["name"])

    def test_plausible_times_and_bytes(self):
        sizes = self.prof["timing"]["microbatch_sizes"]
        for layer in self.prof["layers"]:
            self.assertGreater(layer["activation_bytes_per_sample"], 0, layer["name"])
            self.assertGreater(layer["output_bytes_per_sample"], 0, layer["name"])
            for key in ("forward_s", "backward_s"):
                self.assertTrue(all(t > 0 for t in layer[key]["CPU"]), layer["name"])
        # How per-sample time moves with the microbatch is a measurement of the machine, not a
        # property of the code: on a loaded runner it moved 4x between runs. The profiler's
        # own checks (pulse-profile's verdict) and scripts/ benchmarks judge it, not a test.

    def test_plans_with_all_skips_local(self):
        out = os.path.join(self.tmp.name, "plan.json")
        plan = common.plan(OPTS.binary, self.path, out, "--pp", "2", "--dp", "1", "--family", "v")
        self.assertEqual(plan["inputs"]["model"]["provenance"], "measured")
        self.assertTrue(plan["partition"]["all_skips_local"])
        self.assertEqual({s["route"] for s in plan["skips"]}, {"local"})
        self.assertEqual(len(plan["skips"]), len(self.model.skips))

    def test_checked_in_profiles_describe_the_model(self):
        fresh64 = profile(common.SMALL_UNET + ":build_test",
                          os.path.join(self.tmp.name, "t64.json"), "--dtype", "float64",
                          "--sizes", "1", "--warmup", "0", "--repeats", "1")
        for path, fresh in ((common.MEASURED_PROFILE, self.prof), (common.TEST_PROFILE, fresh64)):
            with open(path) as f:
                self.assertEqual(structure(json.load(f)), structure(fresh),
                                 f"{path} is stale: regenerate it (docs/torch.md)")

    def test_provenance_states_both_checks(self):
        lines = self.prof["provenance"]["assumptions"]
        self.assertTrue(any(l.startswith("Small-batch check") for l in lines), lines)
        self.assertTrue(any(l.startswith("Inversion check") for l in lines), lines)
        self.assertIn("sizes interleaved", self.prof["provenance"]["source"])


@common.requires_torch
class ProfilerPieces(unittest.TestCase):
    """The parts of the profiler and the example model that need no long measurement."""

    def test_findings_on_hand_made_times(self):
        from pulse_runtime import profiler

        class Model:
            block_names = ["a", "b"]

        def row(fwd, bwd):
            return {"forward_s": fwd, "backward_s": bwd}
        # a: 3 ms at 1, 2 ms at 2 -> per sample 3 vs 1 (3x), whole 1.5x; b: 1 ms, 2 ms.
        by_size = {1: [row(1e-3, 2e-3), row(0.4e-3, 0.6e-3)],
                   2: [row(0.8e-3, 1.2e-3), row(0.8e-3, 1.2e-3)]}
        per_sample, inversions = profiler.small_batch_findings(Model, by_size, [1, 2], 1.2)
        self.assertEqual(len(per_sample), 1)
        self.assertTrue(per_sample[0].startswith("a: per-sample time at microbatch 1 is 3.00x"))
        self.assertEqual(inversions, ["a: microbatch 1 takes 1.50x as long as microbatch 2"])
        self.assertEqual(profiler.rotation([1, 2, 4], 4), [2, 4, 1])

    def test_inversions_have_their_own_limit(self):
        from pulse_runtime import profiler

        class Model:
            block_names = ["a"]
        # 1.1 ms at microbatch 1, 1.0 ms at 2: inside the small-batch ratio, an inversion
        # beyond the 5% noise floor.
        by_size = {1: [{"forward_s": 0.5e-3, "backward_s": 0.6e-3}],
                   2: [{"forward_s": 0.5e-3, "backward_s": 0.5e-3}]}
        self.assertEqual(profiler.small_batch_findings(Model, by_size, [1, 2], 1.2), ([], []))
        self.assertEqual(profiler.small_batch_findings(Model, by_size, [1, 2], 1.2, 1.05)[1],
                         ["a: microbatch 1 takes 1.10x as long as microbatch 2"])

    def test_verdict_counts_failed_checks_and_says_what_to_do(self):
        from pulse_runtime.profilechecks import verdict
        failed = {"step-sum": ["microbatch 1: -84.0%"], "stamp-overhead": [],
                  "inversion": ["a: microbatch 1 takes 1.10x as long as microbatch 2",
                                "b: microbatch 2 takes 1.07x as long as microbatch 4"]}
        line, write = verdict(failed, 5, cuda=False, thread_clock=False, keep=False)
        self.assertFalse(write)
        self.assertEqual(line, "pulse-profile: 3 check(s) failed (step-sum 1, inversion 2): the "
                         "block times are the machine's load as much as the model's; measure "
                         "again with --clock thread (the profiling thread's CPU time), fewer "
                         "concurrent jobs on the machine, more --repeats; nothing written "
                         "(--keep-failed writes it anyway); the small-batch check flags 5 "
                         "block(s) at a small microbatch, stated in provenance.assumptions")
        line, write = verdict(failed, 0, cuda=False, thread_clock=True, keep=True)
        self.assertTrue(write)
        self.assertNotIn("--clock thread", line)
        self.assertTrue(line.endswith("written anyway (--keep-failed), the failures stated in "
                                      "its provenance.assumptions"), line)
        self.assertIn("fewer jobs beside it on the GPU", verdict(failed, 0, cuda=True,
                                                                 thread_clock=False,
                                                                 keep=False)[0])
        passed = {c: [] for c in failed}
        self.assertEqual(verdict(passed, 0, cuda=False, thread_clock=False, keep=False),
                         ("pulse-profile: the step-sum, stamp-overhead, inversion checks passed",
                          True))

    def test_a_profile_that_fails_its_checks_is_not_written_unless_kept(self):
        import contextlib
        import io
        from pulse_runtime import profiler
        real = profiler.run_profile
        failing = {"small-batch": [], "step-sum": [], "stamp-overhead": [],
                   "inversion": [f"l{i}: microbatch 1 takes 1.10x as long as microbatch 2"
                                 for i in range(40)]}

        def run_profile(model, args, device):
            profiler.print_findings(failing, args.verbose)
            return {"schema": "pulse.model/v1"}, [], failing
        profiler.run_profile = run_profile
        try:
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "p.json")
                argv = ["--model", common.SMALL_UNET + ":build", "--sizes", "1", "-o", out]
                said = io.StringIO()
                with contextlib.redirect_stderr(said), self.assertRaises(SystemExit) as refused:
                    profiler.main(argv)
                self.assertTrue(str(refused.exception.code).startswith(
                    "pulse-profile: 40 check(s) failed (inversion 40)"), refused.exception.code)
                self.assertFalse(os.path.exists(out))
                # Quiet by default: three findings and how many more, not forty lines.
                self.assertEqual(said.getvalue().splitlines()[3],
                                 "pulse-profile: ... and 37 more (--verbose lists them)")
                self.assertEqual(len(said.getvalue().splitlines()), 4)
                said = io.StringIO()
                with contextlib.redirect_stderr(said):
                    profiler.main(argv + ["--keep-failed"])
                self.assertTrue(os.path.exists(out))
                self.assertIn("written anyway (--keep-failed)", said.getvalue().splitlines()[-1])
        finally:
            profiler.run_profile = real

    def test_batch_one_convolution_matches_nn_conv2d(self):
        import torch
        from pulse_runtime import blocklist
        small_unet = blocklist.load_factory(common.SMALL_UNET + ":build").__globals__
        conv2d = small_unet["Conv2d"]
        torch.manual_seed(0)
        for stride in (1, 2):
            fast = conv2d(32, 32, 3, padding=1, stride=stride)
            ref = torch.nn.Conv2d(32, 32, 3, padding=1, stride=stride)
            ref.load_state_dict(fast.state_dict())
            x = torch.randn(1, 32, 24, 24, requires_grad=True)
            self.assertTrue(fast._slow_at_batch_one(x))
            out, want = fast(x), ref(x)
            grad = torch.randn_like(out)
            got = torch.autograd.grad(out, (x, fast.weight, fast.bias), grad)
            exp = torch.autograd.grad(want, (x, ref.weight, ref.bias), grad)
            self.assertLess((out - want).abs().max().item(), 1e-4)
            for g, e in zip(got, exp):
                self.assertLess(((g - e).norm() / e.norm()).item(), 1e-5)


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
