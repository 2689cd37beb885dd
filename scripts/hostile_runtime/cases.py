"""The runtime's hostile catalogue: malformed plans (mutations of real plans the planner wrote)
and malformed options, each with the exit code and the line it must give.

A case's plan is the base plan as written, a mutated copy (a function of the parsed plan),
raw bytes (a function of the base plan's text), or a path (/dev/zero). Its `message` is a
regular expression the one line of stderr must match: for a plan, the file and the JSON path.
"""
import copy
import json
import os
import re
import shutil
import subprocess

MAIN = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON_DIR = os.path.join(MAIN, "python")
PROFILE = os.path.join(MAIN, "tests", "torch", "data", "small-unet-test-f64.json")
DIT_PROFILE = os.path.join(MAIN, "tests", "torch", "data", "small-dit-test-f64.json")
CLUSTER = os.path.join(MAIN, "profiles", "clusters", "cpu-localhost.json")
FROZEN_PROFILE = os.path.join(MAIN, "tests", "torch", "data", "small-frozen-test-f64.json")
BUCKETS = os.path.join(MAIN, "tests", "torch", "data", "small-frozen-buckets.json")

# The base plans, made by the planner under test: a V (pp 2 x dp 4, 8 ranks), a chain whose
# skips travel in skip transfers, a V with a split backward, and a V of 2 ranks; of the
# small DiT (examples/small_dit.py), Ulysses 2 on one pipeline device (1 rank, 2 processes)
# and on a pipeline of 2 (pp 2: 2 ranks of 2 processes); of the example with frozen encoders
# (examples/small_frozen.py), a pp 2 plan encoding before the step, and one with two buckets.
BASE_SPECS = {
    "v": ["--pp", "2", "--global-batch", "8"],
    "direct": ["--pp", "2", "--strategy", "1f1b-direct", "--global-batch", "8"],
    "split": ["--pp", "2", "--split-backward", "--global-batch", "8"],
    "dp1": ["--pp", "2", "--dp", "1", "--global-batch", "4"],
    "seq": ["--sequence", "2x1", "--pp", "1", "--dp", "1", "--global-batch", "4"],
    "seqpp2": ["--sequence", "2x1", "--pp", "2", "--dp", "1", "--global-batch", "4"],
    "frozen": ["--pp", "2", "--dp", "1", "--global-batch", "4", "--frozen", "before_step"],
    "buckets": ["--pp", "2", "--dp", "1", "--global-batch", "8", "--frozen", "before_step",
                "--buckets", BUCKETS],
}
BASE_PROFILES = {"seq": DIT_PROFILE, "seqpp2": DIT_PROFILE, "frozen": FROZEN_PROFILE,
                 "buckets": FROZEN_PROFILE}  # the others: PROFILE


def make_bases(binary, folder):
    """Plans each base and exports its torch-csv; returns {name: parsed plan}."""
    os.makedirs(folder, exist_ok=True)
    bases = {}
    for name, extra in BASE_SPECS.items():
        path = os.path.join(folder, name + ".json")
        subprocess.run([binary, "plan", "--model", BASE_PROFILES.get(name, PROFILE),
                        "--cluster", CLUSTER, "--precision",
                        "fp64", "-q", "-o", path, *extra], check=True, capture_output=True)
        subprocess.run([binary, "export", path, "--format", "torch-csv", "-o",
                        os.path.join(folder, name + ".csv")], check=True, capture_output=True)
        with open(path) as f:
            bases[name] = json.load(f)
    return bases


class Sparse:
    """A plan file of `size` bytes that takes no room (zeros, never written)."""

    def __init__(self, size):
        self.size = size


