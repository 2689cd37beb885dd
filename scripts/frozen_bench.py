#!/usr/bin/python3
"""Frozen encoders in the step (docs/frozen.md): bubbles vs before the step vs cached.

    /usr/bin/python3 scripts/frozen_bench.py [--binary build/pulse-plan] [--jobs N]

For SDXL, Flux.1-dev and Hunyuan-DiT (1024 px) with the frozen encoders their profiles list,
on one V100, 910A and H100 node and on two H100 nodes, it plans each pair three times at the
default global batch, tuned and at a fixed pipeline degree (4 on one node, 8 on two), once
per placement: the search weighs the step (iteration + the frozen work as placed), so each
placement may keep a configuration of its own:

  cached       `--frozen cached`: the step without frozen work, predicted.iteration_s (an
               offline pass encoded every sample; storage per sample is
               frozen.cached_bytes_per_sample)
  before_step  `--frozen before_step`: every device encodes its share before the pipeline
  bubbles      `--frozen bubbles`: the pipeline's idle gaps take what they can, the rest
               before the pipeline

and prints a markdown table: seconds per step, the ratio before_step / bubbles (how much
faster bubbles are), bubbles / cached (what the encoders still cost), the frozen work hidden
in gaps, and each placement's configuration. Every figure is the plan's own; the planner is
deterministic.
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


# The pipeline degree of the "fixed pp" rows: tuned, a plan may keep data parallelism (pp 1,
# no bubbles); these rows show what bubbles do when the step is pipelined.
FIXED_PP = {"1n": 4, "2n": 8}


def plan_one(binary, model, cluster, pp, frozen):
    cmd = [binary, "plan", "--quiet", "--frozen", frozen,
           "--model", os.path.join(ROOT, "profiles", "models", model + ".json"),
           "--cluster", os.path.join(ROOT, "profiles", "clusters", cluster + ".json")]
    if pp:
        cmd += ["--pp", str(pp)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 1:
        return None, proc.stderr.strip().removeprefix("pulse-plan: ")
    if proc.returncode != 0:
        sys.exit(f"frozen_bench: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout), None


def layout(p):
    q = p["parallelism"]
    return f"pp {q['pp']} x dp {q['dp']}, mb {q['microbatch_size']} x {q['num_microbatches']}"


def plan(binary, model, cluster, pp):
    cached, reason = plan_one(binary, model, cluster, pp, "cached")
    if cached is None:
        return {"fits": False, "reason": reason}
    before, _ = plan_one(binary, model, cluster, pp, "before_step")
    bubbles, reason = plan_one(binary, model, cluster, pp, "bubbles")
    if bubbles is None:
        return {"fits": False, "reason": reason}
    f = bubbles["frozen"]
    return {
        "fits": True,
        "layouts": [layout(x) if x else "refused" for x in (cached, before, bubbles)],
        "cached": cached["predicted"]["iteration_s"],
        "before": before["frozen"]["step_s"] if before else None,
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
    print("| model | cluster | pp | cached s | before_step s | bubbles s | before_step / "
          "bubbles | bubbles / cached | in bubbles s | left before the step s | plans (cached; "
          "before_step; bubbles) |")
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
        print(f"| {names[model]} | {cluster} | {tuned} | {r['cached']:.4f} | {before} | "
              f"{r['bubbles']:.4f} | {speedup} | {r['bubbles'] / r['cached']:.3f}x | "
              f"{r['hidden']:.4f} | {r['left']:.4f} | {'; '.join(r['layouts'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
