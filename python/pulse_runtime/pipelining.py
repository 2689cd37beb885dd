"""Plans on PyTorch's own pipelining runtime (torch.distributed.pipelining, PyTorch 2.6+).

`build(plan, model, csv_path, ...)` gives one rank what it needs to train by a pulse plan with
`_PipelineScheduleRuntime`: a `PipelineStage` per stage of its pipeline device (both stages of
its V, or all of its waves), the schedule loaded from the plan's torch-csv export, and a
rank-local cache for the values PipelineStage cannot carry (issues #127964 and #128665 of
pytorch/pytorch): skip tensors, and carried tensors such as a timestep embedding.

What PipelineStage moves is the tuple a stage returns: the main-path tensor, followed by the
carried tensors the plan sends over that boundary (`transfers[].carried`, or the planner's
rule when the plan does not list them) and any skip whose consumer is on another rank (such a
skip is relayed with the main path, boundary by boundary, until it reaches the consumer's
rank). Everything else stays on the rank, in the cache:

- a producer stage stores each value a later stage of its rank reads (`_Join`, below), keyed
  by (value, microbatch); the consumer stage takes it through `_Import`, which hangs on the
  consumer's main input, so that its backward runs in the consumer's B or I even when
  PipelineStage asks autograd for the input gradients only;
- `_Import`'s backward adds the gradient to the cache; the producer's `_Join` node takes it
  out in the producer's backward and hands it to the value's own graph, as torchgpipe's
  portals do. A valid plan runs the consumer's B (or I) of a microbatch before the producer's,
  so the gradient is always there in time.

Stage-to-rank mapping: the torch-csv export writes row g for the process of group rank g
(`new_group` sorts its ranks), and `_load_csv` infers every stage's group rank from the rows;
`build` checks that this equals the plan's placement and gives the V (or wave) map to every
stage. Same-rank neighbours (the bottom of the V) hand over locally: `_PipelineScheduleRuntime`
adds no SEND/RECV between them, and the stages here leave out PipelineStage's warm-up
messages to their own rank (`_get_init_p2p_neighbors_ops`), which gloo refuses.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.distributed as dist

from . import blocklist, comm
from .plan import Plan

MIN_TORCH = (2, 6)

Key = tuple[str, str, int]  # (kind, name, microbatch)


class PipeliningUnavailable(RuntimeError):
    """This PyTorch has no `_PipelineScheduleRuntime` (it needs 2.6 or later)."""


def torch_version() -> tuple[int, int]:
    """(major, minor) of the installed PyTorch ("2.11.0+cu130" -> (2, 11))."""
    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def require_pipelining() -> Any:
    """torch.distributed.pipelining.schedules, or PipeliningUnavailable saying why not."""
    if torch_version() < MIN_TORCH:
        raise PipeliningUnavailable(
            f"PyTorch {torch.__version__} has no torch.distributed.pipelining "
            f"_PipelineScheduleRuntime (it needs PyTorch {MIN_TORCH[0]}.{MIN_TORCH[1]} or "
            f"later); pulse-run (python -m pulse_runtime) runs the same plans on this PyTorch")
    try:
        from torch.distributed.pipelining import schedules
        getattr(schedules, "_PipelineScheduleRuntime")
    except (ImportError, AttributeError) as e:
        raise PipeliningUnavailable(f"PyTorch {torch.__version__}: "
                                    f"torch.distributed.pipelining is not usable ({e})") from None
    return schedules


# --- the rank-local cache and its two autograd functions --------------------------------------

@dataclass
class RankContext:
    """State the stages of one rank share during an iteration."""
    microbatches: list[dict[str, torch.Tensor]] = field(default_factory=list)
    mb: int = 0                                          # the microbatch being forwarded
    in_chunk: bool = False  # inside forward_one_chunk (not PipelineStage's shape inference)
    # (kind, name) -> (shape, dtype) of a microbatch's value, for shape inference's dry run
    shapes: dict[tuple[str, str], tuple[tuple[int, ...], torch.dtype]] = field(
        default_factory=dict)
    device: Any = "cpu"
    values: dict[Key, torch.Tensor] = field(default_factory=dict)
    grads: dict[Key, torch.Tensor] = field(default_factory=dict)
    taken: set[Key] = field(default_factory=set)  # gradients a producer has used

    def clear(self) -> None:
        self.values.clear()
        self.grads.clear()
        self.taken.clear()

    def value(self, key: Key) -> torch.Tensor:
        """The stored value; during PipelineStage's own shape inference (a PyTorch whose
        PipelineStage takes no input_args/output_args), zeros of its shape."""
        if key in self.values:
            return self.values[key]
        if not self.in_chunk and key[:2] in self.shapes:
            shape, dtype = self.shapes[key[:2]]
            return torch.zeros(shape, dtype=dtype, device=self.device)
        raise KeyError(f"{key[0]} {key[1]!r} of microbatch {key[2]} is read before the stage "
                       f"that makes it ran (is the CSV this plan's export?)")

    def unused_gradients(self) -> list[Key]:
        """Gradients deposited by a consumer that no producer's backward took (a schedule
        that ran a producer's backward before its consumer's would leave them)."""
        return sorted(set(self.grads) - self.taken)


class _Import(torch.autograd.Function):
    """Values stored by an earlier stage of this rank, hung on this stage's main input so
    that their gradients are computed whenever the input's is."""

    @staticmethod
    def forward(ctx: Any, rank: RankContext, keys: tuple[Key, ...],
                anchor: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.rank, ctx.keys = rank, keys
        return tuple(rank.value(k).detach() for k in keys)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[None, None, None]:
        for key, g in zip(ctx.keys, grads):
            if g is not None:
                have = ctx.rank.grads.get(key)
                ctx.rank.grads[key] = g if have is None else have + g
        return None, None, None


class _Join(torch.autograd.Function):
    """A stage's outputs, each given its own node; stores the values later stages of this
    rank import, and in the backward feeds them the gradients those stages left in the cache.
    The stage's inputs are joined too (zero gradient), so every input PipelineStage received
    gets a gradient to send back, as it requires. The backward reads the cache without
    emptying it: a weight pass (W) that walks this node again gets the same gradients."""

    @staticmethod
    def forward(ctx: Any, rank: RankContext, keys: tuple[Key, ...], n_out: int,
                n_export: int, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.rank, ctx.keys, ctx.n_out, ctx.n_export = rank, keys, n_out, n_export
        ctx.anchors = [(t.shape, t.dtype, t.device) for t in tensors[n_out + n_export:]]
        exports = tensors[n_out:n_out + n_export]
        for key, value in zip(keys, exports):
            rank.values[key] = value.detach()
        return tuple(_standard_strides(t.detach()) for t in tensors[:n_out])

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[Any, ...]:
        cached = [ctx.rank.grads.get(k) for k in ctx.keys]
        ctx.rank.taken.update(ctx.keys)
        zeros = [torch.zeros(shape, dtype=dtype, device=device)
                 for shape, dtype, device in ctx.anchors]
        return (None, None, None, None, *grads, *cached, *zeros)


def _standard_strides(t: torch.Tensor) -> torch.Tensor:
    """t with row-major strides: PipelineStage compares a stage's outputs with their meta
    tensors stride by stride, and `contiguous()` keeps odd strides of size-1 dimensions."""
    want, step = [], 1
    for size in reversed(t.shape):
        want.append(step)
        step *= max(size, 1)
    if list(t.stride()) == want[::-1]:
        return t
    return t.clone(memory_format=torch.contiguous_format)


# --- what crosses each boundary ---------------------------------------------------------------

@dataclass(frozen=True)
class Value:
    kind: str        # skip | carried
    name: str
    producer: int    # stage
    last_use: int    # the stage that last needs it (a skip's consumer; carried: the last)


class Layout:
    """For every stage: what it receives, imports, exports and returns (module docstring)."""

    def __init__(self, plan: Plan, stage_rank: list[int]) -> None:
        self.plan, self.rank_of = plan, stage_rank
        idx = blocklist.block_index(plan.model)
        stage_of = {}
        for s, (first, last) in enumerate(plan.stage_range):
            for b in range(first, last + 1):
                stage_of[b] = s
        last = len(plan.stages) - 1
        self.values = [Value("skip", sk["name"], stage_of[idx[sk["producer"]]],
                             stage_of[idx[sk["consumer"]]]) for sk in plan.model.skips]
        self.values = [v for v in self.values if v.producer != v.last_use]
        self.values += [Value("carried", c["name"], stage_of[idx[c["producer"]]], last)
                        for c in plan.model.carried if c["producer"] is not None]
        self.carried_plan = {s: {c.name for c in plan.carried_crossing(s)}
                             for s in range(last) if self.rank_of[s] != self.rank_of[s + 1]}

    def _held(self, v: Value, s: int) -> bool:
        """Whether the rank of stage s has v from an earlier stage (it produced or got it)."""
        return any(self.rank_of[e] == self.rank_of[s] for e in range(v.producer, s))

    def crosses(self, v: Value, s: int) -> bool:
        """v is in the tuple stage s returns (s -> s+1 on another rank)."""
        if s + 1 >= len(self.rank_of) or self.rank_of[s] == self.rank_of[s + 1]:
            return False
        if v.kind == "carried":
            return v.name in self.carried_plan.get(s, set())
        return v.producer <= s < v.last_use and not self._held(v, s + 1)

    def boundary(self, s: int) -> list[Value]:
        """The values after the main tensor in what stage s returns."""
        return [v for v in self.values if self.crosses(v, s)]

    def imports(self, s: int) -> list[Value]:
        """Values stage s reads from its rank's cache."""
        received = set(self.boundary(s - 1)) if s > 0 else set()
        return [v for v in self.values if v.producer < s <= v.last_use
                and v not in received and self._held(v, s)
                and (v.kind == "carried" or v.last_use == s or self.crosses(v, s))]

    def exports(self, s: int) -> list[Value]:
        """Values stage s stores for later stages of its rank: it is their source there."""
        received = set(self.boundary(s - 1)) if s > 0 else set()
        out = []
        for v in self.values:
            source = v.producer == s or v in received
            later = any(self.rank_of[e] == self.rank_of[s] and v in self.imports(e)
                        for e in range(s + 1, v.last_use + 1))
            if source and later:
                out.append(v)
        return out


# --- a stage ----------------------------------------------------------------------------------

class StageModule(torch.nn.Module):
    """Stage s of a block-list model as PipelineStage calls it: `forward(main, *boundary)`
    returns `(main, *boundary of s)` (the last stage: the model output)."""

    def __init__(self, plan: Plan, layout: Layout, s: int, rank: RankContext) -> None:
        super().__init__()
        self.stage = blocklist.BlockRange(plan.model, *plan.stage_range[s],
                                          recomputed=plan.stages[s].recomputed)
        self.blocks = torch.nn.ModuleList(plan.model.blocks[plan.stage_range[s][0]:
                                                            plan.stage_range[s][1] + 1])
        self.s, self.rank = s, rank  # (the whole model is no submodule: FSDP would shard it)
        self.received = layout.boundary(s - 1) if s > 0 else []
        self.imported = layout.imports(s)
        self.exported = layout.exports(s)
        self.returned = layout.boundary(s)
        self.last = s == len(plan.stages) - 1

    def forward(self, h: torch.Tensor, *received: torch.Tensor) -> Any:
        mb = self.rank.mb
        env: dict[str, Any] = dict(self.rank.microbatches[mb])
        env.update((v.name, t) for v, t in zip(self.received, received))
        keys = tuple((v.kind, v.name, mb) for v in self.imported)
        if keys:
            env.update((v.name, t) for v, t in zip(self.imported,
                                                   _Import.apply(self.rank, keys, h)))
        out, produced = self.stage.forward(h, env)
        env.update(produced)
        if self.last:
            outs = [out]
        else:
            outs = [out] + [env[v.name] for v in self.returned]
        exports = [env[v.name] for v in self.exported]
        anchors = [t for t in (h, *received) if t.requires_grad]
        joined = _Join.apply(self.rank, tuple((v.kind, v.name, mb) for v in self.exported),
                             len(outs), len(exports), *outs, *exports, *anchors)
        return joined[0] if self.last else tuple(joined)


def make_stage_class(base: type) -> type:
    """A PipelineStage that knows the microbatch it forwards and sends no warm-up message to
    its own rank (base: torch.distributed.pipelining.PipelineStage)."""

    class PulseStage(base):  # type: ignore[misc, valid-type]
        rank_context: RankContext

        def forward_one_chunk(self, fwd_chunk_id: int, *args: Any, **kwargs: Any) -> Any:
            self.rank_context.mb, self.rank_context.in_chunk = fwd_chunk_id, True
            try:
                return super().forward_one_chunk(fwd_chunk_id, *args, **kwargs)
            finally:
                self.rank_context.in_chunk = False

        def _get_init_p2p_neighbors_ops(self) -> list[Any]:
            ops = []
            me = self.group_rank
            for peer_stage in (self.stage_index - 1, self.stage_index + 1):
                peer = self.stage_index_to_group_rank.get(peer_stage)
                if peer is None or peer == me:
                    continue
                peer_global = peer if self.group is None else dist.get_global_rank(self.group,
                                                                                  peer)
                for op in (dist.irecv, dist.isend):
                    ops.append(dist.P2POp(op, torch.zeros(1, device=self.device), peer_global,
                                          self.group))
            return ops

    return PulseStage


# --- one rank ---------------------------------------------------------------------------------

@dataclass
class RankPipeline:
    """What `build` gives one rank: its stages, the schedule, the shared context."""
    schedule: Any
    stages: list[Any]
    modules: dict[int, StageModule]
    context: RankContext
    plan: Plan
    replica: int
    group_rank: int
    first: bool = False   # holds stage 0
    last: bool = False    # holds the last stage

    def parameters(self) -> list[torch.nn.Parameter]:
        return [p for m in self.modules.values() for p in m.parameters()]

    def step(self, global_batch: dict[str, torch.Tensor]) -> float:
        """One iteration's forwards and backwards on this rank's replica share of the batch;
        returns the sum of its microbatch losses (the last stage's rank; else 0)."""
        plan, ctx = self.plan, self.context
        b, m = plan.microbatch_size, plan.num_microbatches
        first = self.replica * m * b
        ctx.clear()
        ctx.microbatches = [{k: v[first + i * b:first + (i + 1) * b]
                             for k, v in global_batch.items()} for i in range(m)]
        share = {k: v[first:first + m * b] for k, v in global_batch.items()}
        x = plan.model.first_input(share)
        target = torch.arange(m, device=x.device)
        losses: list[torch.Tensor] = []
        self.schedule.step(x, target=target, losses=losses)
        if ctx.unused_gradients():
            raise RuntimeError(f"gradients left in the rank-local cache: "
                               f"{ctx.unused_gradients()[:4]}")
        ctx.clear()
        return float(sum(loss.item() for loss in losses))


def group_rank_of_device(plan: Plan, replica: int) -> list[int]:
    """Pipeline device -> group rank in its pipeline group (new_group sorts the ranks)."""
    group = plan.pipeline_ranks(replica)
    order = sorted(group)
    return [order.index(r) for r in group]


def stage_meta(plan: Plan, shapes: comm.Shapes, layout: Layout, s: int, device: Any
               ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """(input_args, output_args) of stage s as meta tensors, so PipelineStage skips its
    shape inference (which would run a stage before the cache holds its imports). A
    floating-point value between stages requires grad: PipelineStage (PyTorch 2.13) gives a
    received activation `requires_grad` from its meta tensor, and without it no gradient would
    go back."""
    stage_last = [last for _, last in plan.stage_range]

    def meta(key: tuple[str, Any]) -> torch.Tensor:
        shape, dtype = shapes.of(key, stage_last)
        return torch.empty(shape, dtype=dtype, device="meta",
                           requires_grad=dtype.is_floating_point)

    if s == 0:
        batch = plan.model.make_batch(plan.microbatch_size, seed=0, device=device)
        x = plan.model.first_input(batch)
        inputs = (torch.empty(x.shape, dtype=x.dtype, device="meta"),)
    else:
        inputs = (meta(("main", s - 1)),) + tuple(meta((v.kind, v.name))
                                                 for v in layout.boundary(s - 1))
    outputs = (meta(("main", s)),) + tuple(meta((v.kind, v.name)) for v in layout.boundary(s))
    return inputs, (outputs[:1] if s == len(plan.stages) - 1 else outputs)


def build(plan: Plan, csv_path: str, rank: int, device: Any,
          pipeline_group: Any = None, shard: Callable[[StageModule], None] | None = None
          ) -> RankPipeline:
    """The stages of `rank`'s pipeline device and `_PipelineScheduleRuntime` loaded from
    `csv_path` (`pulse-plan export PLAN --format torch-csv`). The process group must be up;
    `pipeline_group` is this rank's pipeline group (None: the default group, dp 1). `shard`,
    when given, is applied to every stage module before PipelineStage wraps it (ZeRO-2/3:
    sharding.shard_stage; PipelineStage and the runtime then drive FSDP themselves: no
    gradient sync per microbatch, UNSHARD/RESHARD and one REDUCE_GRAD per stage)."""
    schedules = require_pipelining()
    from torch.distributed.pipelining import PipelineStage
    info = plan.rank_info(rank)
    device_rank = group_rank_of_device(plan, info.dp_index)
    stage_rank = [device_rank[d] for d in plan.stage_device]
    layout = Layout(plan, stage_rank)
    shapes = comm.Shapes(plan.model, plan.microbatch_size, device)
    stage_last = [last for _, last in plan.stage_range]
    ctx = RankContext(shapes={(v.kind, v.name): shapes.of((v.kind, v.name), stage_last)
                              for v in layout.values}, device=device)
    stage_class = make_stage_class(PipelineStage)
    # PipelineStage has taken input_args/output_args since PyTorch 2.4; without them it infers
    # the shapes itself by a dry run (RankContext.value serves that run).
    hints = {"input_args", "output_args"} <= set(inspect.signature(PipelineStage).parameters)
    modules, stages = {}, []
    for s in plan.stages_on(info.pipeline_device):
        modules[s] = StageModule(plan, layout, s, ctx).to(device)
        if shard is not None:
            shard(modules[s])
        inputs, outputs = stage_meta(plan, shapes, layout, s, device)
        extra = {"input_args": inputs, "output_args": outputs} if hints else {}
        stage = stage_class(modules[s], s, len(plan.stages), device, group=pipeline_group,
                            **extra)
        stage.rank_context = ctx
        stages.append(stage)
    schedule = make_schedule(schedules, stages, plan, ctx)
    schedule._load_csv(csv_path, format="compute_only")
    check_mapping(schedule, stage_rank, csv_path)
    for stage in stages:
        stage.stage_index_to_group_rank = dict(enumerate(stage_rank))
    return RankPipeline(schedule, stages, modules, ctx, plan, info.dp_index,
                        device_rank[info.pipeline_device], first=0 in modules,
                        last=len(plan.stages) - 1 in modules)


def make_schedule(schedules: Any, stages: list[Any], plan: Plan, ctx: RankContext) -> Any:
    """`_PipelineScheduleRuntime` whose loss is the model's loss_sum over the global batch;
    the target passed to step() is the microbatch index, which finds the microbatch's batch.
    Gradients are not rescaled by the schedule (the loss already divides by the batch)."""
    model, global_batch = plan.model, plan.global_batch

    def loss_fn(out: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return model.loss_sum(out, ctx.microbatches[int(index.reshape(-1)[0])]) / global_batch

    runtime = schedules._PipelineScheduleRuntime
    kwargs: dict[str, Any] = {"loss_fn": loss_fn}
    if "scale_grads" in inspect.signature(runtime.__init__).parameters or \
            "scale_grads" in inspect.signature(schedules.PipelineScheduleMulti.__init__).parameters:
        kwargs["scale_grads"] = False
    return runtime(stages, plan.num_microbatches, **kwargs)


def check_mapping(schedule: Any, stage_rank: list[int], csv_path: str) -> None:
    """The stage -> group rank map PyTorch inferred from the CSV must be the plan's."""
    got = dict(getattr(schedule, "stage_index_to_group_rank", {}))
    want = dict(enumerate(stage_rank))
    if got != want:
        raise ValueError(f"{csv_path}: the schedule places stages on group ranks {got}, the plan "
                         f"on {want} (was the CSV exported from this plan?)")
