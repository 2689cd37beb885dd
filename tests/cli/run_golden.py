#!/usr/bin/env python3
"""Golden tests for the pulse-plan command line: how a new user meets it.

Usage (from the repository root):

    /usr/bin/python3 tests/cli/run_golden.py --binary build/pulse-plan --cases tests/cli/cases
    ... [--filter SUBSTRING] [--verbose]

Each case is one file, tests/cli/cases/NAME.case. Every case runs in a fresh, empty
temporary directory (the working directory of the command), so relative paths in the
command refer to files the case itself creates. Python standard library only.

Case format
-----------
Line-oriented. `# ...` lines are comments. A directive is `key: value`. Directives that
take a block of text are followed by lines starting with `|`; the text is what follows
"| " (or nothing, for a bare "|"). Lines are joined with newlines and a final newline is
added, so a block holding one line `| hello` means the text "hello\\n". A block-taking
directive with no `|` lines means the empty text.

  args: WORDS             The command line after the binary, split like a POSIX shell
                          (shlex). Required.
  exit: N                 Expected exit code (default 0). A death by signal counts as
                          128 + signal number, as in a shell.
  stdout: / stderr:       Block: the exact expected text.
  stdout-contains: TEXT   The stream must contain TEXT (may repeat; also stderr-contains).
  stdout-regex: RE        re.search(RE, stream, re.MULTILINE) must match (also stderr-).
  file: NAME              Block: create NAME (relative to the temp dir) before the run.
  expect-file: NAME       Block: after the run NAME must hold exactly this text.
  present: NAME           After the run NAME must exist.
  absent: NAME            After the run NAME must not exist.
  json-has: SOURCE KEY..  SOURCE (`stdout` or a file NAME) must parse as a JSON object
                          with all these top-level KEYs.
  json: SOURCE PATH = V   The JSON value at dotted PATH (a.b.0.c; numbers index arrays)
                          in SOURCE must equal the JSON value V.
  repeat: N               Run the command N times, each in its own fresh temp dir; the
                          exit code, stdout and every `present:` file must be
                          byte-identical across runs (determinism). All other checks
                          apply to the first run.
  link: NAME TARGET       Create the symbolic link NAME -> TARGET before the run (may repeat).
  is-link: NAME TARGET    After the run NAME must still be a symbolic link to TARGET.
  stdout-to: WHERE        Give the command this stdout instead of a pipe: a path such as
                          /dev/full (opened for writing), or `closed` (descriptor 1 closed).
                          The stdout checks then see nothing.
  xfail: REASON           A known product bug: the case is expected to fail. It is
                          reported but does not fail the run; if it PASSES, the run fails
                          so that the marker gets removed.

Always checked, without a directive: after the run the temp dir holds no file the case
did not create (`file:`) or declare (`present:`), so a failed run that leaves a partial
or temporary output file behind is caught.

Placeholders in `args:`, expected text and `json:` values: {root} is the repository root
(absolute), {tmp} the case's temp directory, {byte:NN} the byte with hex value NN, so that a
case can name a file that is not valid UTF-8 ({byte:ff}; also in the names of `file:`,
`expect-file:`, `present:` and `absent:`). The program's output is read as UTF-8 with
U+FFFD for such bytes, which is how expected text spells them.
"""

import argparse
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

RUN_TIMEOUT_S = 120
BLOCK_KEYS = {"stdout", "stderr", "file", "expect-file"}
REPEATABLE = {
    "stdout-contains", "stderr-contains", "stdout-regex", "stderr-regex", "file",
    "expect-file", "present", "absent", "json-has", "json", "link", "is-link",
}
KNOWN = BLOCK_KEYS | REPEATABLE | {"args", "exit", "repeat", "xfail", "stdout-to"}


class CaseError(Exception):
    """A case file that cannot be understood."""


@dataclass
class Case:
    name: str
    path: Path
    args: str = ""
    exit: int = 0
    stdout: str | None = None
    stderr: str | None = None
    repeat: int = 1
    xfail: str | None = None
    # Repeatable directives: list of (argument, block text or None).
    items: dict = field(default_factory=dict)

    def all(self, key):
        return self.items.get(key, [])


