#!/usr/bin/env python3
"""Hostile-input catalogue for the Python runtime (issue 41), as scripts/hostile_catalogue.py is
for the planner: malformed plans (mutations of real plans the planner under test writes: wrong
types at every level, strings for rank groups, missing keys, deep nesting, huge numbers, NaN
and Infinity, negative sizes, world sizes 0 and huge, bad indices, duplicated ranks, schedules
that cannot run, oversized files, /dev/zero) and malformed options, given to pulse-run,
pulse-profile, the torchtitan export and the pipelining adapter's entry.

  scripts/hostile_runtime_catalogue.py --binary build/pulse-plan [--python PY] [--out DIR]
                                       [--only SUBSTR] [--jobs N] [--list] [--verbose]

--python: the interpreter to run the runtime with (default: this one; it needs jsonschema,
and PyTorch for the cases that reach it: the timeout case and the adapter); --out: where each
case gets its folder (default a new temporary one); --only: the cases whose name or class
holds SUBSTR; --jobs: cases run at once (default 2); --list: the cases, not run; --fresh:
every case as its own `python -m ...` (by default most run in a fork of an interpreter that
imported the runtime once, judge.py says how; the controls, the timeout, stdin and the
adapter cases always run fresh).

Every case runs in its own folder and session (setsid). It FAILS on: an exit code other than
the case's (2 for every refusal); a traceback on stderr; stderr other than exactly one line,
or a line that does not match the case's pattern (for a plan: the file and the JSON path);
anything on stdout; more processes started by the command at once than the case allows (1,
the command itself, for a refusal: the check comes before any process is started; then the
session is killed at once); a process left running in its session after it exited; a file written or changed in its folder after a non-zero exit; still running after
60 s. Before any case, the base plans must be what the cases' indices assume, and the
runtime's reader must accept them (a mutation of a plan it refuses anyway proves nothing).

Prints one line per failing case (every case with --verbose) and a count table by class;
exit status 1 when any case fails. tests/torch/CMakeLists.txt runs it as the CTest
pulse_run_hostile.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_runtime import catalogue, judge  # noqa: E402
from hostile_runtime.cases import PYTHON_DIR, Case, make_bases  # noqa: E402


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", help="pulse-plan, which writes the base plans")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--out")
    p.add_argument("--only")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--list", action="store_true")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--fresh", action="store_true",
                   help="every case in a fresh interpreter (slower; default: most in a fork "
                   "of a preloaded one, judge.py)")
    args = p.parse_args(argv)
    if not args.list and not args.binary:
        p.error("--binary is required to run the cases")
    return args


def check_bases(bases, folder):
    """The base plans as the cases' indices assume them, and accepted by the reader."""
    v = bases["v"]
    shape = ([s["device"] for s in v["stages"]], [t["kind"] for t in v["transfers"]],
             v["parallelism"]["num_microbatches"], v["rank_map"]["world_size"],
             [(r["dp_index"], r["pipeline_device"]) for r in v["rank_map"]["ranks"]])
    want = ([0, 1, 1, 0, 0, 1, 1, 0], ["main"] * 4 + ["skip"] * 3, 2, 8,
            [(i // 2, i % 2) for i in range(8)])
    problems = [] if shape == want else [f"v.json is {shape}, the cases assume {want}"]
    direct = [t["kind"] for t in bases["direct"]["transfers"]]
    if direct != ["main", "skip"]:
        problems.append(f"direct.json's transfers are {direct}, the cases assume main, skip")
    split = [o["op"] for o in bases["split"]["schedule"][0]["ops"][6:9]]
    if split != ["F", "I", "W"]:
        problems.append(f"split.json's device 0 runs {split} at ops 6-8, the cases assume F, I, W")
    sys.path.insert(0, PYTHON_DIR)
    from pulse_runtime.plan_doc import PlanError, read_plan
    for name in bases:
        try:
            read_plan(os.path.join(folder, name + ".json"))
        except PlanError as e:
            problems.append(f"the runtime refuses the base plan {name}.json: {e}")
    return problems


def run_all(cases, root, python, jobs, verbose, fresh):
    """Every case, `jobs` at a time (each worker with its own preloaded interpreter, unless
    --fresh)."""
    local = threading.local()
    workers = []

    def one(index_case):
        index, case = index_case
        folder = os.path.join(root, "%03d-%s" % (index, re.sub(r"[^A-Za-z0-9_.=+-]", "_",
                                                                case.name)[:50]))
        os.makedirs(folder)
        if not fresh and not hasattr(local, "preloaded"):
            local.preloaded = judge.Preloaded(python)
            workers.append(local.preloaded)
        return judge.run(case, folder, python, getattr(local, "preloaded", None))

    results = []
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        for result in pool.map(one, enumerate(cases)):
            results.append(result)
            if result["fails"] or verbose:
                tag = "FAIL" if result["fails"] else "ok  "
                print(f"{tag} {result['cls']:<13} {result['name']:<60} rc={result['rc']} "
                      f"{result['seconds']:5.2f}s {'; '.join(result['fails'])}", flush=True)
                if result["fails"] or verbose:
                    print(f"       stderr: {result['stderr'][:300]!r}", flush=True)
    for w in workers:
        w.close()
    return results


def table(results):
    classes = []
    for r in results:
        if r["cls"] not in classes:
            classes.append(r["cls"])
    print(f"{'class':<14}{'cases':>6}{'ok':>6}{'FAIL':>6}{'seconds':>9}")
    for cls in classes + ["total"]:
        mine = [r for r in results if cls in ("total", r["cls"])]
        fails = sum(1 for r in mine if r["fails"])
        print(f"{cls:<14}{len(mine):>6}{len(mine) - fails:>6}{fails:>6}"
              f"{sum(r['seconds'] for r in mine):>9.1f}")


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    cases = catalogue.all_cases()
    if args.only:
        cases = [c for c in cases if args.only in c.name or args.only in c.cls]
    if args.list:
        for c in cases:
            print(f"{c.cls:<14}{c.command:<11}{c.expect:>3}  {c.name}")
        print(f"{len(cases)} cases")
        return 0
    root = args.out or tempfile.mkdtemp(prefix="pulse-hostile-runtime-")
    os.makedirs(root, exist_ok=True)
    Case.base_dir = os.path.join(root, "_base")
    started = time.monotonic()
    bases = make_bases(os.path.abspath(args.binary), Case.base_dir)
    problems = check_bases(bases, Case.base_dir)
    if problems:
        for p in problems:
            print(f"hostile_runtime_catalogue.py: {p}", file=sys.stderr)
        return 1
    results = run_all(cases, root, args.python, args.jobs, args.verbose, args.fresh)
    table(results)
    failed = sum(1 for r in results if r["fails"])
    print(f"{len(results)} cases, {failed} FAIL, {time.monotonic() - started:.1f} s in all "
          f"(cases in {root})")
    if not args.out and not failed:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
