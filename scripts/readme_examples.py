#!/usr/bin/env python3
"""The example outputs of README.md and docs/plans.md, regenerated from the binary so that
they cannot go stale, and the README's CI snippet, run.

An example is a fenced block between two markers in one of DOCS:

    <!-- example: NAME -->
    ```
    ...what the command prints...
    ```
    <!-- /example -->

NAME is one of that document's examples (DOCS below): the commands it runs (in a scratch
directory where `profiles` is the repository's), which stream it shows, the exit code the
command must give and how many of its first lines (all when None). `--write` rewrites the blocks;
`--check` (the test) exits 1 and shows the difference when any block is not byte-identical
to what the binary prints now.

The CI snippet is the ```sh block between <!-- ci-snippet --> and <!-- /ci-snippet -->.
`--check` runs it with bash, `pulse-plan` on PATH, twice: with main.json the branch's own
plan (it must exit 0 and write diff.md) and with main.json a plan 20% faster (it must exit 4,
the gate, and still write diff.md).

  scripts/readme_examples.py --binary build/pulse-plan --check
  scripts/readme_examples.py --binary build/pulse-plan --write
"""
import argparse
import difflib
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SD2 = ["--model", "profiles/models/sd2-unet-512.json"]
V100 = ["--cluster", "profiles/clusters/dgx1-v100-32gb-1n.json"]
A910 = ["--cluster", "profiles/clusters/atlas800-910a-1n.json"]

TWO_CLUSTERS = [["plan", *SD2, *V100, "-q", "-o", "sd2-v100.json"],
                ["plan", *SD2, *A910, "-q", "-o", "sd2-910a.json"]]

# name -> (setup commands, the command shown, the stream it shows, its exit code, lines shown)
EXAMPLES = {
    "plan-summary": ([], ["plan", *SD2, *V100, "-o", "sd2.json"], "stderr", 0, None),
    "simulate": ([["plan", *SD2, *V100, "-q", "-o", "sd2.json"]], ["simulate", "sd2.json"],
                 "stdout", 0, None),
    "diff": (TWO_CLUSTERS, ["diff", "sd2-v100.json", "sd2-910a.json"], "stdout", 0, None),
}
# docs/plans.md's: the diff headline, a gate in the Markdown report, validate's verdict.
PLANS_EXAMPLES = {
    "diff-headline": (TWO_CLUSTERS, ["diff", "sd2-v100.json", "sd2-910a.json"], "stdout", 0, 1),
    "diff-gate": ([["plan", *SD2, *V100, "-q", "-o", "main.json", "--compute-scale", "0.8"],
                   ["plan", *SD2, *V100, "-q", "-o", "branch.json"]],
                  ["diff", "main.json", "branch.json", "--format", "markdown",
                   "--fail-if-slower", "6", "--fail-if-more-traffic", "10"], "stdout", 4, 5),
    "validate": ([["plan", *SD2, *V100, "-q", "-o", "sd2.json"]],
                 ["validate", "sd2.json", *SD2, *V100], "stdout", 0, None),
}
DOCS = {"README.md": EXAMPLES, "docs/plans.md": PLANS_EXAMPLES}

BLOCK = re.compile(r"(<!-- example: (?P<name>[a-z0-9-]+) -->\n```\n)(?P<body>.*?)(```\n<!-- /example -->)",
                   re.S)
SNIPPET = re.compile(r"<!-- ci-snippet -->\n```sh\n(?P<body>.*?)```\n<!-- /ci-snippet -->", re.S)


def scratch():
    d = Path(tempfile.mkdtemp(prefix="pulse-readme-"))
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    (d / "profiles").symlink_to(ROOT / "profiles")
    return d


def run(binary, args, cwd):
    return subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, check=False)


# A setup command the examples share (most plan SD2 on the V100 node) runs once: each run
# leaves its files in a directory of its own, copied into every example that asks for it.
# Same inputs give the same bytes (a tested property), so this changes no output.
_SETUP_RUNS = {}


def set_up(binary, args, d, name):
    key = tuple(args)
    if key not in _SETUP_RUNS:
        ran = scratch()
        r = run(binary, args, ran)
        if r.returncode != 0:
            sys.exit(f"readme_examples: {name}: {' '.join(args)} failed:\n{r.stderr}")
        _SETUP_RUNS[key] = ran
    for f in _SETUP_RUNS[key].iterdir():
        if f.is_file() and not f.is_symlink():
            shutil.copyfile(f, d / f.name)


