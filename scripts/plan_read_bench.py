#!/usr/bin/env python3
"""What reading a plan costs the Python runtime (python/pulse_runtime/plan_doc.read_plan), by
step, for plans of growing size, and what refusing /dev/zero and /dev/urandom costs: the
measurement behind the runtime's plan size limit (plan_json.MAX_PLAN_BYTES, docs/torch.md).

    build-venv/bin/python scripts/plan_read_bench.py --binary build/pulse-plan

Plans: the SD2 UNet on one DGX-1 V100 node at pp 8, dp 1, microbatch 1 with a split backward,
global batch 64, 512 and 2048 (16 stages x the microbatches x 3 ops). Columns: seconds of
each step of plan_json (the file, the JSON, the walk, the schema) on its own, and of the whole
read_plan (those and the typed records and checks); each the best of --repeats runs in this
process (read_plan's per-file memo cleared before each).
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

MAIN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(MAIN, "python"))
from pulse_runtime import plan_doc, plan_json  # noqa: E402


def best(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def refuse_seconds(path, repeats):
    def once():
        try:
            plan_doc.read_plan(path)
        except plan_json.PlanError:
            return
        raise SystemExit(f"{path} was not refused")
    return best(once, repeats)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batches", default="64,512,2048")
    args = p.parse_args()
    plan_json._validator()  # built once per process, as a run builds it
    print(f"{'global batch':>12} {'ops':>8} {'MB':>7} {'read':>6} {'parse':>6} {'walk':>6} "
          f"{'schema':>7} {'read_plan s':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for batch in args.batches.split(","):
            path = os.path.join(tmp, f"plan-{batch}.json")
            subprocess.run([args.binary, "plan", "--model",
                            os.path.join(MAIN, "profiles", "models", "sd2-unet-512.json"),
                            "--cluster", os.path.join(MAIN, "profiles", "clusters",
                                                      "dgx1-v100-32gb-1n.json"),
                            "--pp", "8", "--dp", "1", "--microbatch-size", "1",
                            "--global-batch", batch, "--split-backward", "-q", "-o", path],
                           check=True)
            data = plan_json.read_bytes(path)
            tree = plan_json.parse(path, data)
            steps = {"read": lambda: plan_json.read_bytes(path),
                     "parse": lambda: plan_json.parse(path, data),
                     "walk": lambda: plan_json.walk(path, tree),
                     "schema": lambda: plan_json.validate(path, tree)}
            times = {k: best(fn, args.repeats) for k, fn in steps.items()}

            def whole():
                plan_doc._READ.clear()
                return plan_doc.read_plan(path)
            total = best(whole, args.repeats)
            doc = whole()
            ops = sum(len(o) for o in doc.schedule.values())
            print(f"{batch:>12} {ops:>8} {len(data) / 1e6:>7.1f} {times['read']:>6.2f} "
                  f"{times['parse']:>6.2f} {times['walk']:>6.2f} {times['schema']:>7.2f} "
                  f"{total:>12.2f}")
    for path in ("/dev/zero", "/dev/urandom"):
        print(f"refusing {path}: {refuse_seconds(path, args.repeats):.3f} s")
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
