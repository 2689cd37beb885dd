"""Reading a pulse.plan/v1 plan into what one rank needs: its stages, its op list, the
messages it sends and receives, and the process groups.

Message contents follow the planner's transfer model (src/cost/pipeline_model.cpp):
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
"""

import hashlib
import json
from dataclasses import dataclass, field

from . import blocklist

# The plan's byte kinds, by store-key kind.
BYTE_KIND = {"main": "activation", "skip": "skip", "carried": "carried"}


@dataclass(frozen=True)
class Item:
    """One tensor of a message: its store key (kind, name) and the byte kind it counts as."""
    kind: str          # main | skip | carried
    name: object       # stage id for main, tensor name otherwise

    @property
    def key(self):
        return (self.kind, self.name)

    @property
    def byte_kind(self):
        return BYTE_KIND[self.kind]


@dataclass
class Message:
    id: int
    transfer: int          # index into the plan's transfers[]
    direction: str         # F or B
    src: int               # pipeline devices
    dst: int
    send_after: tuple      # (op, stage) whose end triggers the send
    recv_before: tuple     # (op, stage) that waits for it
    items: list = field(default_factory=list)


class PlanError(ValueError):
    pass


class Plan:
    def __init__(self, path, model):
        with open(path, "rb") as f:
            data = f.read()
        self.path = path
        self.sha256 = hashlib.sha256(data).hexdigest()
        try:
            self.raw = json.loads(data)
        except ValueError as e:
            raise PlanError(f"{path}: not JSON ({e})") from None
        if self.raw.get("schema") != "pulse.plan/v1":
            raise PlanError(f"{path}: not a pulse.plan/v1 plan")
        self.model = model
        par = self.raw["parallelism"]
        self.pp, self.dp = par["pp"], par["dp"]
        self.microbatch_size = par["microbatch_size"]
        self.num_microbatches = par["num_microbatches"]
        self.global_batch = par["global_batch"]
        self.stages = self.raw["stages"]
        self.stage_device = [s["device"] for s in self.stages]
        self._check_against_model()
        self.schedule = self._read_schedule()
        self.messages = self._build_messages()

    # --- checks --------------------------------------------------------------------------

    def _check_against_model(self):
        names = [n for s in self.stages for n in s["layers"]]
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
        self.stage_range = [(idx[s["layers"][0]], idx[s["layers"][-1]]) for s in self.stages]
        plan_skips = {(s["producer"], s["consumer"]): s for s in self.raw["skips"]}
        model_skips = {(s["producer"], s["consumer"]): s for s in self.model.skips}
        if set(plan_skips) != set(model_skips):
            raise PlanError(f"{self.path}: skip pairs differ from the model's: only in the "
                            f"plan {sorted(set(plan_skips) - set(model_skips))}, only in the "
                            f"model {sorted(set(model_skips) - set(plan_skips))}")
        # The plan names skips by its profile; the runtime uses the model's names.
        self.skip_name = {p["name"]: model_skips[k]["name"] for k, p in plan_skips.items()}
        plan_carried = sorted(c["name"] for c in self.raw["carried"])
        if plan_carried != sorted(c["name"] for c in self.model.carried):
            raise PlanError(f"{self.path}: carried tensors {plan_carried} differ from the "
                            f"model's {sorted(c['name'] for c in self.model.carried)}")

    def check_bytes(self, sizes, dtype_name):
        """Compare the plan's tensor sizes with the model's (``sizes``: per-sample bytes
        from comm.Shapes); raises PlanError listing every difference."""
        problems = []
        for s in self.raw["skips"]:
            want = sizes.skip_bytes(self.skip_name[s["name"]])
            if s["bytes_per_sample"] != want:
                problems.append(f"skip {s['name']!r}: plan {s['bytes_per_sample']} bytes per "
                                f"sample, model {want}")
        for c in self.raw["carried"]:
            want = sizes.carried_bytes(c["name"])
            if c["bytes_per_sample"] != want:
                problems.append(f"carried {c['name']!r}: plan {c['bytes_per_sample']} bytes "
                                f"per sample, model {want}")
        for t in self.raw["transfers"]:
            if t["kind"] != "main":
                continue
            got = t["forward_bytes_per_microbatch"]["activation"]
            want = self.microbatch_size * sizes.main_bytes(self.stage_range[t["from_stage"]][1])
            if got != want:
                problems.append(f"main path after stage {t['from_stage']}: plan {got} bytes "
                                f"per microbatch, model {want}")
        if problems:
            more = f" ... and {len(problems) - 10} more" if len(problems) > 10 else ""
            raise PlanError(f"{self.path}: tensor sizes differ from the model's in "
                            f"{dtype_name} (was the profile measured in another dtype? "
                            f"--dtype): " + "; ".join(problems[:10]) + more)

    def _read_schedule(self):
        schedule = {}
        for entry in self.raw["schedule"]:
            ops = []
            for op in entry["ops"]:
                if op["op"] not in ("F", "B", "I", "W"):
                    raise PlanError(f"unknown op {op['op']!r} on device {entry['device']}")
                ops.append((op["op"], op["stage"], op["mb"]))
            schedule[entry["device"]] = ops
        return schedule

    # --- messages ------------------------------------------------------------------------

    def _holds_carried(self, device, before, producer):
        """The planner's rule: device already holds the carried tensor when some stage on it
        before `before` ran after the tensor existed."""
        return any(self.stage_device[s] == device and producer <= self.stage_range[s][1]
                   for s in range(before))

    def carried_crossing(self, s):
        """Carried tensors on the main transfer s -> s+1."""
        idx = blocklist.block_index(self.model)
        out = []
        for c in self.model.carried:
            producer = -1 if c["producer"] is None else idx[c["producer"]]
            last = self.stage_range[s][1]
            if producer > last or self._holds_carried(self.stage_device[s + 1], s + 1, producer):
                continue
            out.append(c)
        return out

    def _build_messages(self):
        messages = []
        for t_index, t in enumerate(self.raw["transfers"]):
            a, b = t["from_stage"], t["to_stage"]
            skips = [Item("skip", self.skip_name[n]) for n in t["skips"]]
            fwd, bwd = [], []
            if t["kind"] == "main":
                carried = self.carried_crossing(a)
                fwd = [Item("main", a)] + [Item("carried", c["name"]) for c in carried] + skips
                bwd = [Item("main", a)] + [Item("carried", c["name"]) for c in carried
                                           if c["needs_gradient"]] + skips
            else:
                fwd = bwd = skips
            da, db = self.stage_device[a], self.stage_device[b]
            messages.append(Message(len(messages), t_index, "F", da, db, ("F", a), ("F", b), fwd))
            messages.append(Message(len(messages), t_index, "B", db, da, ("B", b), ("B", a), bwd))
        return messages

    @staticmethod
    def _message_op(op):
        # I carries B's messages; W has none (never matches a message's op).
        return "B" if op == "I" else op

    def sent_after(self, op, stage):
        return [m for m in self.messages if m.send_after == (self._message_op(op), stage)]

    def awaited_before(self, op, stage):
        return [m for m in self.messages if m.recv_before == (self._message_op(op), stage)]

    def send_sequence(self, src, dst):
        """(message, mb) pairs src sends to dst, in src's execution order: both ends number
        the tensors in this order, which makes tags agree and keeps per-pair order (what
        NCCL needs, where tags are ignored)."""
        seq = []
        for op, stage, mb in self.schedule[src]:
            seq.extend((m, mb) for m in self.sent_after(op, stage) if m.dst == dst)
        return seq

    # --- ranks ---------------------------------------------------------------------------

    @property
    def world_size(self):
        return self.raw["rank_map"]["world_size"]

    def rank_info(self, rank):
        for r in self.raw["rank_map"]["ranks"]:
            if r["rank"] == rank:
                return r
        raise PlanError(f"rank {rank} is not in the plan's rank_map")

    def pipeline_ranks(self, dp_index):
        return self.raw["rank_map"]["pipeline_groups"][dp_index]

    @property
    def data_parallel_groups(self):
        return self.raw["rank_map"]["data_parallel_groups"]

    def stages_on(self, device):
        return [s for s, d in enumerate(self.stage_device) if d == device]

    @property
    def predicted_iteration_s(self):
        return self.raw["predicted"]["iteration_s"]

    @property
    def zero_stage(self):
        return self.raw.get("options", {}).get("memory", {}).get("zero_stage", 0)
