#!/usr/bin/env python3
"""The layout's rules, checked on the source tree (ARCHITECTURE.md says why they exist):

  1. Includes follow the layers: a file in folder F includes public headers (`pulse/G/...`)
     only of folders G that F may build on (the tables below); a layer never reaches up.
  2. Private headers (those under src/ and solver/) are included only from their own folder
     (a quoted name without a slash) or from tests/ and bench/; no include climbs with "..".
  3. Every header has a source of the same name in its folder (public headers in
     include/pulse/F/ are implemented in src/F/ or solver/F/); a private X_internal.hpp,
     shared by the sources of module X, needs X.cpp. Headers of constants only are listed
     in CONSTANTS_ONLY.
  4. Only solver/milp/cbc_backend.cpp includes COIN-OR headers; only the graph pass includes
     Boost.Graph.

Prints every violation; exit 1 if there is any. --self-test runs the checks on a small tree
with one planted violation of each rule and fails unless each is found.
"""

import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The layers, lowest first, and the folders of each in pass order. A file may include the
# public headers of its own folder, of earlier folders of its layer, and of the layers its
# layer builds on (BUILDS_ON); the CMake targets mirror this, and the link checks enforce
# the calls the includes make possible.
LAYERS = {
    "core": ["base", "profile", "graph", "cost", "simulate", "plan"],
    "solver": ["milp", "partition", "place", "schedule"],
    "compile": ["compile"],
    "tools": ["tools"],
    "cli": ["cli"],
}
BUILDS_ON = {
    "core": set(),
    "solver": {"core"},
    "compile": {"core", "solver"},
    "tools": {"core"},                      # tools read plans: the planner is not needed
    "cli": {"core", "solver", "compile", "tools"},
}
# Folders of one layer that stay apart: the solver's engines share only milp.
APART = {"partition", "place", "schedule"}
LAYER_OF = {folder: layer for layer, folders in LAYERS.items() for folder in folders}


def may_include(mine, target):
    """Whether a file of folder `mine` may include a public header of folder `target`."""
    if target == mine:
        return True
    lm, lt = LAYER_OF[mine], LAYER_OF[target]
    if lt in BUILDS_ON[lm]:
        return True
    if lm != lt:
        return False
    if mine in APART and target in APART:
        return False
    order = LAYERS[lm]
    return order.index(target) < order.index(mine)


# Headers that declare named constants and nothing else: nothing to implement.
CONSTANTS_ONLY = {"include/pulse/base/defaults.hpp", "include/pulse/base/limits.hpp"}

INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.MULTILINE)


def folder_of(path, root):
    parts = path.relative_to(root).parts
    if parts[0] in ("src", "solver"):
        return parts[1] if len(parts) > 2 else None
    if parts[0] == "include":
        return parts[2] if len(parts) > 3 else None
    return None


def check(root):
    problems = []
    sources = [p for top in ("src", "solver", "include") for p in (root / top).rglob("*")
               if p.suffix in (".cpp", ".hpp")]
    extra = [p for top in ("tests", "bench") for p in (root / top).rglob("*")
             if p.suffix in (".cpp", ".hpp")]
    for path in sources + extra:
        rel = path.relative_to(root)
        text = path.read_text()
        mine = folder_of(path, root)
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
                if privileged or mine is None:
                    continue
                if target not in LAYER_OF:
                    problems.append(f'{rel}: includes "{name}", a folder no layer owns')
                elif not may_include(mine, target):
                    problems.append(f'{rel}: folder {mine} ({LAYER_OF[mine]}) includes "{name}" '
                                    f"of folder {target} ({LAYER_OF[target]}), which it does not "
                                    f"build on")
                continue
            if "/" in name and not privileged:
                problems.append(f'{rel}: includes "{name}", a private header of another folder')
            elif "/" not in name and not privileged and not (path.parent / name).exists():
                problems.append(f'{rel}: includes "{name}", not a header of its own folder')
    for path in sources:
        if path.suffix != ".hpp":
            continue
        rel = path.relative_to(root)
        if str(rel) in CONSTANTS_ONLY:
            continue
        if rel.parts[0] == "include":
            folder = rel.parts[2]
            candidates = [root / top / folder / (path.stem + ".cpp") for top in ("src", "solver")]
        elif path.stem.endswith("_internal"):
            candidates = [path.with_name(path.stem[: -len("_internal")] + ".cpp")]
        else:
            candidates = [path.with_suffix(".cpp")]
        if not any(c.exists() for c in candidates):
            problems.append(f"{rel}: no source of the same name ({path.stem}.cpp in its folder)")
    return problems, len(sources) + len(extra)


def self_test():
    planted = {
        "include/pulse/cost/a.hpp": "",                                   # no a.cpp
        "src/cost/b.cpp": '#include "pulse/place/placement.hpp"\n',        # core -> solver
        "solver/partition/c.cpp": '#include "pulse/schedule/x.hpp"\n',     # engines apart
        "src/tools/d.cpp": '#include "pulse/compile/compile.hpp"\n',       # tools -> driver
        "src/graph/e.cpp": '#include <coin/CbcModel.hpp>\n',               # COIN-OR elsewhere
        "src/graph/f.cpp": '#include "../cost/private.hpp"\n',             # climbs with ..
        "src/plan/g.cpp": '#include "simulate/engine_internal.hpp"\n',     # another's private
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for rel, text in planted.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        problems, _ = check(root)
    for p in problems:
        print("found:", p)
    missed = [rel for rel in planted if not any(p.startswith(rel + ":") for p in problems)]
    for rel in missed:
        print("MISSED the planted violation in", rel)
    return 1 if missed or len(problems) != len(planted) else 0


def main():
    if "--self-test" in sys.argv[1:]:
        return self_test()
    problems, files = check(ROOT)
    for p in problems:
        print(p)
    print(f"check_layers: {len(problems)} problem(s) in {files} files")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
