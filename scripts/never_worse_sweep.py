#!/usr/bin/python3
"""Never worse than itself, over every shipped model x every shipped cluster (issue 29,
item 5), at the default batch and options: each plan is at least as fast as

  (a) every point of its own memory curve (solver.memory_curve[].makespan_s against the
      plan's solver.makespan_s),
  (b) every feasible configuration its search records (search[].samples_per_s),
  (c) every feasible baseline it records (partition.versus.baselines[]) and every feasible
      sharded data-parallel answer (pipeline_or_not.sharded[]).

tests/compile/shipped_never_worse_test.cpp checks the same on each hardware family's
one-node cluster; this sweep covers the multi-node clusters too, which take too long for a
unit test. A plan that does not fit (exit 1), or a model with no times the cluster's device
can be given (small-unet-cpu, measured on a CPU only), has nothing to compare and is counted
apart.
Prints one row per model and the violations; exits 1 when there is one.

  /usr/bin/python3 scripts/never_worse_sweep.py --binary build/pulse-plan [--jobs 2]
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLACK = 1e-9  # plan times are on the nanosecond


def shipped(kind: str) -> list[str]:
    folder = os.path.join(ROOT, "profiles", kind)
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".json"))


def violations(plan: dict) -> list[str]:
    out = []
    makespan = plan["solver"]["makespan_s"] if plan.get("solver") else None
    for c in (plan.get("solver") or {}).get("memory_curve", []):
        if makespan is not None and makespan > c["makespan_s"] * (1 + SLACK):
            out.append(f"curve point at {c['activation_budget_bytes']} B: {c['makespan_s']} s "
                       f"< the plan's {makespan} s")
    mine = plan["predicted"]["samples_per_s"]
    others = [(f"search pp {k['pp']} x dp {k['dp']}, microbatch {k['microbatch_size']}",
               k.get("samples_per_s")) for k in plan.get("search", []) if k["feasible"]]
    versus = plan["partition"].get("versus") or {}
    others += [(f"baseline {b['strategy']}", b.get("samples_per_s"))
               for b in versus.get("baselines", []) if b["feasible"]]
    others += [(f"ZeRO-{a['zero_stage']} data parallel", a.get("samples_per_s"))
               for a in (plan.get("pipeline_or_not") or {}).get("sharded", []) if a["feasible"]]
    out += [f"{what}: {rate} samples/s > the plan's {mine}" for what, rate in others
            if rate is not None and rate > mine * (1 + SLACK)]
    return out


def plan_one(binary: str, model: str, cluster: str, tmp: str) -> tuple[str, str, str, list[str]]:
    out = os.path.join(tmp, f"{model}@{cluster}.json")
    proc = subprocess.run([binary, "plan", "--model", f"{ROOT}/profiles/models/{model}.json",
                           "--cluster", f"{ROOT}/profiles/clusters/{cluster}.json", "-q",
                           "-o", out], capture_output=True, text=True)
    if proc.returncode == 1:
        return model, cluster, "does not fit", []
    if proc.returncode == 2 and "model profile has times for device types" in proc.stderr:
        return model, cluster, "no times", []  # nothing to derive them from (small-unet-cpu)
    if proc.returncode != 0:
        return model, cluster, f"exit {proc.returncode}: {proc.stderr.strip()[:160]}", []
    with open(out) as f:
        found = violations(json.load(f))
    os.remove(out)
    return model, cluster, "planned", found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "pulse-plan"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--models", help="comma-separated model names (default: every shipped one)")
    args = ap.parse_args()
    models = args.models.split(",") if args.models else shipped("models")
    clusters = [c for c in shipped("clusters") if not c.startswith(("cpu-", "emulated-"))]
    rows: dict[str, dict[str, int]] = {}
    bad = []
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        jobs = [pool.submit(plan_one, args.binary, m, c, tmp)
                for m in models for c in clusters]
        for job in concurrent.futures.as_completed(jobs):
            model, cluster, status, found = job.result()
            row = rows.setdefault(model, {"planned": 0, "does not fit": 0, "no times": 0,
                                          "other": 0, "violations": 0})
            row[status if status in row else "other"] += 1
            row["violations"] += len(found)
            bad += [f"{model} on {cluster}: {v}" for v in found]
            if status not in ("planned", "does not fit", "no times"):
                bad.append(f"{model} on {cluster}: {status}")
    print(f"{'model':<24} {'planned':>7} {'no fit':>6} {'no times':>8} {'other':>5} "
          f"{'violations':>10}")
    for model in sorted(rows):
        r = rows[model]
        print(f"{model:<24} {r['planned']:>7} {r['does not fit']:>6} {r['no times']:>8} "
              f"{r['other']:>5} {r['violations']:>10}")
    total = sum(r["planned"] for r in rows.values())
    print(f"{len(clusters)} clusters; {total} plans checked; {len(bad)} problem(s)")
    for line in sorted(bad):
        print("  " + line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
