#!/usr/bin/env python3
"""Sizes a newcomer can read (docs/architecture.md, issue 26), checked on the source tree:

  1. No C++ file in src/ or solver/ is over 800 lines.
  2. No function in any folder of src/ or solver/ is over 100 lines (from its signature's
     line to its closing brace).
  3. src/cli/plan_command.cpp is under 250 lines: the driver is the library's, the command
     parses, calls and prints.

Functions are found by a brace scanner, not a compiler: comments, string and character
literals (raw strings included) are blanked first; then a `{` at namespace or class scope
whose header (the text since the previous `;`, `{` or `}` there) has a parameter list and is
not a class, enum, namespace or initializer opens a function body, which ends at its matching
`}`. Lambdas and local classes count towards the function around them.

Prints every violation; exit 1 if there is any. --self-test runs the scanner on planted
sources (a 101-line function, braces in comments and raw strings, a constructor with a
braced member initializer) and fails unless it measures each as written by hand, and on a
tree with that 101-line function in solver/ and fails unless the rule finds it there.
"""

import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100
FILE_FOLDERS = ["src", "solver"]
PLAN_COMMAND = "src/cli/plan_command.cpp"
MAX_PLAN_COMMAND_LINES = 249
SUFFIXES = {".cpp", ".hpp", ".cc", ".h"}


def blank_literals(text):
    """`text` with comments and literals replaced by spaces, newlines kept (so line numbers
    hold)."""
    out = []
    i, n = 0, len(text)

    def blank(s):
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(blank(text[i:j]))
            i = j
        elif c == "R" and i + 1 < n and text[i + 1] == '"' and (i == 0 or not (
                text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delimiter = text[i + 2:open_paren]
            end = text.find(")" + delimiter + '"', open_paren)
            j = n if end < 0 else end + len(delimiter) + 2
            out.append(blank(text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and text[i - 1] not in "uUL":
                out.append(c)
                i += 1
                continue
            out.append(blank(text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


SCOPE_HEADER = re.compile(r"\b(namespace|class|struct|union|enum)\b")

def functions(text):
    """(name, first line, last line) of every function body at namespace or class scope."""
    code = blank_literals(text)
    found = []
    stack = []  # per open brace: "scope" (namespace, class, top) or "body"
    header_start = 0
    i = 0
    while i < len(code):
        c = code[i]
        inside_body = any(kind != "scope" for kind, _, _ in stack)
        if c == "{" and not inside_body:
            header = code[header_start:i]
            flat = " ".join(header.split())
            if SCOPE_HEADER.search(flat.split("(")[0]) or "(" not in flat:
                kind = "scope" if "=" not in flat else "init"
            elif "=" in flat.split("(")[0]:
                kind = "init"
            elif re.search(r"\)\s*:\s*[^:]", flat) and re.search(r"[\w>]$", flat):
                # A constructor's member initializer braced, `a_{x}`: not the body yet.
                kind = "init"
            else:
                kind = "body"
            stack.append((kind, i, header_start))
            if kind != "init":
                header_start = i + 1
        elif c == "{":
            stack.append(("inner", i, header_start))
        elif c == "}":
            kind, start, started = stack.pop() if stack else ("scope", i, 0)
            if kind == "body":
                header = code[started:start]
                first = started + len(header) - len(header.lstrip())
                name = re.findall(r"([\w:~]+)\s*\(", header)
                found.append((name[0] if name else "?", code.count("\n", 0, first) + 1,
                              code.count("\n", 0, i) + 1))
            if kind in ("scope", "body"):
                header_start = i + 1
            # After an initializer the header goes on: `a_{x}, b_{y} {` or `x = {...};`.
        elif c == ";" and not inside_body:
            header_start = i + 1
        i += 1
    return found


def function_folders(root):
    """Every folder of src/ and solver/ (src/base ... solver/schedule), each reported apart."""
    return [str(d.relative_to(root)) for top in FILE_FOLDERS for d in sorted((root / top).iterdir())
            if d.is_dir()]


def lines_of(text):
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def check(root):
    problems = []
    for folder in FILE_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SUFFIXES:
                continue
            n = lines_of(path.read_text())
            if n > MAX_FILE_LINES:
                problems.append(f"{path.relative_to(root)}: {n} lines, over {MAX_FILE_LINES}")
    for folder in function_folders(root):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SUFFIXES:
                continue
            for name, first, last in functions(path.read_text()):
                length = last - first + 1
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{path.relative_to(root)}:{first}: {name} is {length} "
                                    f"lines, over {MAX_FUNCTION_LINES}")
    plan_command = root / PLAN_COMMAND
    if plan_command.exists():
        n = lines_of(plan_command.read_text())
        if n > MAX_PLAN_COMMAND_LINES:
            problems.append(f"{PLAN_COMMAND}: {n} lines, over {MAX_PLAN_COMMAND_LINES}")
    return problems


def longest(root):
    """The longest function of each folder and the longest file: what the report quotes."""
    out = []
    for folder in function_folders(root):
        best = (0, "")
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in SUFFIXES:
                for name, first, last in functions(path.read_text()):
                    best = max(best, (last - first + 1, f"{path.relative_to(root)}:{first} {name}"))
        out.append(f"longest function in {folder}: {best[0]} lines ({best[1]})")
    files = [(lines_of(p.read_text()), str(p.relative_to(root)))
             for f in FILE_FOLDERS for p in (root / f).rglob("*") if p.suffix in SUFFIXES]
    n, name = max(files)
    out.append(f"longest file in src/ and solver/: {n} lines ({name})")
    return out


SELF_TEST = r'''
// A comment with a brace { that is not code.
namespace pulse {
constexpr const char* kHelp = R"(usage: {
  not a function() {
)";
struct Point {
  int x = 0;
  Point(int a) : x_{a} {
    x = a;
  }
  int x_;
};
int small(int a) {
  auto f = [](int b) {
    return b;
  };
  const char c = '{';
  return f(a) + (c == '}');
}
int long_one()
{
''' + "  int a = 0;\n" * 98 + r'''}
}  // namespace pulse
'''


def self_test():
    found = {name: last - first + 1 for name, first, last in functions(SELF_TEST)}
    expected = {"Point": 3, "small": 7, "long_one": 101}
    ok = found == expected
    print(f"self-test: measured {found}, expected {expected}: {'ok' if ok else 'FAILED'}")
    # The rule reaches every folder: the 101-line function planted in solver/ is found.
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for folder in ("src/cli", "solver/partition"):
            (root / folder).mkdir(parents=True)
        (root / "solver/partition/dp.cpp").write_text(SELF_TEST)
        problems = check(root)
    planted = ["solver/partition/dp.cpp:21: long_one is 101 lines, over 100"]
    print(f"self-test: planted in solver/, found {problems}: "
          f"{'ok' if problems == planted else 'FAILED'}")
    return 0 if ok and problems == planted else 1


def main():
    if "--self-test" in sys.argv[1:]:
        return self_test()
    problems = check(ROOT)
    for p in problems:
        print(p)
    for line in longest(ROOT):
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
