#!/usr/bin/env python3
"""Does a change leave every plan as it was? Plans each case of scripts/determinism.py (every
shipped model x cluster, the 8-node clusters at global batch 8192, the exact-ILP path on one
node) once with each of two binaries, and compares the plan's bytes, the exit code and stderr.

  scripts/same_plans.py OLD_BINARY NEW_BINARY [--only SUBSTR]

Prints each case that differs and a count; exit status 1 when any differs. Use it with a
build from before a change that should not move any plan (a refactor, a new check, a reader
change): determinism.py says each binary is stable run to run, this says the two agree.
"""

import argparse
import hashlib
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import determinism  # noqa: E402  (the case list)

ROOT = pathlib.Path(__file__).resolve().parent.parent


def outcome(binary, args):
    with tempfile.TemporaryDirectory() as work:
        out = pathlib.Path(work) / "plan.json"
        proc = subprocess.run([binary, "plan", "-q", "-o", str(out)] + args, capture_output=True)
        body = out.read_bytes() if out.exists() else b""
        # stderr names the output file: the temporary directory differs between the runs.
        err = proc.stderr.replace(work.encode(), b"DIR")
        return proc.returncode, hashlib.sha256(body).hexdigest(), err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--only", default="", help="cases whose name contains this")
    a = ap.parse_args()
    models = sorted((ROOT / "profiles" / "models").glob("*.json"))
    clusters = sorted((ROOT / "profiles" / "clusters").glob("*.json"))
    todo = [c for c in determinism.cases(models, clusters) if a.only in c[0]]
    differ = 0
    for name, args in todo:
        old, new = outcome(a.old, args), outcome(a.new, args)
        if old != new:
            differ += 1
            what = [w for w, x, y in zip(("exit code", "plan bytes", "stderr"), old, new) if x != y]
            print(f"{name}: {', '.join(what)} differ (exit {old[0]} -> {new[0]})", flush=True)
    print(f"{len(todo)} cases, {differ} differ between {a.old} and {a.new}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
