#!/usr/bin/env python3
"""Is any plan behind a published schedule its own certificate lists? Plans each case of
scripts/determinism.py (every shipped model x cluster, the 8-node clusters at global batch
8192, pp 2 on one node) with one binary and compares the plan's iteration with each feasible
entry of its `certificate.published[]` (1F1B; on a two-stage V, PyTorch's ZBVZeroBubble and
DeepSeek's DualPipeV on the plan's own stages).

  scripts/published_ahead.py BINARY [--only SUBSTR]

Prints each entry ahead of its plan (the plan's iteration, the entry's, their ratio, and
whether the plan runs frozen encoders in its step, where the compiler keeps the shorter
step and an entry may be ahead on the iteration alone; docs/plans.md), then a count; exit
status 1 when an entry is ahead of a plan without frozen work in its step.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import determinism  # noqa: E402  (the case list)

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--only", default="", help="cases whose name contains this")
    a = ap.parse_args()
    models = sorted((ROOT / "profiles" / "models").glob("*.json"))
    clusters = sorted((ROOT / "profiles" / "clusters").glob("*.json"))
    todo = [c for c in determinism.cases(models, clusters) if a.only in c[0]]
    plans = ahead = unexplained = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "plan.json"
        for name, args in todo:
            run = subprocess.run([a.binary, "plan", *args, "--output", str(out)],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                continue  # refused or not fitting: no plan, no certificate
            plan = json.loads(out.read_text())
            plans += 1
            iteration = plan["predicted"]["iteration_s"]
            frozen_in_step = plan.get("frozen", {}).get("placement", "cached") != "cached"
            for entry in plan["certificate"].get("published", []):
                if not entry.get("feasible") or entry["iteration_s"] >= iteration * (1 - 1e-9):
                    continue
                ahead += 1
                unexplained += 0 if frozen_in_step else 1
                print(f"{name}: plan {iteration:.6f} s, {entry['schedule']} "
                      f"{entry['iteration_s']:.6f} s ({entry['iteration_s'] / iteration:.5f})"
                      f"{', frozen work in the step' if frozen_in_step else ''}", flush=True)
    print(f"{plans} plans, {ahead} published entries ahead, {unexplained} of them where no "
          "frozen work is in the step")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
