#!/usr/bin/env python3
"""scripts/README.md lists every entry of scripts/, and nothing that is gone.

An entry is a file or folder at the top level of scripts/ (README.md itself, caches and
hidden files aside); the README names each in backquotes in the first column of a table row.
A new script without its line, or a line whose script was removed or renamed, fails with the
names. `--self-test` runs the comparison on a planted folder and README, one of each fault.

    tests/layers/check_scripts_readme.py [--self-test]
"""

import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|", re.M)


def entries(folder):
    """Names at the top of `folder`, folders with a trailing slash."""
    names = set()
    for p in folder.iterdir():
        if p.name.startswith(".") or p.name in ("README.md", "__pycache__"):
            continue
        names.add(p.name + "/" if p.is_dir() else p.name)
    return names


def problems(folder):
    listed = set(ROW.findall((folder / "README.md").read_text()))
    present = entries(folder)
    out = [f"scripts/{n}: not in scripts/README.md (add a line for it)"
           for n in sorted(present - listed)]
    out += [f"scripts/README.md lists `{n}`, which scripts/ does not have"
            for n in sorted(listed - present)]
    return out


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp)
        (d / "a.py").write_text("")
        (d / "new.py").write_text("")
        (d / "lib").mkdir()
        (d / "README.md").write_text("| `a.py` | x |\n| `lib/` | y |\n| `gone.sh` | z |\n")
        got = problems(d)
        want = ["scripts/new.py: not in scripts/README.md (add a line for it)",
                "scripts/README.md lists `gone.sh`, which scripts/ does not have"]
        if got != want:
            print(f"self-test: expected {want}, got {got}")
            return 1
    print("self-test: a missing line and a stale line are both found")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    found = problems(ROOT / "scripts")
    for line in found:
        print(line)
    if not found:
        print(f"scripts/README.md lists all {len(entries(ROOT / 'scripts'))} entries of scripts/")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
