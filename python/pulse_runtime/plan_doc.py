"""A pulse.plan/v1 plan as typed, read-only records, read once from JSON.

`read_plan(path)` checks the keys the runtimes use and returns a `PlanDoc`; a missing key or
a value of the wrong type is a `PlanError` naming the file and the JSON path. Nothing here
knows about a model: plan.py binds a PlanDoc to one (layer ranges, messages), and the
PyTorch-pipelining adapter (pipelining.py) reads the same records.

Optional keys, read when present:
- `options.memory.precision`: the training regime the plan was made for (precision.py's
  names; absent: `mixed`, the planner's default); an unknown name is a PlanError;
- `predicted.devices[].memory`: the training state each pipeline device holds by the plan
  (weights, gradients, optimizer bytes), which the summary puts beside what a rank held;
- `stages[].recomputed`: the stage's layers that `plan --recompute` re-runs in backward, by
  name (absent: none); the runtimes run each under torch.utils.checkpoint;
- `transfers[].carried`: the carried tensors a main transfer moves, by name. Plans written
  before it existed leave it out, and plan.py derives the list with the planner's rule.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

SCHEMA = "pulse.plan/v1"
OPS = ("F", "B", "I", "W")
SIDES = ("encoder", "decoder", "chain", "")  # the stage kinds the runtimes execute
PRECISIONS = ("mixed", "fp16-mixed", "bf16", "fp32", "fp64")  # precision.PRECISIONS

T = TypeVar("T")


class PlanError(ValueError):
    """A plan that cannot be used: unreadable, the wrong schema, a missing key or a value of
    the wrong type, or (plan.py) one that does not fit the model."""


@dataclass(frozen=True)
class Parallelism:
    pp: int
    dp: int
    microbatch_size: int
    num_microbatches: int
    global_batch: int
    num_stages: int


@dataclass(frozen=True)
class StageSpec:
    id: int
    device: int
    side: str
    layers: tuple[str, ...]
    forward_s: float
    backward_s: float
    recomputed: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkipSpec:
    name: str
    producer: str
    consumer: str
    bytes_per_sample: int
    producer_stage: int
    consumer_stage: int
    route: str


@dataclass(frozen=True)
class CarriedSpec:
    name: str
    producer: str | None
    bytes_per_sample: int
    needs_gradient: bool


@dataclass(frozen=True)
class TransferSpec:
    from_stage: int
    to_stage: int
    from_device: int
    to_device: int
    kind: str                       # main | skip
    forward_bytes: dict[str, int]   # byte kind (activation, skip, carried, total) -> bytes
    skips: tuple[str, ...]
    carried: tuple[str, ...] | None  # None: the plan does not list them (older writers)


@dataclass(frozen=True)
class OpSpec:
    op: str     # F | B | I | W
    stage: int
    mb: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class RankSpec:
    rank: int
    dp_index: int
    pipeline_device: int
    local_device: int


@dataclass(frozen=True)
class RankMap:
    world_size: int
    ranks: tuple[RankSpec, ...]
    pipeline_groups: tuple[tuple[int, ...], ...]
    data_parallel_groups: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class DevicePrediction:
    device: int
    compute_s: float
    weights_bytes: int = 0      # the training state the plan gives the device (per replica)
    gradients_bytes: int = 0
    optimizer_bytes: int = 0


@dataclass(frozen=True)
class Prediction:
    iteration_s: float
    pipeline_makespan_s: float
    devices: tuple[DevicePrediction, ...]


@dataclass(frozen=True)
class PlanDoc:
    path: str
    sha256: str
    strategy: str
    split_backward: bool
    zero_stage: int
    parallelism: Parallelism
    stages: tuple[StageSpec, ...]
    skips: tuple[SkipSpec, ...]
    carried: tuple[CarriedSpec, ...]
    transfers: tuple[TransferSpec, ...]
    schedule: dict[int, tuple[OpSpec, ...]]  # pipeline device -> its ops in order
    rank_map: RankMap
    predicted: Prediction
    precision: str = "mixed"
    recompute: str = "none"

    @property
    def stage_device(self) -> list[int]:
        return [s.device for s in self.stages]

    def stages_on(self, device: int) -> list[int]:
        return [s.id for s in self.stages if s.device == device]

    def rank(self, rank: int) -> RankSpec:
        for r in self.rank_map.ranks:
            if r.rank == rank:
                return r
        raise PlanError(f"{self.path}: rank {rank} is not in the plan's rank_map")


# --- reading ----------------------------------------------------------------------------------

class _Reader:
    """Typed access to a JSON tree; every error names the file and the JSON path."""

    def __init__(self, path: str) -> None:
        self.path = path

    def get(self, node: Any, key: str, kind: type | tuple[type, ...], where: str,
            default: Any = ...) -> Any:
        if not isinstance(node, dict) or key not in node:
            if default is not ...:
                return default
            raise PlanError(f"{self.path}: {where}.{key}: missing (expected "
                            f"{_kind_name(kind)})")
        value = node[key]
        # JSON has no int/float distinction for whole numbers; bool is not a number here.
        if isinstance(value, bool) and bool not in _tuple(kind):
            ok = False
        elif float in _tuple(kind) and isinstance(value, int):
            ok, value = True, float(value)
        else:
            ok = isinstance(value, kind)
        if not ok:
            raise PlanError(f"{self.path}: {where}.{key}: expected {_kind_name(kind)}, got "
                            f"{type(value).__name__}")
        return value

    def items(self, node: Any, key: str, where: str, read: Callable[[Any, str], T]) -> list[T]:
        return [read(item, f"{where}.{key}[{i}]")
                for i, item in enumerate(self.get(node, key, list, where))]


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
             list: "an array", dict: "an object", type(None): "null"}
    return " or ".join(names.get(k, k.__name__) for k in _tuple(kind))


def read_plan(path: str) -> PlanDoc:
    """The plan at `path`, checked and typed (module docstring)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise PlanError(f"{path}: cannot read ({e.strerror})") from None
    try:
        raw = json.loads(data)
    except ValueError as e:
        raise PlanError(f"{path}: not JSON ({e})") from None
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        raise PlanError(f"{path}: not a {SCHEMA} plan ($.schema)")
    r = _Reader(path)
    options = r.get(raw, "options", dict, "$")
    memory = r.get(options, "memory", dict, "$.options", {})
    return PlanDoc(
        path=path, sha256=hashlib.sha256(data).hexdigest(),
        strategy=r.get(options, "strategy", str, "$.options"),
        split_backward=r.get(options, "split_backward", bool, "$.options", False),
        zero_stage=r.get(memory, "zero_stage", int, "$.options.memory", 0),
        parallelism=_parallelism(r, r.get(raw, "parallelism", dict, "$"), "$.parallelism"),
        stages=tuple(r.items(raw, "stages", "$", lambda n, w: _stage(r, n, w))),
        skips=tuple(r.items(raw, "skips", "$", lambda n, w: _skip(r, n, w))),
        carried=tuple(r.items(raw, "carried", "$", lambda n, w: _carried(r, n, w))),
        transfers=tuple(r.items(raw, "transfers", "$", lambda n, w: _transfer(r, n, w))),
        schedule=_schedule(r, raw),
        rank_map=_rank_map(r, r.get(raw, "rank_map", dict, "$"), "$.rank_map"),
        predicted=_prediction(r, r.get(raw, "predicted", dict, "$"), "$.predicted"),
        precision=_precision(r, memory),
        recompute=r.get(options, "recompute", str, "$.options", "none"))


