#!/usr/bin/env python3
"""Same inputs, same bytes: plans every shipped model on every shipped cluster many times,
under a concurrent busy loop, on one core or two, in varied locales and time zones, and
counts the distinct outputs of each case (the plan file's bytes, the exit code and stderr).

Cases: every model x cluster at the default global batch; every model on the 8-node
clusters at global batch 8192; every model with a fixed configuration (--pp 2
--microbatch-size 1, where the exact integer program runs) on the one-node clusters.

It also reads each run's --stats and reports the longest single schedule synthesis of the
case against the wall-clock safety limit (--solver-time-limit): the margin says how far the
deterministic work limits keep the search from the clock.

  scripts/determinism.py --binary build/pulse-plan [--runs 20] [--busy 1] [--jobs 1]
                         [--only SUBSTR]

--jobs N plans N cases at once (each also load for the others).

Exit status 1 when any case has more than one distinct output. Prints a table to stdout.
"""

import argparse
import hashlib
import itertools
import multiprocessing
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent



def busy_loop(stop):
    x = 0
    while not stop.is_set():
        for _ in range(100000):
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF


def cases(models, clusters):
    out = []
    for m, c in itertools.product(models, clusters):
        out.append((f"{m.stem} / {c.stem}", ["--model", str(m), "--cluster", str(c)]))
    for m, c in itertools.product(models, [c for c in clusters if c.stem.endswith("-8n")]):
        out.append((f"{m.stem} / {c.stem} / batch 8192",
                    ["--model", str(m), "--cluster", str(c), "--global-batch", "8192"]))
    for m, c in itertools.product(models, [c for c in clusters if c.stem.endswith("-1n")]):
        out.append((f"{m.stem} / {c.stem} / pp 2 mb 1",
                    ["--model", str(m), "--cluster", str(c), "--pp", "2",
                     "--microbatch-size", "1"]))
    return out


# Run i varies what must not matter: cores (taskset), locale, time zone.
ENVIRONMENTS = [
    ("0,1", "C", "UTC"),
    ("0", "C.UTF-8", "Asia/Kolkata"),
    ("0,1", "de_DE.UTF-8", "America/St_Johns"),
    ("0", "POSIX", "Pacific/Chatham"),
]

STATS = re.compile(r"^  (\S.*?)\s{2,}\S+ \S+\s+(\d+) runs, longest (\S+) (\S+)$")
# --stats lines of builds before issue 16 (no runs or longest): still times, left out.
OLD_STATS = re.compile(r"^  [a-z][a-z -]*?\s+[0-9.]+ (s|ms|us|ns)$")
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def run_once(binary, args, i, workdir):
    cores, lc, tz = ENVIRONMENTS[i % len(ENVIRONMENTS)]
    out = pathlib.Path(workdir) / "plan.json"
    if out.exists():
        out.unlink()
    env = dict(os.environ, LC_ALL=lc, LANG=lc, TZ=tz)
    cmd = ["taskset", "-c", cores, binary, "plan", *args, "-o", str(out), "-q", "--stats"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    longest = 0.0
    kept = []
    for line in p.stderr.splitlines():
        m = STATS.match(line)
        if m:
            if m.group(1).strip() in ("schedule", "memory curve"):
                longest = max(longest, float(m.group(3)) * UNITS[m.group(4)])
            continue
        if OLD_STATS.match(line):
            continue
        kept.append(line)
    h = hashlib.sha256()
    h.update(str(p.returncode).encode())
    h.update("\n".join(kept).encode())
    if out.exists():
        h.update(out.read_bytes())
    return h.hexdigest()[:12], p.returncode, longest


def run_case(job):
    binary, name, args, runs = job
    with tempfile.TemporaryDirectory() as work:
        start = time.monotonic()
        results = [run_once(binary, args, i, work) for i in range(runs)]
        return name, results, time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "pulse-plan"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--busy", type=int, default=1, help="busy-loop processes beside the runs")
    ap.add_argument("--only", default="", help="cases whose name contains this")
    ap.add_argument("--jobs", type=int, default=1, help="cases planned at once")
    a = ap.parse_args()

    help_text = subprocess.run([a.binary, "plan", "--help"], capture_output=True,
                               text=True).stdout
    m = re.search(r"--solver-time-limit S \(=([0-9.]+)\)", help_text)
    safety = float(m.group(1)) if m else float("nan")

    models = sorted((ROOT / "profiles" / "models").glob("*.json"))
    clusters = sorted((ROOT / "profiles" / "clusters").glob("*.json"))
    todo = [c for c in cases(models, clusters) if a.only in c[0]]

    stop = multiprocessing.Event()
    loops = [multiprocessing.Process(target=busy_loop, args=(stop,), daemon=True)
             for _ in range(a.busy)]
    for p in loops:
        p.start()
    bad = 0
    worst = 0.0
    start = time.monotonic()
    print("| case | runs | distinct | exit | seconds, all runs | longest synthesis | "
          "safety / longest |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    jobs = [(a.binary, name, args, a.runs) for name, args in todo]
    try:
        with multiprocessing.Pool(a.jobs) as pool:
            for name, results, seconds in pool.imap(run_case, jobs):
                distinct = sorted({r[0] for r in results})
                codes = sorted({r[1] for r in results})
                longest = max(r[2] for r in results)
                worst = max(worst, longest)
                bad += len(distinct) > 1
                margin = f"{safety / longest:.0f}x" if longest > 0 else "-"
                print(f"| {name} | {a.runs} | {len(distinct)} | "
                      f"{','.join(map(str, codes))} | {seconds:.0f} | {longest * 1e3:.0f} ms | "
                      f"{margin} |", flush=True)
    finally:
        stop.set()
        for p in loops:
            p.join()
    print(f"\n{len(todo)} cases x {a.runs} runs, {a.busy} busy loop(s), {a.jobs} job(s), "
          f"{time.monotonic() - start:.0f} s: {bad} case(s) with more than one output; "
          f"longest synthesis {worst * 1e3:.0f} ms against a safety limit of {safety:g} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
