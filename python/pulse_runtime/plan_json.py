"""A plan file as a JSON tree, checked before anything reads its keys (plan_doc.py's first
half; `plan_doc.read_plan` is the one entry):

1. size: at most MAX_PLAN_BYTES, from the file's size before reading and then while reading,
   so /dev/zero or a pipe is refused after that many bytes and never held whole; a piece
   holding a byte no JSON text holds (a control byte other than tab, newline and return)
   ends the read there (/dev/zero and /dev/urandom end after their first MiB);
2. syntax: strict JSON in UTF-8: no NaN or Infinity literal, no number beyond a double, no
   integer beyond 2^53 (the planner's kMaxBytes, the largest a double holds exactly), no key
   twice in one object, arrays and objects nested at most MAX_DEPTH deep;
3. the project's JSON schema, `schema/plan.schema.json`, shipped in the package as
   `pulse_runtime/plan.schema.json` (tests/torch/test_plan_reader.py asserts that the copy
   equals the original), with the jsonschema library's Draft 7 validator.

Every refusal is a PlanError: one line naming the file, the JSON path and what was expected.
"""

from __future__ import annotations

import json
import math
import os
import re
from functools import lru_cache
from typing import Any

# A plan file's size, bytes: 128 MiB. The planner allows 1 GiB (include/pulse/base/limits.hpp,
# kMaxPlanFileBytes), but Python holds a parsed plan in several times its text and every rank
# reads it. The planner writes about 92 bytes an op, one op a line (scripts/plan_read_bench.py's
# 98,304 ops in 9.1 MB; 153 bytes and 15.0 MB before December 2026, seven lines an op), so the
# largest plan limits.hpp names (a 64-device W3 plan with 512 microbatches and a split
# backward, 0.6M ops, about 56 MB) fits, and a larger file is refused unread.
MAX_PLAN_BYTES = 128 << 20
# Arrays and objects inside one another: the planner's own limit (JsonLimits::max_depth in
# include/pulse/base/json_check.hpp); a plan's deepest value is 5 levels down.
MAX_DEPTH = 64
# The largest integer a plan may state: 2^53, the planner's kMaxBytes.
MAX_INTEGER = 1 << 53
TOO_DEEP = (f"arrays and objects nested more than {MAX_DEPTH} deep (a plan's deepest value "
            f"is 5 levels down)")
_READ_PIECE = 1 << 20
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plan.schema.json")


class PlanError(ValueError):
    """A plan that cannot be used: unreadable, the wrong schema, a missing key or a value of
    the wrong type, or (plan.py) one that does not fit the model."""


def read_bytes(path: str, limit: int = MAX_PLAN_BYTES, what: str = "a plan pulse-run reads",
               kind: str = "JSON") -> bytes:
    """The file's bytes, at most `limit`; PlanError for a larger file (`what` has at most
    `limit` bytes) or one no `kind` text could be (a control byte), without reading it all."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise PlanError(f"{path}: the file has {size} bytes; {what} has at most "
                                f"{limit} ({limit >> 20} MiB)")
            pieces, total = [], 0
            while total <= limit:
                piece = f.read(min(_READ_PIECE, limit + 1 - total))
                if not piece:
                    break
                bad = _CONTROL.search(piece)
                if bad:
                    raise PlanError(f"{path}: not {kind}: byte 0x{bad.group()[0]:02x} at offset "
                                    f"{total + bad.start()} (a {kind} text holds no control "
                                    f"bytes)")
                pieces.append(piece)
                total += len(piece)
    except OSError as e:
        raise PlanError(f"{path}: cannot read ({e.strerror or e})") from None
    if total > limit:
        raise PlanError(f"{path}: more than {limit} bytes ({limit >> 20} MiB), the most {what} "
                        f"has; the rest was not read")
    return b"".join(pieces)


class _Literal:
    """A number literal JSON allows but a plan may not hold (NaN, Infinity, too large), kept
    in the tree so that the walk below can name its path."""

    def __init__(self, text: str) -> None:
        self.text = text if len(text) <= 24 else text[:20] + "..."


class _Duplicate(dict):
    """An object that named a key twice (the first such key in `key`)."""
    key = ""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        obj = _Duplicate(obj)
        obj.key = twice
    return obj


def _int(text: str) -> Any:
    # Python refuses integers of more than 4300 digits outright; anything beyond 2^53 is
    # refused by the walk, with its path.
    return int(text) if len(text) < 20 else _Literal(text)


def parse(path: str, data: bytes) -> Any:
    """The JSON tree of `data` (read from `path`), checked as the module docstring says
    (steps 2 and 3 are `walk` and `validate`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PlanError(f"{path}: not JSON: not UTF-8 at byte offset {e.start}") from None
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_int=_int,
                          parse_constant=_Literal)
    except RecursionError:  # Python's reader stops at about 1000 levels; say where 64 ended
        raise PlanError(f"{path}: {too_deep(text)}: {TOO_DEEP}") from None
    except json.JSONDecodeError as e:
        raise PlanError(f"{path}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") \
            from None
    except ValueError as e:
        raise PlanError(f"{path}: not JSON: {e}") from None


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},]')


def too_deep(text: str) -> str:
    """The JSON path of the first array or object nested more than MAX_DEPTH deep in `text`
    (JSON that Python's reader gave up on), from its strings and brackets alone."""
    stack: list[list[Any]] = []  # per open container: [is an object, key or index, key next]
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            if len(stack) >= MAX_DEPTH:
                break
            stack.append([token == "{", None if token == "{" else 0, token == "{"])
        elif token in "]}":
            if stack:
                stack.pop()
        elif token == ",":
            if stack and stack[-1][0]:
                stack[-1][2] = True
            elif stack:
                stack[-1][1] += 1
        elif stack and stack[-1][0] and stack[-1][2]:  # an object's key
            stack[-1][1], stack[-1][2] = json.loads(token), False
    return _shortened(json_path(entry[1] for entry in stack if entry[1] is not None),
                      len(stack))