def _precision(r: _Reader, memory: dict) -> str:
    name = r.get(memory, "precision", str, "$.options.memory", "mixed")
    if name not in PRECISIONS:
        raise PlanError(f"{r.path}: $.options.memory.precision: expected one of "
                        f"{list(PRECISIONS)}, got {name!r}")
    return name


def _parallelism(r: _Reader, node: dict, where: str) -> Parallelism:
    return Parallelism(*(r.get(node, k, int, where) for k in (
        "pp", "dp", "microbatch_size", "num_microbatches", "global_batch", "num_stages")))


def _stage(r: _Reader, node: Any, where: str) -> StageSpec:
    layers = r.get(node, "layers", list, where)
    if not layers or not all(isinstance(n, str) for n in layers):
        raise PlanError(f"{r.path}: {where}.layers: expected a non-empty array of layer names")
    recomputed = r.get(node, "recomputed", list, where, [])
    strays = [n for n in recomputed if not isinstance(n, str) or n not in layers]
    if strays:
        raise PlanError(f"{r.path}: {where}.recomputed: expected layers of the stage "
                        f"({', '.join(layers)}), got {strays[0]!r}")
    side = r.get(node, "side", str, where, "")
    if side not in SIDES:
        raise PlanError(f"{r.path}: {where}.side: a {side!r} stage, which the runtimes do not "
                        f"execute (they run {', '.join(SIDES[:-1])} stages)")
    return StageSpec(r.get(node, "id", int, where), r.get(node, "device", int, where),
                     side, tuple(layers),
                     r.get(node, "forward_s", float, where, 0.0),
                     r.get(node, "backward_s", float, where, 0.0), tuple(recomputed))


