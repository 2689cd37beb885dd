#!/usr/bin/env python3
"""The layout's rules, checked on the source tree (ARCHITECTURE.md says why they exist):

  1. Includes follow the pass order: a file in folder F includes public headers
     (`pulse/G/...`) only of folders G at or below F (the table below); a layer never
     reaches up.
  2. Private headers (those under src/ and solver/) are included only from their own folder
     (a quoted name without a slash) or from tests/ and bench/; no include climbs with "..".
  3. Every header has a source of the same name in its folder (public headers in
     include/pulse/F/ are implemented in src/F/ or solver/F/); a private X_internal.hpp,
     shared by the sources of module X, needs X.cpp. Headers of constants only are listed
     in CONSTANTS_ONLY.
  4. Only solver/milp/cbc_backend.cpp includes COIN-OR headers; only the graph pass includes
     Boost.Graph.

Prints every violation; exit 1 if there is any.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Folder -> rank. A folder may include the public headers of folders of lower or equal rank;
# folders of equal rank other than itself only where ALSO allows it.
RANK = {
    "base": 0, "profile": 1, "graph": 2, "cost": 3, "simulate": 4, "plan": 5,   # core
    "milp": 6, "partition": 7, "place": 7, "schedule": 7,                      # solver
    "compile": 8,                                                              # driver
    "tools": 9,                                                                # tools
    "cli": 10,                                                                 # binary
}
# Siblings of one rank that may not see each other: the solver engines are independent.
SIBLINGS_APART = {"partition", "place", "schedule"}

# Headers that declare named constants and nothing else: nothing to implement.
CONSTANTS_ONLY = {"include/pulse/base/defaults.hpp"}

INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.MULTILINE)


def folder_of(path):
    parts = path.relative_to(ROOT).parts
    if parts[0] in ("src", "solver"):
        return parts[1] if len(parts) > 2 else None
    if parts[0] == "include":
        return parts[2] if len(parts) > 3 else None
    return None


def main():
    problems = []
    sources = [p for top in ("src", "solver", "include") for p in (ROOT / top).rglob("*")
               if p.suffix in (".cpp", ".hpp")]
    extra = [p for top in ("tests", "bench") for p in (ROOT / top).rglob("*")
             if p.suffix in (".cpp", ".hpp")]
    for path in sources + extra:
        rel = path.relative_to(ROOT)
        text = path.read_text()
        mine = folder_of(path)
        privileged = rel.parts[0] in ("tests", "bench")
        for bracket, name in INCLUDE.findall(text):
            if bracket == "<":
                if name.startswith("coin/") and str(rel) != "solver/milp/cbc_backend.cpp":
                    problems.append(f"{rel}: includes COIN-OR <{name}> (only cbc_backend.cpp may)")
                if name.startswith("boost/graph/") and str(rel) != "src/graph/layer_graph.cpp":
                    problems.append(f"{rel}: includes Boost.Graph <{name}> (only the graph pass may)")
                continue
            if ".." in name.split("/"):
                problems.append(f'{rel}: includes "{name}" through ".."')
                continue
            if name.startswith("pulse/"):
                target = name.split("/")[1]
                if target not in RANK or privileged or mine is None:
                    continue
                if RANK[target] > RANK[mine] or (
                        target != mine and RANK[target] == RANK[mine] and
                        (target in SIBLINGS_APART or mine in SIBLINGS_APART)):
                    problems.append(f'{rel}: folder {mine} includes "{name}" of folder {target}, '
                                    f"which is not below it")
                continue
            if "/" in name and not privileged:
                problems.append(f'{rel}: includes "{name}", a private header of another folder')
            elif "/" not in name and not privileged and not (path.parent / name).exists():
                problems.append(f'{rel}: includes "{name}", not a header of its own folder')
    for path in sources:
        if path.suffix != ".hpp":
            continue
        rel = path.relative_to(ROOT)
        if str(rel) in CONSTANTS_ONLY:
            continue
        if rel.parts[0] == "include":
            folder = rel.parts[2]
            candidates = [ROOT / top / folder / (path.stem + ".cpp") for top in ("src", "solver")]
        elif path.stem.endswith("_internal"):
            candidates = [path.with_name(path.stem[: -len("_internal")] + ".cpp")]
        else:
            candidates = [path.with_suffix(".cpp")]
        if not any(c.exists() for c in candidates):
            problems.append(f"{rel}: no source of the same name ({path.stem}.cpp in its folder)")
    for p in problems:
        print(p)
    print(f"check_layers: {len(problems)} problem(s) in {len(sources) + len(extra)} files")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
