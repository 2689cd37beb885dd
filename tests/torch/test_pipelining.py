#!/usr/bin/python3
"""The adapter to PyTorch's pipelining runtime (python/pulse_runtime/pipelining.py).

    test_pipelining.py --binary build/pulse-plan [Emulated|Torch2 ...]

- Emulated (every PyTorch): the adapter's stage modules, rank-local cache and boundary
  layout, driven in one process by a restatement of what PyTorch's runtime does with them
  (below): V, wave and split-backward plans with skips train with the gradients of
  one-process training (float64, 1e-9). A negative control: a producer's backward run before
  its consumer's leaves the skip's gradient unused, and the adapter says so.
- Torch2 (PyTorch 2.6 or later, as every test here): the same plans on
  `_PipelineScheduleRuntime` loaded from `pulse-plan export --format torch-csv`, one gloo
  process per rank (examples/torch_pipelining.py), gradients equal one process.

What the emulation restates, from pytorch/pytorch torch/distributed/pipelining/schedules.py
at 00722e648b740f91d0e71494baa17891749fd291 (`_PipelineScheduleRuntime._step_microbatches`)
and stage.py at 0138610331c90b8053a0bfc6df0175b200a1cad2 (`forward_one_chunk`,
`backward_one_chunk`, `set_local_fwd_input`) and _backward.py (`stage_backward`,
`stage_backward_input`): a stage's input is a fresh leaf that requires grad (received or
handed over on the rank); F calls the stage module on those leaves (stage 0: the microbatch of
the first input) and the last stage's output goes through the loss function; B runs
`torch.autograd.backward` over the outputs with the gradients of the next stage's inputs; I
runs `torch.autograd.grad` for the inputs only, keeping the graph (stage 0: nothing), and W
computes the parameters' gradients afterwards.
"""

import json
import os
import sys
import tempfile
import unittest

import common

sys.path.insert(0, os.path.join(common.ROOT, "tests"))
from plan_edits import wave_plan  # noqa: E402

OPTS = None
MODEL = common.SMALL_UNET + ":build_test"


def close(a, b, tol):
    scale = b.abs().max().item()
    return bool(((a - b).abs() <= tol * scale).all()) if scale > 0 else bool((a == 0).all())


def make_plan(tmp, *options, waves=False):
    path = os.path.join(tmp, "plan.json")
    plan = common.plan(OPTS.binary, common.TEST_PROFILE, path, *options)
    if waves:
        with open(common.TEST_PROFILE) as f:
            plan = wave_plan(plan, json.load(f))
        with open(path, "w") as f:
            json.dump(plan, f)
    return path, plan