def parse_case(path: Path) -> Case:
    case = Case(name=path.stem, path=path)
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    seen = set()
    while i < len(lines):
        line = lines[i]
        lineno = i + 1
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith("|"):
            raise CaseError(f"{path}:{lineno}: a '|' line outside a block directive")
        key, sep, value = line.partition(":")
        key = key.strip()
        value = value.strip()
        if not sep or key not in KNOWN:
            raise CaseError(f"{path}:{lineno}: expected 'key: value' with key one of "
                            f"{', '.join(sorted(KNOWN))}; got {line!r}")
        if key not in REPEATABLE and key in seen:
            raise CaseError(f"{path}:{lineno}: '{key}:' given twice")
        seen.add(key)
        block = None
        if key in BLOCK_KEYS:
            block_lines = []
            while i < len(lines) and lines[i].startswith("|"):
                text = lines[i]
                if text != "|" and not text.startswith("| "):
                    raise CaseError(f"{path}:{i + 1}: block lines start with '| ' or are a bare '|'")
                block_lines.append(text[2:])
                i += 1
            block = "".join(l + "\n" for l in block_lines)
        try:
            if key == "args":
                case.args = value
            elif key == "exit":
                case.exit = int(value)
            elif key == "repeat":
                case.repeat = int(value)
                if case.repeat < 1:
                    raise ValueError
            elif key == "xfail":
                case.xfail = value or "known bug"
            elif key in ("stdout", "stderr"):
                if value:
                    raise CaseError(f"{path}:{lineno}: '{key}:' takes a '|' block, not a value "
                                    f"(use {key}-contains: for a substring)")
                setattr(case, key, block)
            else:
                if key in ("file", "expect-file", "present", "absent") and not value:
                    raise CaseError(f"{path}:{lineno}: '{key}:' needs a file name")
                case.items.setdefault(key, []).append((value, block))
        except ValueError:
            raise CaseError(f"{path}:{lineno}: '{key}:' needs a whole number, got {value!r}")
    if "args" not in seen:
        raise CaseError(f"{path}: missing 'args:'")
    return case


def substitute(text: str, root: Path, tmp: Path) -> str:
    return raw_bytes(text.replace("{root}", str(root)).replace("{tmp}", str(tmp)))


def raw_bytes(text: str) -> str:
    """{byte:NN} as the byte NN: a surrogate escape above 0x7f, which os.fsencode (argv,
    file names) turns back into that byte."""
    def byte(m):
        value = int(m.group(1), 16)
        return chr(0xDC00 + value) if value >= 0x80 else chr(value)
    return re.sub(r"\{byte:([0-9a-fA-F]{2})\}", byte, text)


def diff(expected: str, actual: str, label: str, old="expected", new="actual") -> str:
    lines = difflib.unified_diff(
        expected.splitlines(keepends=True), actual.splitlines(keepends=True),
        fromfile=f"{old} {label}", tofile=f"{new} {label}")
    out = "".join(l if l.endswith("\n") else l + "\n\\ No newline at end of file\n"
                  for l in lines)
    return out or f"({old} and {new} {label} differ only in ways difflib does not show)\n"


def indent(text: str, prefix: str = "    ") -> str:
    return "".join(prefix + l for l in text.splitlines(keepends=True)) or prefix + "(empty)\n"


@dataclass
class Run:
    exit: int
    stdout: str
    stderr: str
    tmp: Path


