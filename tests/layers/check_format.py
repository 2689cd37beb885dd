#!/usr/bin/env python3
"""Every C++ file of the repository formatted as the checked-in .clang-format says.

Runs `clang-format --dry-run -Werror` over every tracked C++ file (`git ls-files`; without
git, or outside a git checkout, every C++ file under the source folders) and fails, listing
the files, on any difference. `clang-format -i FILE` fixes one. The formatter is
$CLANG_FORMAT, else `clang-format` on PATH (Debian's package; scripts/setup.sh --test
installs it); without one the check fails and says so, rather than pass unchecked.

    tests/layers/check_format.py [--clang-format PATH]
"""

import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUFFIXES = (".cpp", ".hpp", ".cc", ".h")
FOLDERS = ("src", "include", "solver", "tests", "bench")  # the glob's, without git


def cpp_files(root):
    """Tracked C++ files, relative to `root`, sorted."""
    git = shutil.which("git")
    if git and (root / ".git").exists():
        listed = subprocess.run([git, "-C", str(root), "ls-files", "-z"], capture_output=True)
        if listed.returncode == 0:
            names = [n for n in listed.stdout.decode().split("\0") if n.endswith(SUFFIXES)]
            return sorted(names)
    return sorted(str(p.relative_to(root)) for folder in FOLDERS
                  for p in (root / folder).rglob("*") if p.suffix in SUFFIXES)


def main():
    args = sys.argv[1:]
    formatter = os.environ.get("CLANG_FORMAT") or shutil.which("clang-format")
    if "--clang-format" in args:
        formatter = args[args.index("--clang-format") + 1]
    if not formatter:
        print("check_format: clang-format not found (apt-get install clang-format, or "
              "scripts/setup.sh --test; CLANG_FORMAT=PATH names another)")
        return 1
    files = cpp_files(ROOT)
    version = subprocess.run([formatter, "--version"], capture_output=True, text=True)
    unformatted = []
    for start in range(0, len(files), 50):
        batch = files[start:start + 50]
        run = subprocess.run([formatter, "--dry-run", "-Werror", *batch], cwd=ROOT,
                             capture_output=True, text=True)
        if run.returncode != 0:
            unformatted += [f for f in batch if f + ":" in run.stderr]
            if not unformatted:  # clang-format itself failed: show why
                print(run.stderr)
                return 1
    for f in unformatted:
        print(f"{f}: not formatted as .clang-format says (clang-format -i {f})")
    print(f"check_format: {len(unformatted)} of {len(files)} C++ files differ "
          f"({version.stdout.strip()})")
    return 1 if unformatted else 0


if __name__ == "__main__":
    sys.exit(main())
