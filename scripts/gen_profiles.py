#!/usr/bin/python3
"""Regenerate pulse-plan's analytic model and cluster profiles.

  /usr/bin/python3 scripts/gen_profiles.py            write profiles/models, profiles/clusters
  /usr/bin/python3 scripts/gen_profiles.py --check    compare instead; exit 1 on any difference
  /usr/bin/python3 scripts/gen_profiles.py --out DIR  write (or --check) DIR/models, DIR/clusters
  /usr/bin/python3 scripts/gen_profiles.py --summary  print the docs/profiles.md tables

Standard library only. Output is deterministic: fixed key order, json.dumps(indent=2)
plus a newline, floats rounded to 6 significant digits, no timestamps. Files this script
does not generate (e.g. profiles/models/tiny-unet.json) are left alone.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Dict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profilegen.catalog import model_profile, model_specs  # noqa: E402
from profilegen.clusters import cluster_profiles  # noqa: E402
from profilegen.summary import summary  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent


def render(profile: Dict) -> str:
    return json.dumps(profile, indent=2) + "\n"


def generate() -> Dict[str, str]:
    """Relative path -> file text, for every profile this script owns."""
    files = {}
    for spec in model_specs():
        files[f"models/{spec.folder}{spec.name}.json"] = render(model_profile(spec))
    for cluster in cluster_profiles():
        files[f"clusters/{cluster['name']}.json"] = render(cluster)
    return dict(sorted(files.items()))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(path: Path, text: str) -> None:
    """Temp file in the same directory, then rename: readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give a normal file mode
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def check(out: Path, files: Dict[str, str]) -> int:
    stale = []
    for rel, text in files.items():
        path = out / rel
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = None
        if current != text:
            stale.append((path, "missing" if current is None else "differs"))
    for path, why in stale:
        print(f"{path}: {why} from the generator's output", file=sys.stderr)
    if stale:
        print(f"{len(stale)} of {len(files)} profiles out of date; run "
              "/usr/bin/python3 scripts/gen_profiles.py", file=sys.stderr)
        return 1
    print(f"{len(files)} profiles up to date", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare the generated profiles with the files; exit 1 if any differ")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "profiles",
                        help="directory holding models/ and clusters/ (default: profiles/)")
    parser.add_argument("--summary", action="store_true",
                        help="print the markdown tables of docs/profiles.md and exit")
    args = parser.parse_args(argv)
    if args.summary:
        models = [model_profile(spec) for spec in model_specs()]
        sys.stdout.write(summary(models, cluster_profiles()))
        return 0
    files = generate()
    if args.check:
        return check(args.out, files)
    for rel, text in files.items():
        write_atomically(args.out / rel, text)
    print(f"wrote {len(files)} profiles under {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
