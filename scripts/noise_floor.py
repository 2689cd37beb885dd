#!/usr/bin/env python3
"""The noise floor of the plan search: how far a plan's predicted throughput moves when the
model profile is recalibrated by a few percent, the change a `diff --fail-if-slower` gate
sees in a pull request that does nothing else.

For each trial, every layer's forward and backward times on the cluster's device type are
multiplied by their own factor, uniform in [1 - eps, 1 + eps] (a seeded generator, so a run
is reproducible), the model is planned again, and its samples/s is compared with the plan of
the unperturbed profile. Beside it, the change the perturbation alone makes to the total
compute of one sample (the sum of every layer's forward + backward at microbatch 1): what a
planner that kept its choices would see, to first order. The difference between the two is
the search's own noise: another cut, microbatch size or schedule tie-break.

Prints a table, one row per eps, and the largest |throughput change| over all trials.

  scripts/noise_floor.py --binary build/pulse-plan \
      --model profiles/models/sd2-unet-512.json \
      --cluster profiles/clusters/dgx1-v100-32gb-1n.json --trials 12
"""
import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def plan_rate(binary, model, cluster, out):
    subprocess.run([binary, "plan", "--model", str(model), "--cluster", str(cluster), "-q",
                    "-o", str(out)], check=True)
    return json.loads(Path(out).read_text())["predicted"]["samples_per_s"]


def perturbed(profile, device, eps, rng):
    """The profile with each layer's times on `device` scaled by one factor per layer;
    also the relative change of the per-sample compute at microbatch 1."""
    doc = json.loads(json.dumps(profile))
    before = after = 0.0
    for layer in doc["layers"]:
        factor = rng.uniform(1 - eps, 1 + eps)
        for key in ("forward_s", "backward_s"):
            times = layer[key].get(device)
            if times is None:
                continue
            before += times[0]
            layer[key][device] = [t * factor for t in times]
            after += times[0] * factor
    return doc, 100.0 * (after / before - 1.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default="build/pulse-plan")
    ap.add_argument("--model", default="profiles/models/sd2-unet-512.json")
    ap.add_argument("--cluster", default="profiles/clusters/dgx1-v100-32gb-1n.json")
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.01, 0.03, 0.05])
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    profile = json.loads(Path(args.model).read_text())
    device = json.loads(Path(args.cluster).read_text())["device"]["type"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = plan_rate(args.binary, args.model, args.cluster, tmp / "base.json")
        print(f"{Path(args.model).name} on {Path(args.cluster).name}: {base:.2f} samples/s "
              f"unperturbed; {args.trials} trials per eps, seed {args.seed}")
        print(f"{'eps':>5}  {'compute change %':>22}  {'throughput change %':>26}  "
              f"{'search noise %':>22}")
        print(f"{'':>5}  {'median |x|':>10}  {'max |x|':>9}  {'median |x|':>10}  {'max |x|':>13}  "
              f"{'median |x|':>10}  {'max |x|':>9}")
        worst = 0.0
        for eps in args.eps:
            rng = random.Random(f"{args.seed}-{eps}")
            compute, rate, noise = [], [], []
            for trial in range(args.trials):
                doc, dc = perturbed(profile, device, eps, rng)
                model = tmp / f"model-{eps}-{trial}.json"
                model.write_text(json.dumps(doc))
                r = plan_rate(args.binary, model, args.cluster, tmp / "p.json")
                dr = 100.0 * (r / base - 1.0)
                # Throughput moves opposite to compute time: -dc is the first-order change.
                compute.append(abs(dc))
                rate.append(abs(dr))
                noise.append(abs(dr + dc))
            worst = max(worst, max(rate))
            print(f"{eps:>5.2f}  {statistics.median(compute):>10.2f}  {max(compute):>9.2f}  "
                  f"{statistics.median(rate):>10.2f}  {max(rate):>13.2f}  "
                  f"{statistics.median(noise):>10.2f}  {max(noise):>9.2f}")
        print(f"largest |throughput change|: {worst:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