class Emulator:
    """PyTorch's runtime semantics for the adapter's stage modules, in one process."""

    def __init__(self, plan, model):
        from pulse_runtime import pipelining
        self.plan, self.model = plan, model
        stage_rank = [pipelining.group_rank_of_device(plan, 0)[d] for d in plan.stage_device]
        layout = pipelining.Layout(plan, stage_rank)
        self.contexts = {r: pipelining.RankContext() for r in set(stage_rank)}
        self.modules = [pipelining.StageModule(plan, layout, s, self.contexts[stage_rank[s]])
                        for s in range(len(plan.stages))]
        self.rank_of = stage_rank
        self.last = len(plan.stages) - 1

    def run(self, batch, order=None):
        b, m = self.plan.microbatch_size, self.plan.num_microbatches
        micro = [{k: v[i * b:(i + 1) * b] for k, v in batch.items()} for i in range(m)]
        for ctx in self.contexts.values():
            ctx.clear()
            ctx.microbatches = micro
        self.fwd, self.grad_out, self.loss = {}, {}, 0.0
        for op, s, mb in order or self.global_order():
            getattr(self, "op_" + op)(s, mb)
        return [k for ctx in self.contexts.values() for k in ctx.unused_gradients()]

    def global_order(self):
        """The devices' op lists merged in an order every dependency allows."""
        lists = {d: list(ops) for d, ops in self.plan.schedule.items()}
        done, order = set(), []
        while any(lists.values()):
            progress = False
            for ops in lists.values():
                while ops and self.ready(ops[0], done):
                    done.add(ops[0])
                    order.append(ops.pop(0))
                    progress = True
            assert progress, "the plan's schedule cannot run to its end"
        return order

    def ready(self, op, done):
        kind, s, mb = op
        if kind == "F":
            return s == 0 or ("F", s - 1, mb) in done
        if kind == "W":
            return ("I", s, mb) in done
        later = s == self.last or ("B", s + 1, mb) in done or ("I", s + 1, mb) in done
        return ("F", s, mb) in done and later

    def op_F(self, s, mb):
        ctx = self.contexts[self.rank_of[s]]
        ctx.mb, ctx.in_chunk = mb, True  # as PulseStage.forward_one_chunk sets them
        if s == 0:
            data = self.contexts[self.rank_of[s]].microbatches[mb]
            inputs = [self.model.first_input(data)]
        else:
            inputs = [t.detach().requires_grad_(True) for t in self.fwd[(s - 1, mb)][1]]
        out = self.modules[s](*inputs)
        outs = out if isinstance(out, tuple) else (out,)
        if s == self.last:
            data = self.contexts[self.rank_of[s]].microbatches[mb]
            loss = self.model.loss_sum(out, data) / self.plan.global_batch
            self.loss += loss.item()
            outs = (loss,)
        self.fwd[(s, mb)] = (inputs, outs)

    def _grads(self, s, mb):
        return None if s == self.last else self.grad_out[(s, mb)]

    def op_B(self, s, mb):
        import torch
        inputs, outs = self.fwd[(s, mb)]
        torch.autograd.backward(outs, self._grads(s, mb))
        if s > 0:
            self.grad_out[(s - 1, mb)] = [t.grad for t in inputs]

    def op_I(self, s, mb):
        import torch
        inputs, outs = self.fwd[(s, mb)]
        if s > 0:
            grads = self._grads(s, mb) or [torch.ones_like(o) for o in outs]
            self.grad_out[(s - 1, mb)] = list(torch.autograd.grad(
                outs, inputs, grads, retain_graph=True))

    def op_W(self, s, mb):
        import torch
        inputs, outs = self.fwd[(s, mb)]
        params = [p for p in self.modules[s].parameters() if p.requires_grad]
        torch.autograd.backward(outs, self._grads(s, mb), inputs=params)


def reference_grads(global_batch):
    from pulse_runtime import optim, reference
    return reference.reference_train(test_model(), global_batch, 0, 1,
                                     optim.Config("sgd", 0.1))


def test_model():
    import torch
    from pulse_runtime import models
    return models.load(MODEL, seed=0, dtype=torch.float64)