def run_once(case: Case, binary: Path, root: Path, keep: list) -> Run:
    tmp = Path(tempfile.mkdtemp(prefix=f"pulse-golden-{case.name}-"))
    keep.append(tmp)
    for name, text in case.all("file"):
        target = tmp / raw_bytes(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for spec, _ in case.all("link"):
        name, target = spec.split()
        (tmp / raw_bytes(name)).symlink_to(substitute(raw_bytes(target), root, tmp))
    argv = [str(binary)] + shlex.split(substitute(case.args, root, tmp))
    where = case.all("stdout-to")
    if where:
        proc = run_with_stdout(argv, tmp, where[0][0])
    else:
        proc = subprocess.run(argv, cwd=tmp, capture_output=True, timeout=RUN_TIMEOUT_S)
    code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    return Run(code, proc.stdout.decode("utf-8", "replace"),
               proc.stderr.decode("utf-8", "replace"), tmp)


def run_with_stdout(argv, tmp: Path, where: str):
    """Runs with stdout on a device or file (`where`), or closed; stdout reads as empty."""
    if where == "closed":
        proc = subprocess.run(argv, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=RUN_TIMEOUT_S, preexec_fn=lambda: os.close(1))
    else:
        with open(where, "wb") as out:
            proc = subprocess.run(argv, cwd=tmp, stdout=out, stderr=subprocess.PIPE,
                                  timeout=RUN_TIMEOUT_S)
    proc.stdout = b""
    return proc


def json_at(value, dotted: str):
    for part in dotted.split(".") if dotted else []:
        if isinstance(value, list):
            value = value[int(part)]
        elif isinstance(value, dict):
            value = value[part]
        else:
            raise KeyError(part)
    return value


def load_json_source(source: str, run: Run):
    if source == "stdout":
        return json.loads(run.stdout)
    return json.loads((run.tmp / source).read_text(encoding="utf-8"))


def files_in(tmp: Path) -> set:
    return {str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file()}


def check(case: Case, run: Run, root: Path) -> list:
    """All failed expectations of one run, as printable strings."""
    failures = []
    sub = lambda s: substitute(s, root, run.tmp)
    if run.exit != case.exit:
        failures.append(f"exit code: expected {case.exit}, got {run.exit}\n"
                        f"  stderr was:\n{indent(run.stderr)}")
    for stream in ("stdout", "stderr"):
        actual = getattr(run, stream)
        expected = getattr(case, stream)
        if expected is not None and sub(expected) != actual:
            failures.append(f"{stream} differs:\n{indent(diff(sub(expected), actual, stream))}")
        for text, _ in case.all(f"{stream}-contains"):
            if sub(text) not in actual:
                failures.append(f"{stream} does not contain {sub(text)!r}; it was:\n"
                                f"{indent(actual)}")
        for pattern, _ in case.all(f"{stream}-regex"):
            if not re.search(sub(pattern), actual, re.MULTILINE):
                failures.append(f"{stream} does not match /{sub(pattern)}/; it was:\n"
                                f"{indent(actual)}")
    for name, text in case.all("expect-file"):
        target = run.tmp / raw_bytes(name)
        if not target.is_file():
            failures.append(f"file {name} should exist (expect-file) but does not")
        elif target.read_text(encoding="utf-8", errors="replace") != sub(text):
            actual = target.read_text(encoding="utf-8", errors="replace")
            failures.append(f"file {name} differs:\n{indent(diff(sub(text), actual, name))}")
    for spec, _ in case.all("is-link"):
        name, target = spec.split()
        link = run.tmp / raw_bytes(name)
        if not link.is_symlink() or os.readlink(link) != sub(raw_bytes(target)):
            failures.append(f"{name} should still be a symbolic link to {target}")
    for name, _ in case.all("present"):
        if not (run.tmp / raw_bytes(name)).exists():
            failures.append(f"file {name} should exist but does not")
    for name, _ in case.all("absent"):
        if (run.tmp / raw_bytes(name)).exists():
            failures.append(f"file {name} should not exist but does")
    for spec, _ in case.all("json-has"):
        source, *keys = spec.split()
        try:
            doc = load_json_source(source, run)
        except (OSError, ValueError) as e:
            failures.append(f"{source} is not valid JSON: {e}")
            continue
        missing = [k for k in keys if not isinstance(doc, dict) or k not in doc]
        if missing:
            failures.append(f"{source} lacks top-level keys {missing}; has "
                            f"{list(doc) if isinstance(doc, dict) else type(doc).__name__}")
    for spec, _ in case.all("json"):
        m = re.fullmatch(r"(\S+)\s+(\S*)\s*=\s*(.+)", spec)
        if not m:
            failures.append(f"bad 'json:' directive {spec!r} (want: SOURCE PATH = VALUE)")
            continue
        source, dotted, raw = m.groups()
        try:
            want = json.loads(sub(raw))
        except ValueError as e:
            failures.append(f"'json:' value {raw!r} is not JSON: {e}")
            continue
        try:
            got = json_at(load_json_source(source, run), dotted)
        except (OSError, ValueError) as e:
            failures.append(f"{source} is not valid JSON: {e}")
            continue
        except (KeyError, IndexError, TypeError):
            failures.append(f"{source} has no value at {dotted!r}")
            continue
        if got != want:
            failures.append(f"{source} at {dotted!r}: expected {json.dumps(want)}, "
                            f"got {json.dumps(got)}")
    allowed = {n for n, _ in case.all("file")} | {n for n, _ in case.all("present")} | {
        n for n, _ in case.all("expect-file")} | {s.split()[0] for s, _ in case.all("link")}
    extra = sorted(files_in(run.tmp) - {str(Path(raw_bytes(n))) for n in allowed})
    if extra:
        failures.append(f"unexpected files left in the working directory: {extra}")
    return failures


def check_repeats(case: Case, runs: list) -> list:
    failures = []
    first = runs[0]
    for k, other in enumerate(runs[1:], start=2):
        if other.exit != first.exit:
            failures.append(f"run {k} exit code {other.exit} differs from run 1's {first.exit}")
        if other.stdout != first.stdout:
            changes = diff(first.stdout, other.stdout, "stdout", "run 1", f"run {k}")
            failures.append(f"run {k} stdout differs from run 1's:\n{indent(changes)}")
        for name, _ in case.all("present"):
            a, b = first.tmp / raw_bytes(name), other.tmp / raw_bytes(name)
            if a.is_file() and b.is_file() and a.read_bytes() != b.read_bytes():
                failures.append(f"run {k} file {name} differs from run 1's:\n" + indent(diff(
                    a.read_text(errors="replace"), b.read_text(errors="replace"), name, "run 1",
                    f"run {k}")))
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True, help="the pulse-plan executable")
    parser.add_argument("--cases", required=True, help="a directory of .case files, or one file")
    parser.add_argument("--root", help="repository root for {root} (default: from this script)")
    parser.add_argument("--filter", default="", help="run only cases whose name contains this")
    parser.add_argument("--keep", action="store_true", help="keep the temp directories")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every case")
    a = parser.parse_args()

    root = Path(a.root).resolve() if a.root else Path(__file__).resolve().parents[2]
    binary = Path(a.binary).resolve()
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        print(f"run_golden.py: --binary {a.binary}: not an executable file", file=sys.stderr)
        return 2
    cases_path = Path(a.cases)
    paths = sorted(cases_path.glob("*.case")) if cases_path.is_dir() else [cases_path]
    paths = [p for p in paths if a.filter in p.stem]
    if not paths:
        print(f"run_golden.py: no .case files in {a.cases} (filter {a.filter!r})",
              file=sys.stderr)
        return 2

    passed, failed, xfailed, xpassed = [], [], [], []
    for path in paths:
        keep = []
        case = None
        try:
            case = parse_case(path)
            runs = [run_once(case, binary, root, keep) for _ in range(case.repeat)]
            failures = check(case, runs[0], root) + check_repeats(case, runs)
        except CaseError as e:
            case, failures = None, [f"bad case file: {e}"]
        except subprocess.TimeoutExpired:
            failures = [f"timed out after {RUN_TIMEOUT_S} s"]
        finally:
            for tmp in keep:
                if a.keep:
                    print(f"  (kept {tmp})")
                else:
                    shutil.rmtree(tmp, ignore_errors=True)
        name = path.stem
        if case is not None and case.xfail:
            if failures:
                xfailed.append(name)
                print(f"XFAIL {name}: {case.xfail}")
                if a.verbose:
                    for f in failures:
                        print(indent(f, "      "), end="")
            else:
                xpassed.append(name)
                print(f"XPASS {name}: passes now; remove its 'xfail:' ({case.xfail})")
        elif failures:
            failed.append(name)
            print(f"FAIL  {name}  ({path})")
            if case is not None:
                print(f"      $ pulse-plan {case.args}")
            for f in failures:
                print("      - " + f.rstrip().replace("\n", "\n        "))
        else:
            passed.append(name)
            if a.verbose:
                print(f"ok    {name}")

    print(f"\n{len(passed)} passed, {len(failed)} failed, {len(xfailed)} expected failures"
          f" (known bugs), {len(xpassed)} unexpectedly passed, of {len(paths)} cases")
    if failed:
        print("failed: " + ", ".join(failed))
    if xpassed:
        print("unexpectedly passed (remove 'xfail:'): " + ", ".join(xpassed))
    return 1 if failed or xpassed else 0


if __name__ == "__main__":
    sys.exit(main())
