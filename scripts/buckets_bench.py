#!/usr/bin/env python3
"""`plan --buckets` against the largest bucket's plan applied to every bucket (docs/buckets.md).

  scripts/buckets_bench.py [--binary build/pulse-plan] [--only SUBSTR]

For each case (a shipped model, a one-node cluster, a shipped bucket set) the binary plans
with --buckets; the table gives the bucket set's size, the bucket the kept partition was
made for, the weighted throughput (the global batch over the share-weighted iteration), the
same figure for the plan made for the largest bucket applied to every bucket (its partition
and microbatch size; each bucket's schedule synthesized on its own costs), their ratio, the
rows whose microbatch size differs from the largest bucket's, and the planner's CPU seconds.
Every figure is predicted by pulse-plan's cost model on per-bucket models derived from the
profile (docs/buckets.md), not measured. Exit status 1 when a plan is below its baseline.
"""

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

CASES = [
    ("sdxl-unet-1024", "dgx1-v100-16gb-1n", "sdxl-aspect-40"),
    ("sdxl-unet-1024", "dgx-h100-1n", "sdxl-aspect-40"),
    ("video/open-sora-2.0-11b-129x768x768", "dgx-h200-1n", "open-sora-2.0-768px-frames"),
    ("video/open-sora-2.0-11b-129x768x768", "dgx-b200-1n", "open-sora-2.0-768px-frames"),
]


def plan(binary, model, cluster, buckets, out):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [binary, "plan", "--model", f"profiles/models/{model}.json",
           "--cluster", f"profiles/clusters/{cluster}.json",
           "--buckets", f"profiles/buckets/{buckets}.json", "-o", out]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[-1], cpu
    with open(out) as f:
        return json.load(f), "", cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default="build/pulse-plan")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    binary = os.path.abspath(os.path.join(ROOT, args.binary))
    header = (f"{'model':<36} {'cluster':<18} {'buckets':<27} {'n':>3} {'from':<8} "
              f"{'weighted/s':>10} {'largest/s':>10} {'ratio':>7} {'mb differs':>10} {'cpu s':>6}")
    print(header)
    print("-" * len(header))
    worse = False
    with tempfile.TemporaryDirectory() as tmp:
        for model, cluster, buckets in CASES:
            if args.only not in f"{model} {cluster} {buckets}":
                continue
            p, error, cpu = plan(binary, model, cluster, buckets, os.path.join(tmp, "p.json"))
            name = model.split("/")[-1]
            if p is None:
                print(f"{name:<36} {cluster:<18} {buckets:<27} no plan: {error}")
                continue
            b = p["buckets"]
            body = b["rows"][b["body"]]
            differs = sum(r["microbatch_size"] != body["microbatch_size"] for r in b["rows"])
            ratio = b["weighted_samples_per_s"] / b["largest_plan_samples_per_s"]
            worse = worse or ratio < 1
            print(f"{name:<36} {cluster:<18} {buckets:<27} {len(b['rows']):>3} "
                  f"{b['partition_from']:<8} {b['weighted_samples_per_s']:>10.4g} "
                  f"{b['largest_plan_samples_per_s']:>10.4g} {ratio:>7.4f} {differs:>10} "
                  f"{cpu:>6.1f}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