def _shortened(path: str, depth: int) -> str:
    """A long path's first steps and its depth."""
    if len(path) <= 100:
        return path
    short = ""
    for step in re.findall(r"^\$|\.[^.\[]+|\[[^\]]*\]", path):
        if len(short) + len(step) > 60:
            break
        short += step
    return f"{short}... ({depth} levels)"


def json_path(parts: Any) -> str:
    """'$' and the keys and indices of `parts`, as the planner writes JSON paths."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if _plain(p) else f"[{p!r}]")
    return out


def _plain(key: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key))


def walk(path: str, tree: Any) -> None:
    """Every value of the tree: nesting at most MAX_DEPTH, no key twice in an object, every
    number finite and every integer within MAX_INTEGER. Iterative: no recursion to exhaust."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(tree, ())]
    while stack:
        value, where = stack.pop()
        if isinstance(value, (dict, list)):
            if len(where) >= MAX_DEPTH:
                raise PlanError(f"{path}: {_shortened(json_path(where), len(where))}: "
                                f"{TOO_DEEP}")
            if isinstance(value, _Duplicate):
                raise PlanError(f"{path}: {json_path(where + (value.key,))}: the key is "
                                f"given twice in one object")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((v, where + (k,)) for k, v in items)
        elif isinstance(value, _Literal):
            raise PlanError(f"{path}: {json_path(where)}: expected a finite number within "
                            f"2^53, got {value.text}")
        elif isinstance(value, float) and not math.isfinite(value):
            raise PlanError(f"{path}: {json_path(where)}: expected a finite number, got a "
                            f"literal beyond a double's range")
        elif isinstance(value, int) and not isinstance(value, bool) and \
                abs(value) > MAX_INTEGER:
            raise PlanError(f"{path}: {json_path(where)}: expected an integer within 2^53, got "
                            f"{value}")


# --- the schema -------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _validator() -> Any:
    try:
        import jsonschema
    except ImportError:
        raise PlanError("pulse-run checks plans with the jsonschema library, which this Python "
                        "lacks (pip install jsonschema)") from None
    try:
        with open(SCHEMA_FILE, "rb") as f:
            schema = json.loads(f.read())
    except (OSError, ValueError) as e:
        raise PlanError(f"{SCHEMA_FILE}: the package's plan schema is unreadable ({e}); "
                        f"reinstall pulse-runtime") from None
    return jsonschema.Draft7Validator(schema)


def validate(path: str, tree: Any) -> None:
    """The tree against schema/plan.schema.json; the first error as one line."""
    error = next(iter(_validator().iter_errors(tree)), None)
    if error is not None:
        raise PlanError(f"{path}: {describe(error)}")


_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string",
               "boolean": "true or false", "array": "an array", "object": "an object",
               "null": "null"}


def type_name(value: Any) -> str:
    """The JSON type of a parsed value, as the messages say it."""
    if isinstance(value, bool):
        return "true or false"
    for kind, name in ((dict, "an object"), (list, "an array"), (str, "a string"),
                       (int, "an integer"), (float, "a number"), (type(None), "null")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _expected_type(schema: Any) -> str:
    kinds = schema.get("type") if isinstance(schema, dict) else None
    if kinds is None:
        if isinstance(schema, dict) and "enum" in schema:
            return f"one of {schema['enum']}"
        return "a value"
    kinds = kinds if isinstance(kinds, list) else [kinds]
    return " or ".join(_TYPE_NAMES.get(k, k) for k in kinds)


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 60 else text[:56] + "..."


def describe(error: Any) -> str:
    """A jsonschema ValidationError as 'JSON path: what was expected, what was there'. The
    instance is never printed whole (it may be a whole array)."""
    where = json_path(error.absolute_path)
    kind, want, got = error.validator, error.validator_value, error.instance
    if kind == "required":
        missing = next((k for k in want if k not in got), want[0])
        sub = error.schema.get("properties", {}).get(missing, {})
        return f"{json_path(list(error.absolute_path) + [missing])}: missing (expected " \
               f"{_expected_type(sub)})"
    if kind == "type":
        return f"{where}: expected {_expected_type(error.schema)}, got {type_name(got)}"
    if kind in ("enum", "const"):
        options = want if kind == "enum" else [want]
        return f"{where}: expected one of {options}, got {_short(got)}"
    bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">",
              "exclusiveMaximum": "<"}
    if kind in bounds:
        noun = "an integer" if error.schema.get("type") == "integer" else "a number"
        return f"{where}: expected {noun} {bounds[kind]} {want}, got {_short(got)}"
    if kind == "minItems":
        return f"{where}: expected at least {want} item(s), got {len(got)}"
    if kind == "minLength":
        return f"{where}: expected a string of at least {want} character(s), got {_short(got)}"
    if kind == "pattern":
        return f"{where}: expected a string matching {want}, got {_short(got)}"
    if kind == "additionalProperties":
        extra = sorted(k for k in got if k not in error.schema.get("properties", {}))
        return f"{where}: unexpected key(s) {extra[:5]} (the schema lists " \
               f"{sorted(error.schema.get('properties', {}))})"
    return f"{where}: {error.message[:200]} (schema/plan.schema.json: {kind})"