class Case:
    """One command on one input (module docstring)."""
    base_dir = None  # set by the catalogue's main: where make_bases wrote the base plans

    def __init__(self, cls, name, command="run", args=(), plan=None, base="v", expect=2,
                 message=r"bad\.json: \$", env=None, unset_env=("RANK", "WORLD_SIZE"),
                 stdin=None, max_processes=1, fresh=False, files=None):
        self.cls, self.name, self.command, self.args = cls, name, command, list(args)
        self.plan, self.base, self.expect, self.message = plan, base, expect, message
        self.env, self.unset_env, self.stdin = env or {}, unset_env, stdin
        self.max_processes = max_processes
        self.files = files or {}  # more inputs: name -> bytes
        # A fresh interpreter (python -m ...) rather than a fork of the preloaded one
        # (judge.Preloaded): always for the adapter (a script) and for input on stdin.
        self.fresh = fresh or command == "adapter" or stdin is not None

    def base_path(self, ext):
        return os.path.join(self.base_dir, self.base + ext)

    def plan_path(self, folder):
        return self.plan if isinstance(self.plan, str) else "bad.json"


    def csv_path(self, folder):
        return "plan.csv"

    def setup(self, folder):
        shutil.copy(self.base_path(".csv"), os.path.join(folder, "plan.csv"))
        if isinstance(self.plan, Sparse):
            with open(os.path.join(folder, "bad.json"), "wb") as f:
                f.truncate(self.plan.size)
            return
        for name, data in self.files.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        if isinstance(self.plan, str):
            return
        with open(self.base_path(".json"), "rb") as f:
            text = f.read()
        if self.plan is None:
            data = text
        elif getattr(self.plan, "raw", False):
            data = self.plan(text)
        else:
            doc = json.loads(text)
            changed = self.plan(doc)
            data = json.dumps(doc if changed is None else changed, indent=1).encode()
        with open(os.path.join(folder, "bad.json"), "wb") as f:
            f.write(data)


# --- mutations ------------------------------------------------------------------------------

DELETE = object()


def _parent(doc, path):
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    node = doc
    for k in keys[:-1]:
        node = node[k]
    return node, keys[-1]


def at(path, value):
    """A mutation: the value at `path` ("rank_map.pipeline_groups.0") set, or deleted."""
    def mutate(doc):
        node, key = _parent(doc, path)
        if value is DELETE:
            del node[key]
        else:
            node[key] = copy.deepcopy(value)
    mutate.describe = f"{path} = {value!r}"[:80]
    return mutate


def raw(edit):
    """A mutation of the file's bytes."""
    edit.raw = True
    return edit


def literal(path, token):
    """The value at `path` replaced by a JSON token json.dumps cannot write (NaN, 1e999)."""
    marker = "@@literal@@"

    def edit(text):
        doc = json.loads(text)
        at(path, marker)(doc)
        return json.dumps(doc, indent=1).replace(f'"{marker}"', token).encode()
    return raw(edit)


def nested(path, depth):
    """The value at `path` replaced by `depth` arrays inside one another."""
    return literal(path, "[" * depth + "]" * depth)


def twice(path, key, value):
    """The object at `path` given `key` a second time."""
    marker = "@@twice@@"

    def edit(text):
        doc = json.loads(text)
        node, last = _parent(doc, path + ".x")
        node[marker] = 0
        return json.dumps(doc, indent=1).replace(f'"{marker}": 0',
                                                 f'"{key}": {json.dumps(value)}').encode()
    return raw(edit)


def each(*mutations):
    def mutate(doc):
        for m in mutations:
            m(doc)
    return mutate


def widened(dp):
    """The plan with `dp` replicas, everything consistent (a plan of pp x dp ranks that every
    check but the launch's accepts)."""
    def mutate(doc):
        par, rank_map = doc["parallelism"], doc["rank_map"]
        pp = par["pp"]
        par.update(dp=dp, devices_used=pp * dp, devices_total=pp * dp,
                   global_batch=dp * par["num_microbatches"] * par["microbatch_size"])
        ranks = [{"rank": i * pp + d, "node": 0, "local_device": i * pp + d, "dp_index": i,
                  "pipeline_device": d} for i in range(dp) for d in range(pp)]
        rank_map.update(world_size=pp * dp, ranks=ranks,
                        pipeline_groups=[[i * pp + d for d in range(pp)] for i in range(dp)],
                        data_parallel_groups=[[i * pp + d for i in range(dp)]
                                              for d in range(pp)])
    return mutate


def swap_ops(device, first, second):
    def mutate(doc):
        ops = doc["schedule"][device]["ops"]
        ops[first], ops[second] = ops[second], ops[first]
    return mutate


def path(json_path, file=r"bad\.json"):
    """The regular expression of a line naming the file and this JSON path."""
    return f"{file}: {re.escape(json_path)}[:.\\[ ]"
