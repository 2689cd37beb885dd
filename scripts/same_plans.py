#!/usr/bin/env python3
"""Does a change leave every plan as it was? Plans each case of scripts/determinism.py (every
shipped model x cluster, the 8-node clusters at global batch 8192, the exact-ILP path on one
node) once with each of two binaries, and compares the plan's bytes, the exit code and stderr.

  scripts/same_plans.py OLD_BINARY NEW_BINARY [--only SUBSTR]
                        [--old-profiles DIR --ignore-hashes] [--ignore-key KEY ...]
                        [--as-json]
                        [--throughput [--new-args "ARGS"]]

Prints each case that differs and a count; exit status 1 when any differs. Use it with a
build from before a change that should not move any plan (a refactor, a new check, a reader
change): determinism.py says each binary is stable run to run, this says the two agree.

For a profile change that should move no plan (new device types or provenance in the
model files), --old-profiles plans the old binary on the profiles in DIR (a copy of an
older profiles/ directory; cases whose files it lacks are skipped) and --ignore-hashes
compares the plans with every "sha256" key removed (the inputs' hashes change with the
files). --ignore-key KEY (repeatable) removes every key of that name as well: a change that
adds keys on purpose names them, and every other byte must still agree. --as-json compares
the plans as JSON documents (the same keys in the same order, the same values), not as
text: for a change to the text's layout (December 2026: each op on one line), which the
other two imply.

--throughput compares what the plans predict, not their bytes: each case's exit code and
its samples/s over the step (`frozen.samples_per_s` where the plan places frozen encoders,
which the planner chooses by, else `predicted.samples_per_s`), printing every case where
they differ and counting the slower and faster ones (exit status 1 when any is slower or
changes its exit code). It answers "is any plan slower than with an older release?" across
changes that add keys on purpose.
--new-args gives the new binary more arguments, to plan under the old one's assumptions
(issue 42's check against 2113041: `--new-args "--headroom 1 --frozen cached"`, since that
release filled the whole usable memory and planned the denoiser alone).
"""

import argparse
import hashlib
import json
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import determinism  # noqa: E402  (the case list)

ROOT = pathlib.Path(__file__).resolve().parent.parent


