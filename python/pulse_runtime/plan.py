"""A plan bound to a model: what one rank needs (its stages' layer ranges, its op list, the
messages it sends and receives, the process groups).

The plan itself is read once into typed records (plan_doc.py). Message contents follow the
planner's transfer model (src/cost/pipeline_model.cpp):
- a `main` transfer between consecutive stages s -> s+1 on different devices carries the
  main-path output of stage s, the carried tensors the receiving device does not hold yet,
  and (route `forwarded`) the skips the plan lists for that boundary; its backward message
  carries their gradients (carried ones only when `needs_gradient`);
- a `skip` transfer (route `direct`) carries the listed skips from the producer stage to the
  consumer stage, and their gradients back.
A forward message is sent when F(from_stage) ends and awaited before F(to_stage) starts; the
backward message is sent when B(to_stage) ends and awaited before B(from_stage) starts. With
split backward, I (input gradients) takes B's place for messages and W sends nothing, as in
the planner's engine.

Which carried tensors a main transfer moves is read from `transfers[].carried` when the plan
lists it. Plans written without that key get the planner's rule, restated here
(`_rule_carried`) and checked against the plan's own carried bytes of every transfer
(`check_bytes`), so a difference between the two is an error, not a silent mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from . import blocklist
from .plan_doc import CarriedSpec, PlanDoc, PlanError, RankSpec, read_plan

__all__ = ["BYTE_KIND", "Item", "Message", "Plan", "PlanError", "Sizes"]

# The plan's byte kinds, by store-key kind.
BYTE_KIND = {"main": "activation", "skip": "skip", "carried": "carried"}

StoreKey = tuple[str, Any]  # (kind, name): ("main", stage) | ("skip", name) | ("carried", name)


class Sizes(Protocol):
    """Per-sample bytes of the values that cross stages (comm.Shapes is one)."""

    def skip_bytes(self, name: str) -> int: ...

    def carried_bytes(self, name: str) -> int: ...

    def main_bytes(self, block: int) -> int: ...


@dataclass(frozen=True)
class Item:
    """One tensor of a message: its store key (kind, name) and the byte kind it counts as."""
    kind: str          # main | skip | carried
    name: Any          # stage id for main, tensor name otherwise

    @property
    def key(self) -> StoreKey:
        return (self.kind, self.name)

    @property
    def byte_kind(self) -> str:
        return BYTE_KIND[self.kind]


@dataclass
class Message:
    id: int
    transfer: int             # index into the plan's transfers[]
    direction: str            # F or B
    src: int                  # pipeline devices
    dst: int
    send_after: tuple[str, int]   # (op, stage) whose end triggers the send
    recv_before: tuple[str, int]  # (op, stage) that waits for it
    items: list[Item] = field(default_factory=list)


Op = tuple[str, int, int]  # (op, stage, mb)


class Plan:
    """A PlanDoc checked against a block-list model (layer names and order, skip pairs,
    carried tensors), with the messages every device sends."""

    def __init__(self, doc: PlanDoc, model: Any) -> None:
        self.doc, self.model = doc, model
        self.path, self.sha256 = doc.path, doc.sha256
        par = doc.parallelism
        self.pp, self.dp = par.pp, par.dp
        self.microbatch_size = par.microbatch_size
        self.num_microbatches = par.num_microbatches
        self.global_batch = par.global_batch
        self.stages = doc.stages
        self.stage_device = doc.stage_device
        self._check_against_model()
        self.schedule: dict[int, list[Op]] = {
            d: [(o.op, o.stage, o.mb) for o in ops] for d, ops in doc.schedule.items()}
        self.messages = self._build_messages()

    @classmethod
    def load(cls, path: str, model: Any) -> Plan:
        return cls(read_plan(path), model)

    # --- checks --------------------------------------------------------------------------

    def _check_against_model(self) -> None:
        names = [n for s in self.stages for n in s.layers]
        model_names = list(self.model.block_names)
        if names != model_names:
            missing = [n for n in model_names if n not in names]
            unknown = [n for n in names if n not in model_names]
            detail = (f"layers the model lacks: {unknown[:5]}; " if unknown else "") + \
                (f"model layers in no stage: {missing[:5]}; " if missing else "")
            raise PlanError(f"{self.path}: the plan's stages do not list the model's "
                            f"{len(model_names)} layers in order ({detail or 'order differs; '}"
                            f"plan {names[:4]}..., model {model_names[:4]}...)")
        idx = blocklist.block_index(self.model)
        self.stage_range = [(idx[s.layers[0]], idx[s.layers[-1]]) for s in self.stages]
        plan_skips = {(s.producer, s.consumer): s for s in self.doc.skips}
        model_skips = {(s["producer"], s["consumer"]): s for s in self.model.skips}
        if set(plan_skips) != set(model_skips):
            raise PlanError(f"{self.path}: skip pairs differ from the model's: only in the "
                            f"plan {sorted(set(plan_skips) - set(model_skips))}, only in the "
                            f"model {sorted(set(model_skips) - set(plan_skips))}")
        # The plan names skips by its profile; the runtime uses the model's names.
        self.skip_name = {p.name: model_skips[k]["name"] for k, p in plan_skips.items()}
        plan_carried = sorted(c.name for c in self.doc.carried)
        if plan_carried != sorted(c["name"] for c in self.model.carried):
            raise PlanError(f"{self.path}: carried tensors {plan_carried} differ from the "
                            f"model's {sorted(c['name'] for c in self.model.carried)}")

    def check_bytes(self, sizes: Sizes, dtype_name: str) -> None:
        """Compare the plan's tensor sizes with the model's (per-sample bytes, e.g. from
        comm.Shapes); raises PlanError listing every difference."""
        problems = []
        for s in self.doc.skips:
            want = sizes.skip_bytes(self.skip_name[s.name])
            if s.bytes_per_sample != want:
                problems.append(f"skip {s.name!r}: plan {s.bytes_per_sample} bytes per "
                                f"sample, model {want}")
        for c in self.doc.carried:
            want = sizes.carried_bytes(c.name)
            if c.bytes_per_sample != want:
                problems.append(f"carried {c.name!r}: plan {c.bytes_per_sample} bytes "
                                f"per sample, model {want}")
        b = self.microbatch_size
        for t in self.doc.transfers:
            if t.kind != "main":
                continue
            got = t.forward_bytes.get("activation", 0)
            want = b * sizes.main_bytes(self.stage_range[t.from_stage][1])
            if got != want:
                problems.append(f"main path after stage {t.from_stage}: plan {got} bytes "
                                f"per microbatch, model {want}")
            got = t.forward_bytes.get("carried", 0)
            want = b * sum(sizes.carried_bytes(c.name) for c in self.carried_crossing(
                t.from_stage))
            if got != want:
                problems.append(f"carried tensors after stage {t.from_stage}: plan {got} "
                                f"bytes per microbatch, {want} for "
                                f"{[c.name for c in self.carried_crossing(t.from_stage)]}")
        if problems:
            more = f" ... and {len(problems) - 10} more" if len(problems) > 10 else ""
            raise PlanError(f"{self.path}: tensor sizes differ from the model's in "
                            f"{dtype_name} (was the profile measured in another dtype? "
                            f"--dtype): " + "; ".join(problems[:10]) + more)

    # --- messages ------------------------------------------------------------------------

    def _carried_spec(self, name: str) -> CarriedSpec:
        spec = next((c for c in self.doc.carried if c.name == name), None)
        if spec is None:
            raise PlanError(f"{self.path}: transfers[].carried names {name!r}, which is not one "
                            f"of the plan's carried tensors "
                            f"{sorted(c.name for c in self.doc.carried)}")
        return spec

    def carried_crossing(self, s: int) -> list[CarriedSpec]:
        """Carried tensors on the main transfer s -> s+1: the plan's list, or the rule."""
        transfer = next((t for t in self.doc.transfers
                         if t.kind == "main" and t.from_stage == s), None)
        if transfer is not None and transfer.carried is not None:
            return [self._carried_spec(n) for n in transfer.carried]
        return self._rule_carried(s)

    def _rule_carried(self, s: int) -> list[CarriedSpec]:
        """The planner's rule (src/cost/pipeline_model.cpp): a carried tensor crosses s -> s+1
        when it exists by the end of stage s and no earlier stage on the receiving device ran
        after it existed (that device would hold it already)."""
        idx = blocklist.block_index(self.model)
        last, receiver = self.stage_range[s][1], self.stage_device[s + 1]
        out = []
        for c in self.doc.carried:
            producer = -1 if c.producer is None else idx[c.producer]
            held = any(self.stage_device[e] == receiver and producer <= self.stage_range[e][1]
                       for e in range(s + 1))
            if producer <= last and not held:
                out.append(c)
        return out

    def _build_messages(self) -> list[Message]:
        messages: list[Message] = []
        for t_index, t in enumerate(self.doc.transfers):
            a, b = t.from_stage, t.to_stage
            skips = [Item("skip", self.skip_name[n]) for n in t.skips]
            if t.kind == "main":
                carried = self.carried_crossing(a)
                fwd = [Item("main", a)] + [Item("carried", c.name) for c in carried] + skips
                bwd = [Item("main", a)] + [Item("carried", c.name) for c in carried
                                           if c.needs_gradient] + skips
            else:
                fwd = bwd = skips
            da, db = self.stage_device[a], self.stage_device[b]
            messages.append(Message(len(messages), t_index, "F", da, db, ("F", a), ("F", b), fwd))
            messages.append(Message(len(messages), t_index, "B", db, da, ("B", b), ("B", a), bwd))
        return messages

    @staticmethod
    def _message_op(op: str) -> str:
        # I carries B's messages; W has none (never matches a message's op).
        return "B" if op == "I" else op

    def sent_after(self, op: str, stage: int) -> list[Message]:
        return [m for m in self.messages if m.send_after == (self._message_op(op), stage)]

    def awaited_before(self, op: str, stage: int) -> list[Message]:
        return [m for m in self.messages if m.recv_before == (self._message_op(op), stage)]

    def send_sequence(self, src: int, dst: int) -> list[tuple[Message, int]]:
        """(message, mb) pairs src sends to dst, in src's execution order: both ends number
        the tensors in this order, which makes tags agree and keeps per-pair order (what
        NCCL needs, where tags are ignored)."""
        seq = []
        for op, stage, mb in self.schedule[src]:
            seq.extend((m, mb) for m in self.sent_after(op, stage) if m.dst == dst)
        return seq

    # --- ranks ---------------------------------------------------------------------------

    @property
    def world_size(self) -> int:
        """The processes that run the plan: the rank map's world_size x the sequence degree
        (plan_doc.PlanDoc.processes)."""
        return self.doc.processes

    @property
    def sequence_degree(self) -> int:
        return self.doc.sequence_degree

    @property
    def sequence_layout(self) -> tuple[int, int]:
        """(ulysses, ring); (1, 1) without sequence parallelism."""
        seq = self.doc.parallelism.sequence
        return (seq.ulysses, seq.ring) if seq is not None else (1, 1)

    def rank_info(self, rank: int) -> RankSpec:
        """The rank map's entry of process `rank`: its sequence group's first rank's."""
        return self.doc.rank(rank - rank % self.sequence_degree)

    def pipeline_ranks(self, dp_index: int, sequence_index: int = 0) -> tuple[int, ...]:
        """The processes of replica dp_index's pipeline holding tokens share sequence_index."""
        return tuple(r + sequence_index for r in self.doc.rank_map.pipeline_groups[dp_index])

    @property
    def data_parallel_groups(self) -> tuple[tuple[int, ...], ...]:
        """Per pipeline device, the processes its gradients are summed over: every replica's
        rank, each with its whole sequence group."""
        s = self.sequence_degree
        return tuple(tuple(r + j for r in group for j in range(s))
                     for group in self.doc.rank_map.data_parallel_groups)

    def stages_on(self, device: int) -> list[int]:
        return self.doc.stages_on(device)

    @property
    def predicted_iteration_s(self) -> float:
        return self.doc.predicted.iteration_s

    @property
    def zero_stage(self) -> int:
        return self.doc.zero_stage
