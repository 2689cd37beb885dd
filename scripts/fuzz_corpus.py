#!/usr/bin/env python3
"""Seed corpora for the libFuzzer targets (tests/fuzz), made from files the repository ships:

  scripts/fuzz_corpus.py --out build-fuzz/seeds

writes OUT/<target>/<sha1 of the bytes> (libFuzzer's own naming, so a seed is stored once)
for every target:

  model_profile_fuzz, plan_roundtrip_fuzz  profiles/models, the test model profiles
                                           (tests/cli/fixtures, tests/torch/data)
  cluster_profile_fuzz                     profiles/clusters, tests/cli/fixtures
  plan_reader_fuzz                         the golden cases' plans (tests/cli/fixtures/plans)

plus, for each, the JSON files the golden cases write inline (tests/cli/cases/*.case,
`file:` blocks: the bad profiles and hand-edited plans that reach the loaders' error paths),
sorted by their "schema" tag, and the reproducers kept in tests/fuzz/regressions/<target>/.
A file goes to a target by its schema tag, so a new profile or fixture becomes a seed
without a change here. Beside each folder, OUT/<target>.dict is a libFuzzer dictionary: JSON's
punctuation and literals, edge numbers, and every key and short string value of the target's
seeds (so mutations write "skips" and "V100-SXM2", not only bytes). Python standard library
only.
"""

import argparse
import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The targets each schema tag seeds.
TARGETS_OF_SCHEMA = {
    "pulse.model/v1": ["model_profile_fuzz", "plan_roundtrip_fuzz"],
    "pulse.cluster/v1": ["cluster_profile_fuzz"],
    "pulse.plan/v1": ["plan_reader_fuzz"],
    "pulse.plan/v2": ["plan_reader_fuzz"],
}
TARGETS = sorted({t for targets in TARGETS_OF_SCHEMA.values() for t in targets})

# Where the shipped JSON files are; every *.json below these is looked at.
SOURCES = ["profiles/models", "profiles/clusters", "tests/cli/fixtures", "tests/torch/data"]


def schema_of(text):
    """The schema tag of a JSON text, or None (malformed JSON, no tag)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value.get("schema") if isinstance(value, dict) else None


def case_files(path):
    """The `file:` blocks of a golden case (tests/cli/run_golden.py's format), as texts."""
    texts, current = [], None
    for line in path.read_text().splitlines():
        if current is not None and (line == "|" or line.startswith("| ")):
            current.append(line[2:])
            continue
        if current is not None:
            texts.append("\n".join(current) + "\n")
            current = None
        if line.startswith("file:"):
            current = []
    if current is not None:
        texts.append("\n".join(current) + "\n")
    return texts


def seeds():
    """(target, bytes) for every seed."""
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.json")):
            data = path.read_bytes()
            for target in TARGETS_OF_SCHEMA.get(schema_of(data), []):
                yield target, data
    for case in sorted((ROOT / "tests/cli/cases").glob("*.case")):
        for text in case_files(case):
            for target in TARGETS_OF_SCHEMA.get(schema_of(text), []):
                yield target, text.encode()
    for target in TARGETS:
        folder = ROOT / "tests/fuzz/regressions" / target
        if folder.is_dir():
            for path in sorted(p for p in folder.iterdir() if p.is_file() and p.suffix != ".md"):
                yield target, path.read_bytes()


# Tokens every dictionary gets: JSON's syntax, and numbers at the edges of what the loaders
# take (zero, negatives, fractions, beyond int64 and double).
BASE_TOKENS = ["{", "}", "[", "]", ":", ",", '"', "true", "false", "null", "0", "-1", "1",
               "0.5", "1e-9", "2147483648", "9223372036854775807", "18446744073709551616",
               "1e308", "1e999", "-0", "\\u0000"]


def words(value, out):
    """Adds every object key and short string value under `value` to `out`."""
    if isinstance(value, dict):
        for key, inner in value.items():
            out.add(f'"{key}"')
            words(inner, out)
    elif isinstance(value, list):
        for inner in value:
            words(inner, out)
    elif isinstance(value, str) and len(value) <= 32:
        out.add(f'"{value}"')


def dictionary(texts):
    """A libFuzzer dictionary (one quoted token a line) of BASE_TOKENS and the texts' words."""
    tokens = set(BASE_TOKENS)
    for text in texts:
        try:
            words(json.loads(text), tokens)
        except ValueError:
            pass
    escape = lambda t: t.replace("\\", "\\\\").replace('"', '\\"')
    return "".join(f'"{escape(t)}"\n' for t in sorted(tokens) if t.isascii() and t.isprintable())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=pathlib.Path, help="corpus root folder")
    args = parser.parse_args()
    counts = {target: 0 for target in TARGETS}
    for target in TARGETS:
        (args.out / target).mkdir(parents=True, exist_ok=True)
    texts = {target: [] for target in TARGETS}
    for target, data in seeds():
        texts[target].append(data)
        path = args.out / target / hashlib.sha1(data).hexdigest()
        if not path.exists():
            path.write_bytes(data)
            counts[target] += 1
    for target in TARGETS:
        (args.out / f"{target}.dict").write_text(dictionary(texts[target]))
        print(f"fuzz_corpus: {target}: {counts[target]} new seeds in {args.out / target}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
