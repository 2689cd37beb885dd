#!/usr/bin/python3
"""pulse-profile's block times add up to the whole training step (issue 27, item 4).

- A model whose blocks spin for known CPU times in forward and backward (distinct per
  block, with a skip and a carried tensor so gradients arrive from several blocks): the
  stamped step gives every block its own forward and backward time, and the blocks add up
  to the plain step's time. Timed on this thread's CPU clock, which other processes on a
  shared machine do not move.
- The example UNet profiled through the command line (--clock thread): at every size the
  blocks' summed medians are within 5% of the median plain step, as the profile states.
- The small-batch check on hand-made times: a launch-bound model (every block as slow at
  microbatch 1 as at 2) flags nothing; a block that loses more than the model does is
  flagged, and an inversion still is.
"""

import json
import os
import re
import sys
import tempfile
import time
import unittest

import common

# Known (forward, backward) seconds of CPU time per block of the spinning model.
SPIN_TIMES = [(0.012, 0.024), (0.006, 0.030), (0.018, 0.009), (0.009, 0.018), (0.015, 0.012)]


def spinning_model():
    import torch
    from torch import nn

    def spin(seconds):
        t0 = time.thread_time()
        while time.thread_time() - t0 < seconds:
            pass

    class Spin(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, fwd, bwd):
            ctx.bwd = bwd
            ctx.save_for_backward(x, w)
            spin(fwd)
            return x * w

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            spin(ctx.bwd)
            return g * w, (g * x).sum().reshape(1), None, None

    class Block(nn.Module):
        def __init__(self, times, skip=None, uses_c=False, makes_c=False):
            super().__init__()
            self.w = nn.Parameter(torch.ones(1))
            self.times, self.skip, self.uses_c, self.makes_c = times, skip, uses_c, makes_c

        def forward(self, h, env):
            if self.skip:
                h = h + env[self.skip]
            if self.uses_c:
                h = h + env["c"]
            out = Spin.apply(h, self.w, *self.times)
            return out, ({"c": out * 2} if self.makes_c else {})

    class Model(nn.Module):
        block_names = [f"b{i}" for i in range(len(SPIN_TIMES))]
        skips = [{"name": "s", "producer": "b1", "consumer": "b3"}]
        carried = [{"name": "c", "producer": "b0", "needs_gradient": True}]

        def __init__(self):
            super().__init__()
            t = SPIN_TIMES
            self.blocks = nn.ModuleList([Block(t[0], makes_c=True), Block(t[1]),
                                         Block(t[2], uses_c=True), Block(t[3], skip="s"),
                                         Block(t[4], uses_c=True)])

        def make_batch(self, n, seed, dtype=None, device="cpu"):
            gen = torch.Generator().manual_seed(seed)
            return {"x": torch.randn(n, 3, generator=gen), "y": torch.randn(n, 3, generator=gen)}

        def first_input(self, batch):
            return batch["x"]

        def loss_sum(self, out, batch):
            return ((out - batch["y"]) ** 2).sum()

    return Model()


@common.requires_torch
class SpinningModel(unittest.TestCase):
    def test_each_block_gets_its_own_time_and_they_add_up(self):
        import torch
        from pulse_runtime import steptimer
        torch.set_num_threads(1)
        model = spinning_model()
        batch = model.make_batch(2, seed=0)
        clock = steptimer.Clock(torch.device("cpu"), "thread")
        steptimer.attributed_step(model, batch, 2, clock)  # warm-up
        fwd, bwd = steptimer.attributed_step(model, batch, 2, clock)
        for i, (f, b) in enumerate(SPIN_TIMES):
            self.assertAlmostEqual(fwd[i], f, delta=0.003, msg=f"forward of b{i}: {fwd}")
            self.assertAlmostEqual(bwd[i], b, delta=0.003, msg=f"backward of b{i}: {bwd}")
        plain = steptimer.time_plain_step(model, batch, 2, clock)
        self.assertLess(abs((sum(fwd) + sum(bwd)) / plain - 1), 0.05, (fwd, bwd, plain))

    def test_the_cuda_clock_path(self):
        """The CUDA branch of the clock (events, elapsed_time in milliseconds, synchronize)
        with torch.cuda's Event and synchronize replaced by host-clock stand-ins."""
        import torch
        from pulse_runtime import steptimer

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.t = None

            def record(self):
                self.t = time.thread_time()

            def elapsed_time(self, end):
                assert self.t is not None and end.t is not None, "elapsed on an unrecorded event"
                return (end.t - self.t) * 1e3

        saved = torch.cuda.Event, torch.cuda.synchronize
        torch.cuda.Event, torch.cuda.synchronize = Event, lambda device=None: None
        try:
            clock = steptimer.Clock(torch.device("cuda"))
            model = spinning_model()
            fwd, bwd = steptimer.attributed_step(model, model.make_batch(2, seed=0), 2, clock)
        finally:
            torch.cuda.Event, torch.cuda.synchronize = saved
        self.assertTrue(clock.cuda)
        for i, (f, b) in enumerate(SPIN_TIMES):
            self.assertAlmostEqual(fwd[i], f, delta=0.003, msg=f"forward of b{i}: {fwd}")
            self.assertAlmostEqual(bwd[i], b, delta=0.003, msg=f"backward of b{i}: {bwd}")


