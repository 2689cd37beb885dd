#!/usr/bin/python3
"""Frozen encoders in the step (docs/frozen.md): bubbles vs before the step vs cached.

    /usr/bin/python3 scripts/frozen_bench.py [--binary build/pulse-plan] [--jobs N]

For SDXL, Flux.1-dev and Hunyuan-DiT (1024 px) with the frozen encoders their profiles list,
on one V100, 910A and H100 node and on two H100 nodes, it plans each pair with
`--frozen bubbles` at the default global batch, tuned and at a fixed pipeline degree (4 on
one node, 8 on two): the pipeline plan does not depend on where
the encoders run (the frozen pass places them on the plan kept), and the plan's
`frozen.placements[]` weighs before_step beside the bubbles it chose, so one plan gives
all three:

  cached       the step without frozen work: predicted.iteration_s (an offline pass encoded
               every sample; storage per sample is frozen.cached_bytes_per_sample)
  before_step  predicted.iteration_s + every device encoding its share before the pipeline
  bubbles      predicted.iteration_s + what the idle gaps could not take, before the pipeline

and prints a markdown table: seconds per step, the ratio before_step / bubbles (how much
faster bubbles are), bubbles / cached (what the encoders still cost), and the frozen work
hidden in gaps. Every figure is the plan's own; the planner is deterministic.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [
    ("sdxl-unet-1024", "SDXL 1024 px (VAE, CLIP-L, OpenCLIP-bigG)"),
    ("flux1-dev-1024", "Flux.1-dev 1024 px (VAE, CLIP-L, T5-XXL)"),
    ("hunyuan-dit-g2-1024", "Hunyuan-DiT 1024 px (VAE, CLIP, mT5-XL)"),
]
CLUSTERS = ["dgx1-v100-32gb-1n", "atlas800-910a-1n", "dgx-h100-1n", "dgx-h100-2n"]


# The pipeline degree of the "fixed pp" rows: the tuner does not weigh frozen time when it
# chooses pp (docs/frozen.md), so the tuned plan is often data parallel (pp 1, no bubbles);
# these rows show what bubbles do when the step is pipelined.
FIXED_PP = {"1n": 4, "2n": 8}


def plan(binary, model, cluster, pp):
    cmd = [binary, "plan", "--quiet", "--frozen", "bubbles",
           "--model", os.path.join(ROOT, "profiles", "models", model + ".json"),
           "--cluster", os.path.join(ROOT, "profiles", "clusters", cluster + ".json")]
    if pp:
        cmd += ["--pp", str(pp)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 1:
        return {"fits": False, "reason": proc.stderr.strip().removeprefix("pulse-plan: ")}
    if proc.returncode != 0:
        sys.exit(f"frozen_bench: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    p = json.loads(proc.stdout)
    f = p["frozen"]
    weighed = {w["placement"]: w for w in f["placements"]}
    before = weighed["before_step"]
    return {
        "fits": True,
        "layout": (f"pp {p['parallelism']['pp']} x dp {p['parallelism']['dp']}, "
                   f"mb {p['parallelism']['microbatch_size']} x "
                   f"{p['parallelism']['num_microbatches']}"),
        "cached": p["predicted"]["iteration_s"],
        "before": before["step_s"] if before["feasible"] else None,
        "bubbles": f["step_s"],
        "hidden": f["bubble_s"],
        "left": f["before_step_s"],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=os.path.join(ROOT, "build", "pulse-plan"))
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    pairs = [(m, c, pp) for m, _ in MODELS for c in CLUSTERS
             for pp in (None, FIXED_PP[c.rsplit("-", 1)[1]])]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = dict(zip(pairs, pool.map(lambda job: plan(args.binary, *job), pairs)))
    names = dict(MODELS)
    print("| model | cluster | pp | plan | cached s | before_step s | bubbles s | before_step / "
          "bubbles | bubbles / cached | in bubbles s | left before the step s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (model, cluster, pp), r in results.items():
        tuned = "tuned" if pp is None else f"--pp {pp}"
        if not r["fits"]:
            reason = r["reason"].split(";")[0].split(". ")[0]
            print(f"| {names[model]} | {cluster} | {tuned} | does not fit: {reason} "
                  "| | | | | | | |")
            continue
        before = f"{r['before']:.4f}" if r["before"] is not None else "refused"
        speedup = f"{r['before'] / r['bubbles']:.3f}x" if r["before"] is not None else "-"
        print(f"| {names[model]} | {cluster} | {tuned} | {r['layout']} | {r['cached']:.4f} | {before} | "
              f"{r['bubbles']:.4f} | {speedup} | {r['bubbles'] / r['cached']:.3f}x | "
              f"{r['hidden']:.4f} | {r['left']:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
