#!/usr/bin/python3
"""A skip with route `direct` (producer and consumer stage on different devices).

pulse-plan keeps every skip of the nested example UNet local, so this test derives such a
plan by hand: it plans pulse pp 2, then moves the first layer of the last stage (device 0)
to the stage before it (device 1). The skip that layer consumes now goes directly from
stage 0 (device 0) to stage 2 (device 1), exactly as the planner writes non-local skips: a
`skip` transfer from producer stage to consumer stage. The schedule stays valid (the
dependencies only gain an edge F(0) -> F(2) that the main path already implies). The
runtime must still match one-process training, and send that skip once forward and once
backward per microbatch.
"""

import json
import os
import sys
import tempfile
import unittest

import common

OPTS = None


def move_layer_to_previous_stage(plan):
    """Returns the name of the skip that becomes direct. The main-path message into the last
    stage now carries the moved layer's output: its bytes are updated too (the runtime
    checks them against the model)."""
    last, prev = plan["stages"][-1], plan["stages"][-2]
    moved = last["layers"].pop(0)
    prev["layers"].append(moved)
    with open(common.TEST_PROFILE) as f:
        out = next(l for l in json.load(f)["layers"] if l["name"] == moved)
    per_mb = out["output_bytes_per_sample"] * plan["parallelism"]["microbatch_size"]
    main = next(t for t in plan["transfers"] if t["kind"] == "main" and t["to_stage"] == last["id"])
    for key in ("forward_bytes_per_microbatch", "backward_bytes_per_microbatch"):
        main[key]["total"] += per_mb - main[key]["activation"]
        main[key]["activation"] = per_mb
    skip = next(s for s in plan["skips"] if s["consumer"] == moved)
    skip.update(consumer_stage=prev["id"], consumer_device=prev["device"], local=False,
                route="direct")
    moved_bytes = {"activation": 0, "skip": skip["bytes_per_sample"] *
                   plan["parallelism"]["microbatch_size"], "carried": 0}
    moved_bytes["total"] = moved_bytes["skip"]
    plan["transfers"].append({
        "from_stage": skip["producer_stage"], "to_stage": prev["id"],
        "from_device": skip["producer_device"], "to_device": prev["device"], "kind": "skip",
        "forward_bytes_per_microbatch": moved_bytes,
        "backward_bytes_per_microbatch": dict(moved_bytes), "skips": [skip["name"]]})
    return skip


@common.requires_torch
class DirectSkip(unittest.TestCase):
    def test_direct_skip_matches_reference(self):
        import torch
        from pulse_runtime import blocklist
        from pulse_runtime import reference
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "plan.json")
            plan = common.plan(OPTS.binary, common.TEST_PROFILE, path, "--pp", "2", "--dp",
                               "1", "--global-batch", "4", "--family", "v")
            self.assertEqual(len(plan["stages"]), 4)
            skip = move_layer_to_previous_stage(plan)
            with open(path, "w") as f:
                json.dump(plan, f)
            out = os.path.join(tmp, "run")
            common.run([sys.executable, os.path.join(common.RUNTIME_DIR, "runtime.py"),
                        "--plan", path, "--model", common.SMALL_UNET + ":build_test",
                        "--dtype", "float64", "--out", out, "--timeout", "240"])
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
            ranks = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(2)]
        model = blocklist.load_factory(common.SMALL_UNET + ":build_test")()
        ref = reference.reference_step(model, 4, seed=1, lr=0.1)
        grads = {n: g for r in ranks for n, g in r["grads"].items()}
        err, worst = reference.compare(grads, ref["grads"])
        self.assertLess(err, 1e-10, worst)
        self.assertLess(abs(summary["loss"][0] - ref["loss"]), 1e-10 * abs(ref["loss"]))
        microbatches = plan["parallelism"]["num_microbatches"]
        b = plan["parallelism"]["microbatch_size"]
        # Once forward, once backward per microbatch (the profile has exact float64 sizes).
        self.assertEqual(summary["p2p_bytes_by_kind"]["skip"],
                         2 * microbatches * b * skip["bytes_per_sample"], skip["name"])


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