def stated_step_sums(prof):
    """(microbatch, whole step ms, blocks' sum ms) from the profile's whole-step line, the
    blocks' sum checked against the layers' times in the file."""
    whole = next(l for l in prof["provenance"]["assumptions"] if l.startswith("Whole step"))
    stated = [(int(b), float(w), float(s)) for b, w, s in
              re.findall(r"microbatch (\d+): ([\d.]+) ms, blocks ([\d.]+) ms", whole)]
    for k, (_, _, blocks_ms) in enumerate(stated):
        layers = sum(l["forward_s"]["CPU"][k] + l["backward_s"]["CPU"][k] for l in prof["layers"])
        assert abs(layers * 1e3 - blocks_ms) < 0.01, (layers, blocks_ms)
    return stated


@common.requires_torch
class SmallUNetProfile(unittest.TestCase):
    def profile(self, tmp):
        out = os.path.join(tmp, "p.json")
        common.run([sys.executable, os.path.join(common.ROOT, "scripts", "profile_torch.py"),
                    "--model", common.SMALL_UNET + ":build", "--sizes", "1,2,4",
                    "--warmup", "1", "--repeats", "9", "--clock", "thread", "-o", out])
        with open(out) as f:
            return json.load(f)

    def test_blocks_sum_to_the_whole_step_within_5_percent(self):
        """Medians of 9 steps on a shared 2-core machine move by a few percent from run to
        run (single steps by 10-20% under load, CPU time included: the other hyperthread
        slows this one), so a miss is measured once more; an error in the attribution or
        stamps that slow the step fail both."""
        with tempfile.TemporaryDirectory() as tmp:
            for attempt in range(2):
                prof = self.profile(tmp)
                stated = stated_step_sums(prof)
                worst = max(abs(blocks / whole - 1) for _, whole, blocks in stated)
                if worst < 0.05:
                    break
        self.assertEqual([b for b, _, _ in stated], [1, 2, 4])
        self.assertLess(worst, 0.05, stated)
        lines = prof["provenance"]["assumptions"]
        self.assertTrue(lines[0].startswith("Regime: pure fp32"), lines[0])
        self.assertTrue(any(l.startswith("Step-sum check") for l in lines))
        self.assertIn("the profiling thread's CPU time", prof["provenance"]["source"])


@common.requires_torch
class SmallBatchCheck(unittest.TestCase):
    class Model:
        block_names = ["a", "b", "c"]

    @staticmethod
    def rows(times):
        return [{"forward_s": t / 3, "backward_s": 2 * t / 3} for t in times]

    def test_launch_bound_model_flags_nothing(self):
        from pulse_runtime import profiler
        # Every block takes the same time at 1, 2 and 4: per sample 2x and 2x cheaper.
        by_size = {b: self.rows([1e-3, 2e-3, 0.5e-3]) for b in (1, 2, 4)}
        self.assertEqual(profiler.small_batch_findings(self.Model, by_size, [1, 2, 4], 1.2),
                         ([], []))

    def test_block_worse_than_the_model_and_inversions_are_flagged(self):
        from pulse_runtime import profiler
        # The model (b dominates) scales nearly linearly; block a is flat (a fixed cost) and
        # c takes longer at 1 than at 2.
        by_size = {1: self.rows([1e-3, 10e-3, 3e-3]), 2: self.rows([1e-3, 20e-3, 2e-3]),
                   4: self.rows([1e-3, 40e-3, 4e-3])}
        per_sample, inversions = profiler.small_batch_findings(self.Model, by_size, [1, 2, 4],
                                                               1.2)
        self.assertEqual([f.split(" (")[0] for f in per_sample],
                         ["a: per-sample time at microbatch 1 is 2.00x that at 2",
                          "a: per-sample time at microbatch 2 is 2.00x that at 4",
                          "c: per-sample time at microbatch 1 is 3.00x that at 2"])
        self.assertEqual(inversions, ["c: microbatch 1 takes 1.50x as long as microbatch 2"])


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