def _skip(r: _Reader, node: Any, where: str) -> SkipSpec:
    return SkipSpec(r.get(node, "name", str, where), r.get(node, "producer", str, where),
                    r.get(node, "consumer", str, where),
                    r.get(node, "bytes_per_sample", int, where),
                    r.get(node, "producer_stage", int, where),
                    r.get(node, "consumer_stage", int, where), r.get(node, "route", str, where))


def _carried(r: _Reader, node: Any, where: str) -> CarriedSpec:
    return CarriedSpec(r.get(node, "name", str, where),
                       r.get(node, "producer", (str, type(None)), where),
                       r.get(node, "bytes_per_sample", int, where),
                       r.get(node, "needs_gradient", bool, where))


def _transfer(r: _Reader, node: Any, where: str) -> TransferSpec:
    forward = r.get(node, "forward_bytes_per_microbatch", dict, where, {})
    carried = r.get(node, "carried", (list, type(None)), where, None)
    return TransferSpec(
        r.get(node, "from_stage", int, where), r.get(node, "to_stage", int, where),
        r.get(node, "from_device", int, where), r.get(node, "to_device", int, where),
        r.get(node, "kind", str, where),
        {k: r.get(forward, k, int, f"{where}.forward_bytes_per_microbatch") for k in forward},
        tuple(r.get(node, "skips", list, where)),
        None if carried is None else tuple(carried))


def _schedule(r: _Reader, raw: dict) -> dict[int, tuple[OpSpec, ...]]:
    schedule = {}
    for i, entry in enumerate(r.get(raw, "schedule", list, "$")):
        where = f"$.schedule[{i}]"
        ops = []
        for j, op in enumerate(r.get(entry, "ops", list, where)):
            w = f"{where}.ops[{j}]"
            kind = r.get(op, "op", str, w)
            if kind not in OPS:
                raise PlanError(f"{r.path}: {w}.op: expected one of {list(OPS)}, got {kind!r}")
            ops.append(OpSpec(kind, r.get(op, "stage", int, w), r.get(op, "mb", int, w),
                              r.get(op, "start_s", float, w, 0.0),
                              r.get(op, "end_s", float, w, 0.0)))
        schedule[r.get(entry, "device", int, where)] = tuple(ops)
    return schedule


def _rank_map(r: _Reader, node: dict, where: str) -> RankMap:
    ranks = tuple(RankSpec(r.get(n, "rank", int, w), r.get(n, "dp_index", int, w),
                           r.get(n, "pipeline_device", int, w),
                           r.get(n, "local_device", int, w, 0))
                  for w, n in ((f"{where}.ranks[{i}]", n)
                               for i, n in enumerate(r.get(node, "ranks", list, where))))
    groups = {k: tuple(tuple(g) for g in r.get(node, k, list, where))
              for k in ("pipeline_groups", "data_parallel_groups")}
    return RankMap(r.get(node, "world_size", int, where), ranks, groups["pipeline_groups"],
                   groups["data_parallel_groups"])


def _prediction(r: _Reader, node: dict, where: str) -> Prediction:
    devices = tuple(_device_prediction(r, d, w)
                    for w, d in ((f"{where}.devices[{i}]", d)
                                 for i, d in enumerate(r.get(node, "devices", list, where, []))))
    return Prediction(r.get(node, "iteration_s", float, where),
                      r.get(node, "pipeline_makespan_s", float, where, 0.0), devices)


def _device_prediction(r: _Reader, node: Any, where: str) -> DevicePrediction:
    memory = r.get(node, "memory", dict, where, {})
    state = (r.get(memory, k, int, f"{where}.memory", 0)
             for k in ("weights", "gradients", "optimizer"))
    return DevicePrediction(r.get(node, "device", int, where),
                            r.get(node, "compute_s", float, where), *state)
