#!/usr/bin/env python3
"""What `plan --recompute auto` costs: CPU seconds of one binary against another's on shipped
models x clusters, and whether the two keep the same plan.

  scripts/recompute_auto_bench.py --before OLD_BINARY --after NEW_BINARY [--runs N]
                                  [--only SUBSTR] [--scratch]

Each case is planned with --recompute auto by both binaries, alternately, --runs times
(default 3); the table gives each binary's least CPU time (user + system of the planner
process), the ratio after/before, how many of the modes each planned (a mode whose lower
bound on time cannot beat the plan kept is not planned: its `recompute_search.modes[]` entry
says so), and whether the plans agree on everything but the modes' list (`recompute_search`)
and the table of alternatives (`alternatives`, which OLD binaries do not write). --scratch
adds a column: NEW_BINARY planning each mode on its own (--recompute none, selective, full),
summed, what planning each mode from scratch costs.

Used for issue 36 with OLD = /work/baseline/pulse-plan-2113041 (before the table of
alternatives) and NEW = build/pulse-plan. Exit status 1 when a case's plans disagree.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

CASES = [
    ("sd2-unet-512", "dgx1-v100-16gb-1n"),
    ("sd2-unet-512", "atlas800-910a-1n"),
    ("sd2-unet-768", "dgx-a100-2n"),
    ("sdxl-unet-1024", "dgx1-v100-16gb-1n"),
    ("uvit-l2-256", "dgx1-v100-16gb-1n"),
    ("hunyuan-dit-g2-512", "dgx-h100-1n"),
    ("svd-xt-unet-576x1024", "dgx-h200-1n"),
    ("flux1-dev-1024", "dgx1-v100-16gb-2n"),
]


def plan(binary, model, cluster, recompute):
    """(CPU seconds, plan as JSON or None, exit code)."""
    with tempfile.TemporaryDirectory() as work:
        out = pathlib.Path(work) / "plan.json"
        args = [binary, "plan", "-q", "-o", str(out),
                "--model", str(ROOT / "profiles" / "models" / f"{model}.json"),
                "--cluster", str(ROOT / "profiles" / "clusters" / f"{cluster}.json"),
                "--recompute", recompute]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        body = json.loads(out.read_text()) if out.exists() else None
        return usage.ru_utime + usage.ru_stime, body, proc.returncode


def planned_modes(body):
    if not body or "recompute_search" not in body:
        return "-"
    modes = body["recompute_search"]["modes"]
    return f"{sum(1 for m in modes if m['feasible'])}/{len(modes)}"


def same_plan(a, b):
    if a is None or b is None:
        return a is None and b is None
    strip = lambda p: {k: v for k, v in p.items() if k not in ("recompute_search", "alternatives")}
    return (strip(a) == strip(b)
            and a["recompute_search"]["chosen"] == b["recompute_search"]["chosen"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--scratch", action="store_true")
    a = ap.parse_args()
    head = f"{'case':44} {'before s':>9} {'after s':>9} {'after/before':>12} {'modes':>11} same"
    if a.scratch:
        head += f" {'each mode s':>11}"
    print(head)
    total_before = total_after = 0.0
    disagree = 0
    for model, cluster in CASES:
        name = f"{model} / {cluster}"
        if a.only not in name:
            continue
        before, after = [], []
        for _ in range(a.runs):
            t, old, rc_old = plan(a.before, model, cluster, "auto")
            before.append(t)
            t, new, rc_new = plan(a.after, model, cluster, "auto")
            after.append(t)
        same = rc_old == rc_new and same_plan(old, new)
        disagree += not same
        b, n = min(before), min(after)
        total_before += b
        total_after += n
        line = (f"{name:44} {b:9.2f} {n:9.2f} {n / b:12.2f} "
                f"{planned_modes(old) + ' -> ' + planned_modes(new):>11} {'yes' if same else 'NO'}")
        if a.scratch:
            scratch = sum(plan(a.after, model, cluster, m)[0] for m in ("none", "selective", "full"))
            line += f" {scratch:11.2f}"
        print(line, flush=True)
    if total_before > 0:
        print(f"{'all cases':44} {total_before:9.2f} {total_after:9.2f} "
              f"{total_after / total_before:12.2f}")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