def without_hashes(value, keys=("sha256",)):
    if isinstance(value, dict):
        return {k: without_hashes(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [without_hashes(v, keys) for v in value]
    return value


def outcome(binary, args, ignore_hashes=False, profiles=None, ignore_keys=(), as_json=False):
    """(exit code, plan digest, stderr); `profiles`: a profiles directory whose name in
    stderr reads as this checkout's."""
    with tempfile.TemporaryDirectory() as work:
        out = pathlib.Path(work) / "plan.json"
        proc = subprocess.run([binary, "plan", "-q", "-o", str(out)] + args, capture_output=True)
        body = out.read_bytes() if out.exists() else b""
        keys = (("sha256",) if ignore_hashes else ()) + tuple(ignore_keys)
        if keys and body:
            body = json.dumps(without_hashes(json.loads(body), keys), sort_keys=True).encode()
        elif as_json and body:
            body = json.dumps(json.loads(body)).encode()
        # stderr names the output file: the temporary directory differs between the runs.
        err = proc.stderr.replace(work.encode(), b"DIR")
        if profiles:
            err = err.replace(str(profiles).encode(), str(ROOT / "profiles").encode())
        return proc.returncode, hashlib.sha256(body).hexdigest(), err


def predicted(binary, args):
    """(exit code, samples/s over the step or None) of one plan: `frozen.samples_per_s` where
    the plan places frozen encoders (the step the planner chooses by), else
    `predicted.samples_per_s` (the iteration, which is then the step)."""
    with tempfile.TemporaryDirectory() as work:
        out = pathlib.Path(work) / "plan.json"
        proc = subprocess.run([binary, "plan", "-q", "-o", str(out)] + args, capture_output=True)
        if proc.returncode != 0 or not out.exists():
            return proc.returncode, None
        plan = json.loads(out.read_bytes())
        if "samples_per_s" in plan.get("frozen", {}):
            return 0, plan["frozen"]["samples_per_s"]
        return 0, plan["predicted"]["samples_per_s"]


def comparable(a, todo):
    """(how many cases the old profiles lack, [(name, old binary's args, new's)])."""
    pairs = []
    for name, args in todo:
        before = old_args(args, a.old_profiles) if a.old_profiles else args
        if before is not None:
            pairs.append((name, before, args))
    return len(todo) - len(pairs), pairs


def compare_throughput(a, todo):
    """--throughput: exit codes and predicted samples/s of each case; 1 when any is slower."""
    counts = {"slower": 0, "faster": 0, "same": 0, "exit": 0}
    skipped, pairs = comparable(a, todo)
    for name, before, args in pairs:
        old = predicted(a.old, before)
        new = predicted(a.new, args + a.new_args.split())
        if old[0] != new[0]:
            counts["exit"] += 1
            print(f"{name}: exit {old[0]} -> {new[0]}", flush=True)
        elif old[1] is not None:
            ratio = new[1] / old[1]
            kind = "slower" if ratio < 1 - 1e-9 else "faster" if ratio > 1 + 1e-9 else "same"
            counts[kind] += 1
            if kind != "same":
                print(f"{name}: {kind}, {old[1]} -> {new[1]} samples/s ({ratio:.4f}x)", flush=True)
    print(f"{len(todo) - skipped} cases ({skipped} skipped: a profile not in the old "
          f"directory): {counts['same']} plan at the same samples/s, {counts['slower']} slower, "
          f"{counts['faster']} faster, {counts['exit']} with another exit code; "
          f"{len(todo) - skipped - sum(counts.values())} refused or not fitting with both")
    return 1 if counts["slower"] or counts["exit"] else 0


def old_args(args, old_profiles):
    """The case's arguments with its profile paths moved to old_profiles; None when a file
    is not there."""
    out = []
    for a in args:
        path = pathlib.Path(a)
        if path.is_absolute() and (ROOT / "profiles") in path.parents:
            path = pathlib.Path(old_profiles) / path.relative_to(ROOT / "profiles")
            if not path.exists():
                return None
            a = str(path)
        out.append(a)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--only", default="", help="cases whose name contains this")
    ap.add_argument("--old-profiles", help="the profiles directory the old binary plans on")
    ap.add_argument("--ignore-hashes", action="store_true",
                    help="compare plans without their sha256 keys")
    ap.add_argument("--ignore-key", action="append", default=[], metavar="KEY",
                    help="compare plans without every key of this name (repeatable)")
    ap.add_argument("--as-json", action="store_true",
                    help="compare plans as JSON documents, not their text's bytes")
    ap.add_argument("--throughput", action="store_true",
                    help="compare exit codes and predicted samples/s instead of bytes")
    ap.add_argument("--new-args", default="",
                    help="more plan arguments for the new binary (space-separated)")
    a = ap.parse_args()
    if a.new_args and not a.throughput:
        ap.error("--new-args only with --throughput (the plans' bytes would differ anyway)")
    models = sorted((ROOT / "profiles" / "models").glob("*.json"))
    clusters = sorted((ROOT / "profiles" / "clusters").glob("*.json"))
    todo = [c for c in determinism.cases(models, clusters) if a.only in c[0]]
    if a.throughput:
        return compare_throughput(a, todo)
    differ = 0
    skipped, pairs = comparable(a, todo)
    for name, before, args in pairs:
        old = outcome(a.old, before, a.ignore_hashes, a.old_profiles, a.ignore_key, a.as_json)
        new = outcome(a.new, args, a.ignore_hashes, ignore_keys=a.ignore_key, as_json=a.as_json)
        if old != new:
            differ += 1
            what = [w for w, x, y in zip(("exit code", "plan bytes", "stderr"), old, new) if x != y]
            print(f"{name}: {', '.join(what)} differ (exit {old[0]} -> {new[0]})", flush=True)
    compared = f"{len(todo) - skipped} cases" + (f" ({skipped} not in {a.old_profiles})"
                                                 if skipped else "")
    print(f"{compared}, {differ} differ between {a.old} and {a.new}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
