#!/usr/bin/env python3
"""Plans every shipped model on every shipped cluster with one pulse-plan binary, so two
binaries (before and after a refactor, or two runs of one) can be compared byte for byte.

  scripts/plan_corpus.py --binary build/pulse-plan --out /tmp/corpus-new
  scripts/plan_corpus.py --compare /tmp/corpus-old /tmp/corpus-new
  scripts/plan_corpus.py --compare /tmp/old-run1,/tmp/old-run2 /tmp/corpus-new

Each configuration is a model x cluster x strategy x {full, split backward} x {tuned, fixed}
case ("fixed" gives --pp 2 --microbatch-size 1, or --pp 4 on clusters of 8 devices or more);
the plan, the exit code and stderr (minus --stats timings) are stored per case. Models with
no times for a cluster's device type are skipped. --compare prints every case whose plan,
exit code or message differs, and a count; exit 1 if any differs. OLD may name several
runs of one binary, comma-separated: a case then counts as identical when NEW matches any of
them (a configuration whose plan differs between runs of the same binary is listed apart, as
nondeterministic).
"""

import argparse
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
STRATEGIES = ["pulse", "v-naive", "1f1b", "1f1b-direct", "gpipe"]


def device_types(path):
    with open(path) as f:
        doc = json.load(f)
    return set(doc.get("timing", {}).get("device_types", []))


def cases(models, clusters):
    for model in models:
        types = device_types(model)
        for cluster in clusters:
            with open(cluster) as f:
                c = json.load(f)
            if c["device"]["type"] not in types:
                continue
            devices = c["devices_per_node"] * c["nodes"]
            fixed_pp = 4 if devices >= 8 else min(2, devices)
            for strategy in STRATEGIES:
                for split in (False, True):
                    for fixed in (False, True):
                        name = ".".join([model.stem, cluster.stem, strategy,
                                         "split" if split else "full",
                                         "fixed" if fixed else "tuned"])
                        args = ["plan", "--model", str(model), "--cluster", str(cluster),
                                "--strategy", strategy, "--quiet"]
                        if split:
                            args.append("--split-backward")
                        if fixed:
                            args += ["--pp", str(fixed_pp), "--microbatch-size", "1"]
                        yield name, args


def run_case(binary, out, name, args):
    proc = subprocess.run([binary] + args, capture_output=True, cwd=ROOT)
    (out / (name + ".json")).write_bytes(proc.stdout)
    (out / (name + ".rc")).write_text(f"{proc.returncode}\n")
    (out / (name + ".err")).write_bytes(proc.stderr)
    return name, proc.returncode


def record(binary, out, jobs):
    out.mkdir(parents=True, exist_ok=True)
    models = sorted((ROOT / "profiles" / "models").glob("*.json"))
    clusters = sorted((ROOT / "profiles" / "clusters").glob("*.json"))
    todo = list(cases(models, clusters))
    codes = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, rc in pool.map(lambda c: run_case(binary, out, *c), todo):
            codes[rc] = codes.get(rc, 0) + 1
    print(f"{len(todo)} cases into {out}; exit codes: {dict(sorted(codes.items()))}")


def case_names(folder):
    return {p.name.rsplit(".", 1)[0] for p in folder.glob("*.rc")}


def outputs(folder, name):
    return tuple((folder / f"{name}.{ext}").read_bytes() if (folder / f"{name}.{ext}").exists()
                 else None for ext in ("rc", "json", "err"))


def compare(olds, new):
    names = sorted(set().union(*(case_names(o) for o in olds)) | case_names(new))
    differ, unstable = [], []
    for name in names:
        seen = {outputs(o, name) for o in olds}
        if len(seen) > 1:
            unstable.append(name)
        if outputs(new, name) not in seen:
            differ.append(name)
    for name in unstable:
        print("nondeterministic before:", name)
    for name in differ:
        print("differs:", name)
    print(f"{len(names) - len(differ)} of {len(names)} cases identical to a run of the old binary "
          f"(plan bytes, exit code, stderr); {len(unstable)} differed between old runs")
    return 1 if differ else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", help="pulse-plan to run")
    ap.add_argument("--out", type=pathlib.Path, help="folder for the corpus")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                    help="OLD: one corpus folder, or several comma-separated")
    args = ap.parse_args()
    if args.compare:
        olds = [pathlib.Path(p) for p in args.compare[0].split(",")]
        sys.exit(compare(olds, pathlib.Path(args.compare[1])))
    if not args.binary or not args.out:
        ap.error("--binary and --out are required (or --compare OLD NEW)")
    record(os.path.abspath(args.binary), args.out, args.jobs)


if __name__ == "__main__":
    main()
