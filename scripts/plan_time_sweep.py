#!/usr/bin/env python3
"""Planning time over every shipped model x every shipped cluster, tuned, at 1, 2, 4, 8,
16, 32 and 64 samples per device (--global-batch = that x the cluster's devices): the CPU
seconds (user + sys of the planning process, os.wait4's rusage of the child, so a shared
machine slows the wall clock, not the figure) and peak resident memory of each plan, against
the 5 s target of issue 42. Prints a Markdown table, then the slowest rows and the maximum.

  scripts/plan_time_sweep.py [--binary build/pulse-plan] [-j N] [--sample K]
                             [--per-device 1,2,...,64] [--only SUBSTR] [--extra ARGS]
                             [--cpu-limit S] [-o TABLE.md]

--sample K plans every K-th case of the full list (a fixed stride, so the same cases every
run) to keep a development loop short; -j N plans N cases at once (each figure is still its
own process's CPU time). A case past --cpu-limit is stopped by SIGXCPU (exit -24).
"""

import argparse
import concurrent.futures
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import limits_bench  # noqa: E402  (devices_of)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROFILES = ROOT / "profiles"
TARGET_S = 5.0


def cases(per_device):
    for m in sorted((PROFILES / "models").glob("*.json")):
        for c in sorted((PROFILES / "clusters").glob("*.json")):
            n = limits_bench.devices_of(c)
            for k in per_device:
                yield m.stem, c.stem, k, ["--model", str(m), "--cluster", str(c),
                                          "--global-batch", str(k * n)]


def plan_once(binary, args, cpu_limit):
    """(exit code, CPU s, wall s, peak MiB, first stderr line)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit + 5))
    start = time.monotonic()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([binary, "plan", *args, "-q", "-o", "-"], stdout=subprocess.DEVNULL,
                             stderr=err, preexec_fn=limit)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - start
        err.seek(0)
        lines = err.read().decode("utf-8", "replace").strip().splitlines()
    return (os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, wall,
            usage.ru_maxrss / 1024, lines[0] if lines else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "pulse-plan"))
    ap.add_argument("-j", type=int, default=1)
    ap.add_argument("--sample", type=int, default=1, help="every K-th case only")
    ap.add_argument("--per-device", default="1,2,4,8,16,32,64")
    ap.add_argument("--only", default="", help="cases whose model or cluster contains this")
    ap.add_argument("--extra", default="", help="more plan arguments, space-separated")
    ap.add_argument("--cpu-limit", type=int, default=300)
    ap.add_argument("-o", "--output", help="also write the table and summary here")
    a = ap.parse_args()
    todo = [c for c in cases([int(k) for k in a.per_device.split(",")])
            if a.only in c[0] or a.only in c[1]][::max(1, a.sample)]
    extra = a.extra.split()

    def one(case):  # each row on stderr as it comes, for a long run's progress
        r = plan_once(a.binary, case[3] + extra, a.cpu_limit)
        print(f"{case[0]}, {case[1]}, {case[2]} per device: exit {r[0]}, {r[1]:.2f} s CPU",
              file=sys.stderr, flush=True)
        return r

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.j)) as pool:
        runs = list(pool.map(one, todo))
    lines = ["| model | cluster | samples per device | exit | CPU s | wall s | peak MiB |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for (model, cluster, k, _), (code, cpu, wall, rss, _) in zip(todo, runs):
        lines.append(f"| {model} | {cluster} | {k} | {code} | {cpu:.2f} | {wall:.2f} | {rss:.0f} |")
    order = sorted(range(len(todo)), key=lambda i: -runs[i][1])
    over = [i for i in order if runs[i][1] > TARGET_S]
    cpus = sorted(r[1] for r in runs)
    summary = [
        "",
        f"{len(todo)} plans; CPU s: max {cpus[-1]:.2f}, median {cpus[len(cpus) // 2]:.2f}, "
        f"total {sum(cpus):.1f}; {len(over)} over {TARGET_S:g} s; exits: "
        + ", ".join(f"{code}: {sum(1 for r in runs if r[0] == code)}"
                    for code in sorted({r[0] for r in runs})),
        "",
        "Slowest:",
    ]
    for i in order[:10]:
        model, cluster, k, _ = todo[i]
        code, cpu, _, _, first = runs[i]
        summary.append(f"- {model}, {cluster}, {k} per device: {cpu:.2f} s (exit {code})"
                       + (f": {first[:120]}" if code not in (0,) and first else ""))
    text = "\n".join(lines + summary) + "\n"
    print(text, end="")
    if a.output:
        pathlib.Path(a.output).write_text(text)
    return 0 if not over else 1


if __name__ == "__main__":
    sys.exit(main())