def output_of(binary, examples, name):
    setup, shown, stream, want, lines = examples[name]
    d = scratch()
    for args in setup:
        set_up(binary, args, d, name)
    r = run(binary, shown, d)
    if r.returncode != want:
        sys.exit(f"readme_examples: {name}: {' '.join(shown)} exited {r.returncode}, expected "
                 f"{want}:\n{r.stderr}")
    out = getattr(r, stream)
    return out if lines is None else "".join(out.splitlines(True)[:lines])


def regenerate(doc, text, binary):
    examples = DOCS[doc]
    names = [m.group("name") for m in BLOCK.finditer(text)]
    unknown = [n for n in names if n not in examples]
    if unknown:
        sys.exit(f"readme_examples: {doc} names unknown examples {unknown}")
    missing = [n for n in examples if n not in names]
    if missing:
        sys.exit(f"readme_examples: {doc} has no block for {missing}")
    outputs = {n: output_of(binary, examples, n) for n in examples}
    return BLOCK.sub(lambda m: m.group(1) + outputs[m.group("name")] + m.group(4), text)


CLUSTERS = re.compile(r"<!-- clusters -->\n(?P<body>.*?)<!-- /clusters -->", re.S)


def expand(pattern):
    """`dgx-h100-{1,2}n` -> dgx-h100-1n, dgx-h100-2n (each brace group in turn)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for choice in m.group(1).split(",")
            for x in expand(pattern[:m.start()] + choice + pattern[m.end():])]


def check_clusters(text):
    """The README's cluster table names every file of profiles/clusters, and no other."""
    m = CLUSTERS.search(text)
    if not m:
        return ["README.md has no <!-- clusters --> table"]
    listed = set()
    for line in m.group("body").splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            listed.update(n for p in re.findall(r"`([^`]+)`", first) for n in expand(p))
    shipped = {p.stem for p in (ROOT / "profiles" / "clusters").glob("*.json")}
    problems = []
    if shipped - listed:
        problems.append(f"README.md's cluster table lacks {sorted(shipped - listed)}")
    if listed - shipped:
        problems.append(f"README.md's cluster table lists {sorted(listed - shipped)}, which "
                        "profiles/clusters does not have")
    return problems


def check_snippet(text, binary):
    """Runs the CI snippet on a branch that changed nothing, then on one 20% slower."""
    m = SNIPPET.search(text)
    if not m:
        return ["README.md has no <!-- ci-snippet --> block"]
    problems = []
    bindir = scratch()
    (bindir / "pulse-plan").symlink_to(Path(binary).resolve())
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    for label, extra, want in (("unchanged", [], 0), ("main 20% faster", ["--compute-scale", "0.8"], 4)):
        d = scratch()
        r = run(binary, ["plan", *SD2, *V100, "-q", "-o", "main.json", *extra], d)
        if r.returncode != 0:
            return [f"planning main.json failed: {r.stderr}"]
        proc = subprocess.run(["bash", "-c", m.group("body")], cwd=d, env=env,
                              capture_output=True, text=True, check=False)
        if proc.returncode != want:
            problems.append(f"CI snippet, {label}: exit {proc.returncode}, expected {want}\n"
                            f"{proc.stderr}")
        if not (d / "diff.md").is_file() or not (d / "diff.md").read_text().startswith("**"):
            problems.append(f"CI snippet, {label}: no Markdown report in diff.md")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "pulse-plan"))
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    args = ap.parse_args()
    args.binary = str(Path(args.binary).resolve())
    problems = []
    for doc in DOCS:
        path = ROOT / doc
        text = path.read_text()
        fresh = regenerate(doc, text, args.binary)
        if args.write:
            path.write_text(fresh)
            continue
        if fresh != text:
            problems.append(f"{doc}'s examples differ from what the binary prints "
                            "(scripts/readme_examples.py --write updates them):\n" +
                            "".join(difflib.unified_diff(text.splitlines(True),
                                                         fresh.splitlines(True), doc,
                                                         "the binary's output")))
        if doc == "README.md":
            problems += check_snippet(text, args.binary) + check_clusters(text)
    if args.write:
        return 0
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
