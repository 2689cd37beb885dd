"""A pulse.plan/v2 (or v1) plan as typed, read-only records, read once from JSON: the one place a
runtime reads a plan.

`read_plan(path)` refuses a plan that cannot be run, each time with one PlanError line naming
the file, the JSON path and what was expected (the runtimes exit 2 with it), in this order:

1. the file and its JSON (plan_json.py): the size (at most 128 MiB, refused unread beyond),
   strict syntax (no NaN or Infinity, no key twice, numbers within 2^53, nesting at most 64
   deep) and the project's JSON schema (schema/plan.schema.json, with jsonschema);
2. the keys the runtimes use, typed (`_Reader`): a missing key or a value of the wrong type;
3. what the schema cannot say (`check`): the degrees against the planner's limits and each
   other (global batch = dp x microbatches x microbatch size), stage ids, devices and
   layers, skip and carried names, every transfer's stages and devices, a schedule that
   lists every op once on its stage's device in an order the ranks can run without waiting
   forever, and a rank map of world_size = pp x dp ranks numbered 0..world_size-1 whose
   groups are the ones its ranks give (what the planner's StructureCheck restates, on
   purpose, for a runtime that must not trust the file); with `parallelism.sequence` of
   degree s (= ulysses x ring) the ranks are multiples of s below world_size x s and
   `rank_map.sequence_groups` holds one group per rank, the s processes from it on.

Nothing here knows about a model: plan.py binds a PlanDoc to one (layer ranges, messages), and
the PyTorch-pipelining adapter (pipelining.py) reads the same records.

The modes a plan is executed in (ZeRO stage, precision, recomputation mode) are what the
planner chose: a v2 plan's `chosen` (`chosen.memory.zero_stage`, `chosen.memory.precision`,
`chosen.recompute`), whose `options` are the options as given (`options.memory.zero_stage` is
null when --zero was not given, `options.recompute` may be `auto`); a v1 plan (or a v2 plan
without `chosen`, written by hand) states them in `options` (`options.memory.zero_stage`,
`options.memory.precision`, `options.recompute`). `PlanDoc.modes_path` names the section read.

Optional keys, read when present:
- the precision (above): the training regime the plan was made for (precision.py's
  names; absent: `mixed`, the planner's default); an unknown name is a PlanError;
- `predicted.devices[].memory`: the training state each pipeline device holds by the plan
  (weights, gradients, optimizer bytes), which the summary puts beside what a rank held;
- `stages[].recomputed`: the stage's layers that `plan --recompute` re-runs in backward, by
  name (absent: none); the runtimes run each under torch.utils.checkpoint;
- `parallelism.sequence` and `rank_map.sequence_groups`: a sequence-parallel layout (above;
  `PlanDoc.processes` is then world_size x degree);
- `frozen` and `buckets` (docs/frozen.md, docs/buckets.md): kept as the schema checked them,
  read into records by frozen.py and buckets.py, which pulse-run runs;
- `transfers[].carried`: the carried tensors a main transfer moves, by name. Plans written
  before it existed leave it out, and plan.py derives the list with the planner's rule.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from . import plan_json
from .plan_json import PlanError

SCHEMA = "pulse.plan/v2"  # the version the planner writes
SCHEMAS = (SCHEMA, "pulse.plan/v1")  # the versions read
OPS = ("F", "B", "I", "W")
SIDES = ("encoder", "decoder", "chain", "")  # the stage kinds the runtimes execute
PRECISIONS = ("mixed", "fp16-mixed", "bf16", "fp32", "fp64")  # options.PRECISIONS

T = TypeVar("T")


@dataclass(frozen=True)
class SequenceSpec:
    """`parallelism.sequence`: Ulysses degree x ring degree processes share every sample."""
    ulysses: int
    ring: int
    degree: int


@dataclass(frozen=True)
class Parallelism:
    pp: int
    dp: int
    microbatch_size: int
    num_microbatches: int
    global_batch: int
    num_stages: int
    sequence: SequenceSpec | None = None  # absent: no sequence parallelism


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
    # With parallelism.sequence: per dp_index * pp + pipeline device, every process of it.
    sequence_groups: tuple[tuple[int, ...], ...] | None = None


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
    modes_path: str = "$.options"  # where zero_stage, precision and recompute were read
    # `frozen` and `buckets` as the schema checked them; typed where they are run
    # (frozen.py, buckets.py). None: the plan has no such section.
    frozen: dict | None = None
    buckets: dict | None = None

    @property
    def sequence_degree(self) -> int:
        """Processes per rank of the rank map (1 without sequence parallelism)."""
        seq = self.parallelism.sequence
        return seq.degree if seq is not None else 1

    @property
    def processes(self) -> int:
        """The processes that run the plan: world_size x the sequence degree."""
        return self.rank_map.world_size * self.sequence_degree

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
                            f"{plan_json.type_name(value)}")
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


_READ: dict[tuple[str, str], PlanDoc] = {}  # (path, sha256) -> the plan, read once a process


def read_plan(path: str) -> PlanDoc:
    """The plan at `path`, checked and typed (module docstring). The same bytes are read
    once: a rank forked after its launcher read the plan does not read it again."""
    data = plan_json.read_bytes(path)
    sha256 = hashlib.sha256(data).hexdigest()
    if (path, sha256) in _READ:
        return _READ[path, sha256]
    raw = plan_json.parse(path, data)
    if not isinstance(raw, dict) or raw.get("schema") not in SCHEMAS:
        raise PlanError(f"{path}: not a {' or '.join(SCHEMAS)} plan ($.schema)")
    plan_json.walk(path, raw)
    plan_json.validate(path, raw)
    r = _Reader(path)
    options = r.get(raw, "options", dict, "$")
    # The modes planned: v2's `chosen`, else (v1) the options, which then are what was planned.
    modes_path = "$.chosen" if raw["schema"] != "pulse.plan/v1" and "chosen" in raw \
        else "$.options"
    modes = r.get(raw, "chosen", dict, "$") if modes_path == "$.chosen" else options
    memory = r.get(modes, "memory", dict, modes_path, {})
    doc = PlanDoc(
        path=path, sha256=sha256,
        strategy=r.get(options, "strategy", str, "$.options"),
        split_backward=r.get(options, "split_backward", bool, "$.options", False),
        zero_stage=_zero_stage(r, memory, modes_path),
        parallelism=_parallelism(r, r.get(raw, "parallelism", dict, "$"), "$.parallelism"),
        stages=tuple(r.items(raw, "stages", "$", lambda n, w: _stage(r, n, w))),
        skips=tuple(r.items(raw, "skips", "$", lambda n, w: _skip(r, n, w))),
        carried=tuple(r.items(raw, "carried", "$", lambda n, w: _carried(r, n, w))),
        transfers=tuple(r.items(raw, "transfers", "$", lambda n, w: _transfer(r, n, w))),
        schedule=_schedule(r, raw),
        rank_map=_rank_map(r, r.get(raw, "rank_map", dict, "$"), "$.rank_map"),
        predicted=_prediction(r, r.get(raw, "predicted", dict, "$"), "$.predicted"),
        precision=_precision(r, memory, modes_path),
        recompute=_recompute(r, modes, modes_path),
        frozen=r.get(raw, "frozen", dict, "$", None),
        buckets=r.get(raw, "buckets", dict, "$", None),
        modes_path=modes_path)
    check(doc)
    _READ[(path, sha256)] = doc
    return doc


def _zero_stage(r: _Reader, memory: dict, where: str) -> int:
    zero = r.get(memory, "zero_stage", (int, type(None)), f"{where}.memory", 0)
    if zero is None:  # a v2 plan without `chosen`: --zero not given, the stage planned is 0
        return 0
    return zero


def _precision(r: _Reader, memory: dict, where: str) -> str:
    name = r.get(memory, "precision", str, f"{where}.memory", "mixed")
    if name not in PRECISIONS:
        raise PlanError(f"{r.path}: {where}.memory.precision: expected one of "
                        f"{list(PRECISIONS)}, got {name!r}")
    return name


def _recompute(r: _Reader, modes: dict, where: str) -> str:
    mode = r.get(modes, "recompute", str, where, "none")
    if mode not in ("none", "selective", "full"):  # "auto" is an option, never a mode planned
        raise PlanError(f"{r.path}: {where}.recompute: expected none, selective or full (the "
                        f"mode planned), got {mode!r}")
    return mode


def _parallelism(r: _Reader, node: dict, where: str) -> Parallelism:
    seq = r.get(node, "sequence", (dict, type(None)), where, None)
    sequence = None if seq is None else SequenceSpec(
        *(r.get(seq, k, int, f"{where}.sequence") for k in ("ulysses", "ring", "degree")))
    return Parallelism(*(r.get(node, k, int, where) for k in (
        "pp", "dp", "microbatch_size", "num_microbatches", "global_batch", "num_stages")),
        sequence=sequence)


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
        device = r.get(entry, "device", int, where)
        if device != i:
            raise PlanError(f"{r.path}: {where}.device: expected {i} (the schedule lists the "
                            f"pipeline devices in order), got {device}")
        ops = []
        for j, op in enumerate(r.get(entry, "ops", list, where)):
            w = f"{where}.ops[{j}]"
            kind = r.get(op, "op", str, w)
            if kind not in OPS:
                raise PlanError(f"{r.path}: {w}.op: expected one of {list(OPS)}, got {kind!r}")
            ops.append(OpSpec(kind, r.get(op, "stage", int, w), r.get(op, "mb", int, w),
                              r.get(op, "start_s", float, w, 0.0),
                              r.get(op, "end_s", float, w, 0.0)))
        schedule[device] = tuple(ops)
    return schedule


def _rank_map(r: _Reader, node: dict, where: str) -> RankMap:
    ranks = tuple(RankSpec(r.get(n, "rank", int, w), r.get(n, "dp_index", int, w),
                           r.get(n, "pipeline_device", int, w),
                           r.get(n, "local_device", int, w, 0))
                  for w, n in ((f"{where}.ranks[{i}]", n)
                               for i, n in enumerate(r.get(node, "ranks", list, where))))
    groups = {k: tuple(tuple(g) for g in r.get(node, k, list, where))
              for k in ("pipeline_groups", "data_parallel_groups")}
    sequence = r.get(node, "sequence_groups", (list, type(None)), where, None)
    return RankMap(r.get(node, "world_size", int, where), ranks, groups["pipeline_groups"],
                   groups["data_parallel_groups"],
                   None if sequence is None else tuple(tuple(g) for g in sequence))


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


# --- what the schema cannot say -----------------------------------------------------------------

# The planner's limits (include/pulse/base/limits.hpp), restated: no plan beyond them is one
# pulse-plan wrote, and each bounds what the checks below and the ranks allocate.
MAX_PIPELINE_DEGREE = 1024      # kMaxPipelineDegree
MAX_MICROBATCHES = 4096         # kMaxMicrobatches
MAX_MICROBATCH_SIZE = 1 << 20   # kMaxMicrobatchSize
MAX_GLOBAL_BATCH = 1 << 24      # kMaxGlobalBatch
MAX_STAGES = 16 * 1024          # kMaxStages
MAX_RANKS = 1 << 20             # kMaxRanks
MAX_OPS = 1 << 22               # kMaxOps


def check(doc: PlanDoc) -> None:
    """What the schema cannot say (module docstring, 3); the first problem as a PlanError."""
    c = _Check(doc)
    c.degrees()
    c.sequence()
    c.stages()
    c.skips_and_carried()
    c.transfers()
    c.schedule()
    c.order()
    c.rank_map()


def _short(values: Any) -> str:
    text = str(list(values))
    return text if len(text) <= 60 else text[:56] + "...]"


def _op_text(op: str, stage: int, mb: int) -> str:
    return f"{op}(stage {stage}, mb {mb})"


class _Check:
    def __init__(self, doc: PlanDoc) -> None:
        self.doc = doc
        par = doc.parallelism
        self.pp, self.dp, self.mbs = par.pp, par.dp, par.num_microbatches
        self.num_stages = par.num_stages
        self.kinds = ("F", "I", "W") if doc.split_backward else ("F", "B")
        self.layer_stage: dict[str, int] = {}
        self.layer_index: dict[str, int] = {}

    def fail(self, where: str, message: str) -> None:
        raise PlanError(f"{self.doc.path}: {where}: {message}")

    def degrees(self) -> None:
        par = self.doc.parallelism
        for key, limit in (("pp", MAX_PIPELINE_DEGREE), ("dp", MAX_RANKS),
                           ("microbatch_size", MAX_MICROBATCH_SIZE),
                           ("num_microbatches", MAX_MICROBATCHES),
                           ("global_batch", MAX_GLOBAL_BATCH), ("num_stages", MAX_STAGES)):
            value = getattr(par, key)
            if not 1 <= value <= limit:
                self.fail(f"$.parallelism.{key}", f"expected 1 to {limit} (the planner's "
                          f"limit), got {value}")
        if self.pp * self.dp > MAX_RANKS:
            self.fail("$.parallelism.dp", f"pp {self.pp} x dp {self.dp} is {self.pp * self.dp} "
                      f"ranks; a plan has at most {MAX_RANKS}")
        want = self.dp * self.mbs * par.microbatch_size
        if par.global_batch != want:
            self.fail("$.parallelism.global_batch", f"expected dp {self.dp} x num_microbatches "
                      f"{self.mbs} x microbatch_size {par.microbatch_size} = {want}, got "
                      f"{par.global_batch}")
        ops = self.num_stages * self.mbs * len(self.kinds)
        if ops > MAX_OPS:
            self.fail("$.parallelism.num_microbatches", f"num_stages {self.num_stages} x "
                      f"num_microbatches {self.mbs} x {len(self.kinds)} ops is {ops}; a plan "
                      f"has at most {MAX_OPS}")

    def stages(self) -> None:
        stages = self.doc.stages
        if len(stages) != self.num_stages:
            self.fail("$.stages", f"expected num_stages = {self.num_stages} stages "
                      f"($.parallelism.num_stages), got {len(stages)}")
        for i, stage in enumerate(stages):
            where = f"$.stages[{i}]"
            if stage.id != i:
                self.fail(f"{where}.id", f"expected {i} (stages are listed by id), got {stage.id}")
            if not 0 <= stage.device < self.pp:
                self.fail(f"{where}.device", f"expected a pipeline device 0 to {self.pp - 1} "
                          f"(pp {self.pp}), got {stage.device}")
            for j, name in enumerate(stage.layers):
                if name in self.layer_stage:
                    self.fail(f"{where}.layers[{j}]", f"layer {name!r} is in stage "
                              f"{self.layer_stage[name]} too")
                self.layer_stage[name] = i
                self.layer_index[name] = len(self.layer_index)
        idle = sorted(set(range(self.pp)) - {s.device for s in stages})
        if idle:
            self.fail("$.stages", f"pipeline device {idle[0]} runs no stage (every one of the "
                      f"pp {self.pp} runs at least one)")
        self.device = [s.device for s in stages]

    def skips_and_carried(self) -> None:
        pairs: dict[tuple[str, str], int] = {}
        names: dict[str, int] = {}
        for i, skip in enumerate(self.doc.skips):
            where = f"$.skips[{i}]"
            if skip.name in names:
                self.fail(f"{where}.name", f"skip {skip.name!r} is $.skips[{names[skip.name]}] "
                          f"too")
            names[skip.name] = i
            for end in ("producer", "consumer"):
                layer, stage = getattr(skip, end), getattr(skip, f"{end}_stage")
                if layer not in self.layer_stage:
                    self.fail(f"{where}.{end}", f"expected a layer of the plan's stages, got "
                              f"{layer!r}")
                if stage != self.layer_stage[layer]:
                    self.fail(f"{where}.{end}_stage", f"expected {self.layer_stage[layer]} (the "
                              f"stage of {layer!r}), got {stage}")
            if self.layer_index[skip.producer] >= self.layer_index[skip.consumer]:
                self.fail(where, f"producer {skip.producer!r} does not come before consumer "
                          f"{skip.consumer!r}")
            if (skip.producer, skip.consumer) in pairs:
                self.fail(where, f"the skip from {skip.producer!r} to {skip.consumer!r} is "
                          f"$.skips[{pairs[skip.producer, skip.consumer]}] too")
            pairs[(skip.producer, skip.consumer)] = i
            if skip.route not in ("local", "direct", "forwarded"):
                self.fail(f"{where}.route", f"expected one of ['local', 'direct', "
                          f"'forwarded'], got {skip.route!r}")
            ends = (self.device[skip.producer_stage], self.device[skip.consumer_stage])
            if skip.route == "local" and ends[0] != ends[1]:
                self.fail(f"{where}.route", f"a local skip, but stages {skip.producer_stage} "
                          f"and {skip.consumer_stage} run on devices {ends[0]} and {ends[1]}")
        seen: dict[str, int] = {}
        for i, carried in enumerate(self.doc.carried):
            where = f"$.carried[{i}]"
            if carried.name in seen:
                self.fail(f"{where}.name", f"carried tensor {carried.name!r} is "
                          f"$.carried[{seen[carried.name]}] too")
            seen[carried.name] = i
            if carried.producer is not None and carried.producer not in self.layer_stage:
                self.fail(f"{where}.producer", f"expected a layer of the plan's stages or null, "
                          f"got {carried.producer!r}")

    def transfers(self) -> None:
        skips = {s.name for s in self.doc.skips}
        carried = {c.name for c in self.doc.carried}
        main: dict[int, int] = {}
        for i, t in enumerate(self.doc.transfers):
            where = f"$.transfers[{i}]"
            for key in ("from_stage", "to_stage"):
                if not 0 <= getattr(t, key) < self.num_stages:
                    self.fail(f"{where}.{key}", f"expected a stage 0 to {self.num_stages - 1}, "
                              f"got {getattr(t, key)}")
            for key, stage in (("from_device", t.from_stage), ("to_device", t.to_stage)):
                if getattr(t, key) != self.device[stage]:
                    self.fail(f"{where}.{key}", f"expected {self.device[stage]} (stage "
                              f"{stage}'s device), got {getattr(t, key)}")
            if t.from_device == t.to_device:
                self.fail(where, f"stages {t.from_stage} and {t.to_stage} run on one device, "
                          f"{t.from_device}: a transfer moves values between two")
            if t.kind not in ("main", "skip"):
                self.fail(f"{where}.kind", f"expected one of ['main', 'skip'], got {t.kind!r}")
            if t.kind == "main" and t.to_stage != t.from_stage + 1:
                self.fail(f"{where}.to_stage", f"expected {t.from_stage + 1} (a main transfer "
                          f"links consecutive stages), got {t.to_stage}")
            if t.kind == "skip" and t.to_stage <= t.from_stage:
                self.fail(f"{where}.to_stage", f"expected a stage after {t.from_stage}, got "
                          f"{t.to_stage}")
            if t.kind == "main" and t.from_stage in main:
                self.fail(where, f"a second main transfer after stage {t.from_stage} (the first "
                          f"is $.transfers[{main[t.from_stage]}])")
            if t.kind == "main":
                main[t.from_stage] = i
            for key, names in (("skips", skips), ("carried", carried)):
                for j, name in enumerate(getattr(t, key) or ()):
                    if name not in names:
                        self.fail(f"{where}.{key}[{j}]", f"expected a name of $.{key}, got "
                                  f"{name!r}")
        for s in range(self.num_stages - 1):
            if self.device[s] != self.device[s + 1] and s not in main:
                self.fail("$.transfers", f"no main transfer after stage {s} (stages {s} and "
                          f"{s + 1} run on devices {self.device[s]} and {self.device[s + 1]})")
        for i, skip in enumerate(self.doc.skips):
            to = self.device[skip.consumer_stage]
            if self.device[skip.producer_stage] != to and not any(
                    skip.name in t.skips and t.to_device == to for t in self.doc.transfers):
                self.fail(f"$.skips[{i}]", f"skip {skip.name!r} goes from device "
                          f"{self.device[skip.producer_stage]} to {to}, but no transfer to "
                          f"device {to} lists it")

    def schedule(self) -> None:
        if len(self.doc.schedule) != self.pp:
            self.fail("$.schedule", f"expected pp = {self.pp} devices, got "
                      f"{len(self.doc.schedule)}")
        listed: dict[tuple[str, int, int], str] = {}
        for d, ops in self.doc.schedule.items():
            for k, op in enumerate(ops):
                where = f"$.schedule[{d}].ops[{k}]"
                if op.op not in self.kinds:
                    self.fail(f"{where}.op", f"expected one of {list(self.kinds)} (the plan "
                              f"{'splits' if len(self.kinds) == 3 else 'does not split'} "
                              f"backward, $.options.split_backward), got {op.op!r}")
                if not 0 <= op.stage < self.num_stages:
                    self.fail(f"{where}.stage", f"expected a stage 0 to "
                              f"{self.num_stages - 1}, got {op.stage}")
                if not 0 <= op.mb < self.mbs:
                    self.fail(f"{where}.mb", f"expected a microbatch 0 to {self.mbs - 1}, got "
                              f"{op.mb}")
                text = _op_text(op.op, op.stage, op.mb)
                if self.device[op.stage] != d:
                    self.fail(where, f"{text} is on device {d}, but stage {op.stage} runs on "
                              f"device {self.device[op.stage]}")
                key = (op.op, op.stage, op.mb)
                if key in listed:
                    self.fail(where, f"{text} is listed twice (first at {listed[key]})")
                listed[key] = where
        if len(listed) < self.num_stages * self.mbs * len(self.kinds):
            for s in range(self.num_stages):
                for mb in range(self.mbs):
                    for op in self.kinds:
                        if (op, s, mb) not in listed:
                            self.fail(f"$.schedule[{self.device[s]}].ops", f"{_op_text(op, s, mb)} "
                                      f"is missing (every stage runs {', '.join(self.kinds)} for "
                                      f"every microbatch)")

    def needs(self, op: str, stage: int, mb: int) -> tuple[str, int, int] | None:
        """The op that must have run before this one. Every value a rank waits for comes
        down this chain: F(s) after F(s - 1), the last stage's backward after its F, a
        backward (B or I) after the next stage's, W after its I."""
        if op == "F":
            return ("F", stage - 1, mb) if stage > 0 else None
        if op == "W":
            return ("I", stage, mb)
        if stage == self.num_stages - 1:
            return ("F", stage, mb)
        return (op, stage + 1, mb)

    def order(self) -> None:
        """The ranks run their ops in the listed order; a run in which every rank waits for
        another (or for an op listed later on its own device) is refused."""
        schedule = self.doc.schedule
        at = [0] * self.pp
        done: set[tuple[str, int, int]] = set()
        waiting: dict[tuple[str, int, int], list[int]] = {}
        ready = list(range(self.pp))
        while ready:
            d = ready.pop()
            ops = schedule[d]
            while at[d] < len(ops):
                op = ops[at[d]]
                need = self.needs(op.op, op.stage, op.mb)
                if need is not None and need not in done:
                    waiting.setdefault(need, []).append(d)
                    break
                key = (op.op, op.stage, op.mb)
                done.add(key)
                at[d] += 1
                ready.extend(waiting.pop(key, ()))
        stuck = next((d for d in range(self.pp) if at[d] < len(schedule[d])), None)
        if stuck is None:
            return
        op = schedule[stuck][at[stuck]]
        need = self.needs(op.op, op.stage, op.mb)
        assert need is not None
        other = self.device[need[1]]
        self.fail(f"$.schedule[{stuck}].ops[{at[stuck]}]",
                  f"{_op_text(op.op, op.stage, op.mb)} needs {_op_text(*need)} first, which "
                  + ("is listed after it on this device" if other == stuck else
                     f"device {other} reaches only after ops that wait for this one") +
                  ": the ranks would wait forever")

    def sequence(self) -> None:
        """parallelism.sequence: degree = ulysses x ring, processes within the limit."""
        seq = self.doc.parallelism.sequence
        if seq is None:
            return
        if seq.ulysses < 1 or seq.ring < 1 or seq.degree != seq.ulysses * seq.ring:
            self.fail("$.parallelism.sequence", f"expected ulysses >= 1, ring >= 1 and degree "
                      f"= ulysses x ring, got {seq.ulysses}, {seq.ring} and {seq.degree}")
        if self.pp * self.dp * seq.degree > MAX_RANKS:
            self.fail("$.parallelism.sequence.degree", f"pp {self.pp} x dp {self.dp} x degree "
                      f"{seq.degree} processes; a plan has at most {MAX_RANKS}")

    def sequence_groups(self, at: dict[tuple[int, int], int]) -> None:
        """With a sequence degree s: one group per rank (dp_index * pp + pipeline device
        order), the s processes from that rank on; without, none."""
        groups, s = self.doc.rank_map.sequence_groups, self.doc.sequence_degree
        if self.doc.parallelism.sequence is None:
            if groups is not None:
                self.fail("$.rank_map.sequence_groups", "expected none without "
                          "$.parallelism.sequence")
            return
        if groups is None:
            self.fail("$.rank_map", "expected sequence_groups with $.parallelism.sequence")
        assert groups is not None
        world = self.pp * self.dp
        if len(groups) != world:
            self.fail("$.rank_map.sequence_groups", f"expected world_size = {world} groups "
                      f"(one per dp_index and pipeline device), got {len(groups)}")
        for g, group in enumerate(groups):
            first = at[(g // self.pp, g % self.pp)]
            want = list(range(first, first + s))
            if list(group) != want:
                self.fail(f"$.rank_map.sequence_groups[{g}]", f"expected {_short(want)} (the "
                          f"{s} processes from rank {first}, degree "
                          f"$.parallelism.sequence.degree), got {_short(group)}")

    def rank_map(self) -> None:
        rank_map, world = self.doc.rank_map, self.pp * self.dp
        s = self.doc.sequence_degree  # each rank of the map: s processes from it on
        if rank_map.world_size != world:
            self.fail("$.rank_map.world_size", f"expected pp {self.pp} x dp {self.dp} = "
                      f"{world}, got {rank_map.world_size}")
        if len(rank_map.ranks) != world:
            self.fail("$.rank_map.ranks", f"expected world_size = {world} ranks, got "
                      f"{len(rank_map.ranks)}")
        at: dict[tuple[int, int], int] = {}
        seen: dict[int, int] = {}
        for i, r in enumerate(rank_map.ranks):
            where = f"$.rank_map.ranks[{i}]"
            if not 0 <= r.rank < world * s or r.rank % s:
                self.fail(f"{where}.rank", f"expected a rank 0 to {world - 1} (the runtime "
                          f"numbers its world_size processes so), got {r.rank}" if s == 1 else
                          f"expected a multiple of the sequence degree {s} below {world * s} "
                          f"(the runtime numbers its world_size x {s} processes so), got "
                          f"{r.rank}")
            if r.rank in seen:
                self.fail(f"{where}.rank", f"rank {r.rank} is $.rank_map.ranks[{seen[r.rank]}] "
                          f"too")
            seen[r.rank] = i
            for key, degree in (("dp_index", self.dp), ("pipeline_device", self.pp)):
                if not 0 <= getattr(r, key) < degree:
                    self.fail(f"{where}.{key}", f"expected 0 to {degree - 1}, got "
                              f"{getattr(r, key)}")
            if (r.dp_index, r.pipeline_device) in at:
                self.fail(where, f"dp_index {r.dp_index}, pipeline_device {r.pipeline_device} "
                          f"is rank {at[r.dp_index, r.pipeline_device]} too")
            at[(r.dp_index, r.pipeline_device)] = r.rank
        for key, groups, outer, inner, by_replica in (
                ("pipeline_groups", rank_map.pipeline_groups, self.dp, self.pp, True),
                ("data_parallel_groups", rank_map.data_parallel_groups, self.pp, self.dp, False)):
            if len(groups) != outer:
                self.fail(f"$.rank_map.{key}", f"expected {outer} groups, got {len(groups)}")
            for i, group in enumerate(groups):
                want = [at[(i, j) if by_replica else (j, i)] for j in range(inner)]
                if list(group) != want:
                    self.fail(f"$.rank_map.{key}[{i}]", f"expected {_short(want)} (the ranks "
                              f"ranks[] puts there), got {_short(group)}")
        self.sequence_groups(at)