@common.requires_torch
class Emulated(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def emulate(self, *options, waves=False, order=None):
        """One iteration of a dp 1 plan, emulated; (plan, emulator, unused cache gradients,
        the model's gradients, the one-process reference)."""
        from pulse_runtime import blocklist
        from pulse_runtime.plan import Plan
        path, raw = make_plan(self.tmp.name, "--dp", "1", *options, waves=waves)
        model = test_model()
        plan = Plan.load(path, model)
        em = Emulator(plan, model)
        gb = plan.global_batch
        left = em.run(model.make_batch(gb, seed=1), order)
        grads = {n: p.grad for n, p in blocklist.named_parameters(model)}
        return plan, em, left, grads, reference_grads(gb)

    def check(self, *options, waves=False):
        plan, em, left, grads, ref = self.emulate(*options, waves=waves)
        self.assertEqual(left, [])
        self.assertAlmostEqual(em.loss, ref["loss"], delta=1e-12)
        bad = [n for n, g in grads.items() if g is None or not close(g, ref["grads"][n], 1e-9)]
        self.assertFalse(bad, f"gradients differ for {bad[:6]}")
        return plan

    def test_v_pp2(self):
        plan = self.check("--pp", "2", "--global-batch", "4", "--family", "v")
        self.assertEqual(plan.stage_device, [0, 1, 1, 0])

    def test_v_pp4_split_backward(self):
        plan = self.check("--pp", "4", "--global-batch", "8", "--split-backward", "--family",
                          "v")
        self.assertEqual(plan.stage_device, [0, 1, 2, 3, 3, 2, 1, 0])
        self.assertEqual({op for ops in plan.schedule.values() for op, _, _ in ops},
                         {"F", "I", "W"})

    def test_waves_with_non_local_skips(self):
        plan = self.check("--pp", "2", "--global-batch", "4", "--microbatch-size", "1",
                          waves=True)
        self.assertEqual(plan.stage_device, [0, 1, 1, 0, 0, 1, 1, 0])

    def test_waves_split_backward(self):
        self.check("--pp", "2", "--global-batch", "4", "--split-backward", waves=True)

    def test_planner_waves(self):
        """The planner's own choice for pp 2 on this cluster: waves, 3 stages per side."""
        plan = self.check("--pp", "2", "--global-batch", "4")
        self.assertGreater(len(plan.stages), 4)

    def test_undelivered_skip_gradient_is_reported(self):
        """Negative control: when a producer stage's backward does not follow its consumer's
        (here: the schedule stops after the decoder side of the V), the skip gradients the
        consumers left in the cache are reported, not silently dropped."""
        path, _ = make_plan(self.tmp.name, "--pp", "2", "--dp", "1", "--global-batch", "4",
                            "--family", "v")
        from pulse_runtime.plan import Plan
        model = test_model()
        plan = Plan.load(path, model)
        em = Emulator(plan, model)
        decoder = [op for op in em.global_order()
                   if op[0] == "F" or (op[0] == "B" and op[1] >= plan.pp)]
        left = em.run(model.make_batch(plan.global_batch, seed=1), decoder)
        local = {(s.name, mb) for s in plan.doc.skips if s.route == "local"
                 for mb in range(plan.num_microbatches)}
        self.assertEqual({(name, mb) for kind, name, mb in left if kind == "skip"}, local)
        self.assertTrue(local)


@common.requires_torch
class Torch2(unittest.TestCase):
    """The adapter on PyTorch's own runtime (PyTorch 2.6+, which common.main requires)."""

    def setUp(self):
        from pulse_runtime import pipelining
        pipelining.require_pipelining()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def run_plan(self, *options, waves=False):
        import torch
        path, plan = make_plan(self.tmp.name, *options, waves=waves)
        csv = os.path.join(self.tmp.name, "plan.csv")
        common.run([OPTS.binary, "export", path, "--format", "torch-csv", "-o", csv])
        out = os.path.join(self.tmp.name, "run")
        common.run([sys.executable, os.path.join(common.ROOT, "examples", "torch_pipelining.py"),
                    "--plan", path, "--csv", csv, "--model", MODEL, "--dtype", "float64",
                    "--device", OPTS.device, "--out", out, "--timeout", "240"], timeout=300)
        world = plan["rank_map"]["world_size"]
        ranks = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]
        ref = reference_grads(plan["parallelism"]["global_batch"])
        for replica in range(plan["parallelism"]["dp"]):
            got = {}
            for r in ranks:
                if r["replica"] == replica:
                    got.update(r["grads"])
            self.assertEqual(set(got), set(ref["grads"]))
            bad = [n for n in got if not close(got[n], ref["grads"][n], 1e-9)]
            self.assertFalse(bad, f"replica {replica}: gradients differ for {bad[:6]}")
        with open(os.path.join(out, "summary.json")) as f:
            self.assertAlmostEqual(json.load(f)["loss"][0], ref["loss"], delta=1e-9)

    def test_v_pp1_one_rank(self):
        """Both stages of the V on one rank: local handoff and the skip cache only (the
        one-GPU check on CUDA)."""
        self.run_plan("--dp", "1", "--pp", "1", "--global-batch", "4", "--family", "v")

    def test_v_pp2(self):
        self.run_plan("--dp", "1", "--pp", "2", "--global-batch", "4", "--family", "v")

    def test_v_pp4(self):
        self.run_plan("--dp", "1", "--pp", "4", "--global-batch", "8", "--family", "v")

    def test_v_pp2_split_backward(self):
        self.run_plan("--dp", "1", "--pp", "2", "--global-batch", "4", "--split-backward",
                      "--family", "v")

    def test_v_pp2_dp2(self):
        self.run_plan("--pp", "2", "--dp", "2", "--global-batch", "8", "--microbatch-size", "2",
                      "--family", "v")

    def test_planner_waves(self):
        """The planner's own choice for pp 2 on this cluster (waves of 12 stages here)."""
        self.run_plan("--dp", "1", "--pp", "2", "--global-batch", "4")

    def test_waves(self):
        self.run_plan("--dp", "1", "--pp", "2", "--global-batch", "4", waves=True)

    def test_waves_split_backward(self):
        self.run_plan("--dp", "1", "--pp", "2", "--global-batch", "4", "--split-backward", waves=True)


if __name__ == "__main__":
    OPTS, argv = common.main([(("--device",), {"default": "cpu",
                                               "help": "Torch2: cpu (gloo) or cuda (NCCL)"})])
    unittest.main(argv=argv)
