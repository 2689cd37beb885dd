#!/usr/bin/env python3
"""The instructions one plan executes, by part, counted by valgrind's callgrind. Each part's
count repeats exactly from run to run, but for the writing of the plan and the whole job,
which move by a few thousand with the length of the temporary folder's name (the plan names
its inputs); CPU seconds on the shared machines move a row by 10-20% or more. So a change
of a few percent in the list scheduler or a partitioner can be measured here, where
scripts/limits_bench.py cannot see it. Prints a Markdown table.

  scripts/instruction_counts.py [--binary build/pulse-plan] [--against OLD] [--case NAME]
                                [-- PLAN ARGUMENTS...]

Each binary plans the case once under callgrind, which runs about 40 times slower than
natively: the default case takes about 1.5-2 minutes a binary. The counts are inclusive, for
each part's entry point: the list schedules, the replays (simulate), the V and chain
partitioners, the schedule lower bound, and the writing of the plan, then the whole job.
With --against OLD there is a column for each binary and their ratio, and the two plans
must be the same bytes. A part whose entry point the build inlined away (another
compiler, other flags) prints "-", with a warning.

Cases (--case): pp32-1024 (default), 1024 layers with 512 nested skips at --pp 32 --dp 1
--microbatch-size 1 on 8 x 8 V100s (inputs from limits_bench.py's unet() and cluster()).
Arguments after `--` are the case instead: plan's own arguments, without -o.

Counts depend on the compiler and its flags as well as on the code: compare two builds made
the same way. Needs valgrind (Debian package `valgrind`).
"""

import argparse
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import limits_bench  # noqa: E402  (its synthetic models and clusters)

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Part -> the start of its entry point's name as callgrind_annotate prints it.
PARTS = [
    ("list schedules", "pulse::list_schedule(pulse::PipelineModel const&, int, std::vector"),
    ("replays (simulate)", "pulse::simulate(pulse::PipelineModel const&, pulse::Schedule const&"),
    ("V partitions", "pulse::partition_v(pulse::PartitionRequest const&, pulse::SkipPolicy)"),
    ("chain partitions", "pulse::partition_sequential(pulse::PartitionRequest const&)"),
    ("lower bounds", "pulse::detail::schedule_lower_bound(pulse::detail::OpGraph const&, int, "
                     "pulse::detail::MemoryRelaxation const&)"),
    ("writing the plan", "pulse::(anonymous namespace)::write(pulse::PlanJob const&"),
]


def case_arguments(name, folder):
    if name != "pp32-1024":
        sys.exit(f"instruction_counts.py: no case {name!r}; the cases: pp32-1024")
    model = folder / "unet-1024-512.json"
    model.write_text(json.dumps(limits_bench.unet(1024, "unet-1024-512", 512)))
    cluster = folder / "8x8-v100.json"
    cluster.write_text(json.dumps(limits_bench.cluster(8, 8)))
    return ["--model", str(model), "--cluster", str(cluster), "--pp", "32", "--dp", "1",
            "--microbatch-size", "1"]


def inclusive_counts(out_file):
    """{function name: inclusive instructions}, and the whole program's."""
    run = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                          "--show-percs=yes", "--auto=no", str(out_file)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"instruction_counts.py: callgrind_annotate failed:\n{run.stderr[-2000:]}")
    text = run.stdout
    counts, total = {}, None
    for line in text.splitlines():
        m = re.match(r"^\s*([\d,]+) \([^)]*\)\s+(\S.*)$", line)
        if not m:
            continue
        value, rest = int(m.group(1).replace(",", "")), m.group(2)
        if rest.startswith("PROGRAM TOTALS"):
            total = value
            continue
        name = rest.split(":", 1)[1]  # after the source file, "???" without debug info
        counts.setdefault(name, value)
    if total is None:
        sys.exit(f"instruction_counts.py: no PROGRAM TOTALS in {out_file}'s annotation")
    return counts, total


def measure(binary, arguments, folder, tag):
    out_file = folder / f"callgrind-{tag}.out"
    plan = folder / f"plan-{tag}.json"
    run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
                          str(binary), "plan", "-q", *arguments, "-o", str(plan)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"instruction_counts.py: {binary} exited {run.returncode}:\n{run.stderr[-2000:]}")
    counts, total = inclusive_counts(out_file)
    row = {}
    for label, prefix in PARTS:
        row[label] = next((v for k, v in counts.items() if k.startswith(prefix)), None)
        if row[label] is None:
            print(f"instruction_counts.py: warning: {binary} has no {prefix}... (inlined "
                  f"away?): {label} not counted", file=sys.stderr)
    row["whole job"] = total
    return row, plan.read_bytes()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / "build" / "pulse-plan"))
    parser.add_argument("--against", help="a second binary: a column each, and their ratio")
    parser.add_argument("--case", help="a named case (default pp32-1024); not with --")
    parser.add_argument("plan_arguments", nargs="*", help="after --: plan's arguments")
    args = parser.parse_args()
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        sys.exit("instruction_counts.py: needs valgrind (apt-get install valgrind)")
    if args.case and args.plan_arguments:
        sys.exit("instruction_counts.py: --case or plan arguments after --, not both")
    case = args.case or ("" if args.plan_arguments else "pp32-1024")
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        arguments = args.plan_arguments or case_arguments(case, folder)
        binaries = [args.against, args.binary] if args.against else [args.binary]
        rows, plans = [], []
        for k, binary in enumerate(binaries):
            row, plan = measure(binary, arguments, folder, k)
            rows.append(row)
            plans.append(plan)
    print(f"case {case}\n" if case else f"plan {' '.join(arguments)}\n")
    header = " | ".join(binaries)
    print(f"| part | {header} |" + (" ratio |" if len(rows) == 2 else ""))
    print("|---|" + "---:|" * (len(rows) + (1 if len(rows) == 2 else 0)))
    for label in rows[0]:
        cells = []
        for row in rows:
            cells.append("-" if row[label] is None else f"{row[label]:,}")
        ratio = ""
        if len(rows) == 2:
            a, b = rows[0][label], rows[1][label]
            ratio = f" {b / a:.3f} |" if a and b is not None else " - |"
        print(f"| {label} | " + " | ".join(cells) + " |" + ratio)
    if len(plans) == 2:
        same = plans[0] == plans[1]
        print(f"\nplans: {'the same bytes' if same else 'DIFFERENT'}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
