"""One rank of a plan: its stages, its op list in the plan's order, then the data-parallel
gradient reduction and the optimizer step (optim.py; ZeRO-2 and ZeRO-3 shard each stage with
FSDP, sharding.py).

Every value that crosses a stage boundary lives in a rank-local store keyed by
((kind, name), microbatch) as a detached leaf: the consumer stage reads it, autograd
accumulates the consumer's gradient in its .grad, gradients arriving from other ranks are
added there too, and the producing stage's backward is fed that .grad. Local skips
therefore never leave the rank; a carried tensor used by both stages of a device (the V)
collects both gradients before it is sent back.

Mixed precision (precision.py): each stage's forward runs under autocast, the values it hands
on are cast to the communication dtype inside the autograd graph (so their gradients come
back in that dtype and are cast back by autograd), and the loss is computed in float32 and
multiplied by the loss scale for the backward. The layers a stage names as `recomputed`
(`plan --recompute`) run under torch.utils.checkpoint (blocklist.BlockRange): each keeps
only its inputs and runs its forward again during its backward.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch
import torch.distributed as dist

from . import blocklist, buckets, comm, frozen, optim, sequence, sharding
from .plan import Plan, StoreKey
from .precision import Precision, precision as make_precision

Batch = dict[str, torch.Tensor]
Output = tuple[StoreKey, torch.Tensor]


class Worker:
    def __init__(self, plan: Plan, model: Any, rank: int, torch_device: torch.device,
                 optim_config: optim.Config, shapes: comm.Shapes | None = None,
                 precision: Precision | None = None) -> None:
        self.plan, self.model, self.rank = plan, model, rank
        info = plan.rank_info(rank)
        self.device, self.replica = info.pipeline_device, info.dp_index
        self.torch_device = torch_device
        self.precision = precision or make_precision(  # plain: the model's own dtype
            {torch.float64: "fp64", torch.bfloat16: "bf16"}.get(
                next(model.parameters()).dtype, "fp32"), torch_device.type)
        self.scaler = optim.LossScaler(self.precision.loss_scaling)
        self.stages = {s: blocklist.BlockRange(model, *plan.stage_range[s],
                                               recomputed=plan.stages[s].recomputed)
                       for s in plan.stages_on(self.device)}
        self.modules = {s: blocklist.StageModule(st) for s, st in self.stages.items()}
        self.sequence = self._make_sequence()
        self.dp_group, dp_size = self._make_dp_groups()
        self.sharded = optim_config.zero >= 2 and dp_size > 1
        if self.sharded:
            mesh = sharding.mesh_of(self.dp_group, torch_device.type)
            for module in self.modules.values():
                sharding.shard_stage(module, module.blocks, mesh, optim_config.zero,
                                     self.precision)
        # After sharding: FSDP's sharded parameters (DTensors) are the ones the optimizer steps.
        self.named = dict(kv for st in self.stages.values() for kv in st.named_parameters())
        self.params = list(self.named.values())
        self.optimizer = optim.Optimizer(self.params, self.dp_group, dp_size, optim_config)
        shapes = shapes or comm.Shapes(model, plan.microbatch_size, torch_device,
                                       self.precision.comm_dtype, self.precision.autocast,
                                       plan.sequence_layout)
        index = self.sequence.index if self.sequence is not None else 0
        self.comm = comm.Comm(plan, self.device, plan.pipeline_ranks(self.replica, index),
                              shapes, torch_device)
        self.last_stage = len(plan.stages) - 1
        self.buckets = self._make_buckets()
        self.frozen = self._make_frozen(index)
        self.encoded: dict[str, torch.Tensor] = {}
        self.run_op: dict[str, Callable[[int, int], None]] = {
            "F": self.forward, "B": self.backward, "I": self.backward_input,
            "W": self.backward_weight}

    def _make_sequence(self) -> sequence.Context | None:
        """Under sequence parallelism (sequence.py): this process's Ulysses and ring groups,
        from the device mesh, checked against the plan's, given to the model; None
        without."""
        if self.plan.sequence_degree == 1:
            return None
        ctx = sequence.make_context(self.plan.dp, self.plan.pp, *self.plan.sequence_layout,
                                    self.torch_device.type,
                                    self.plan.doc.rank_map.sequence_groups or (), self.rank)
        self.model.set_sequence_parallel(ctx)
        return ctx

    def _make_buckets(self) -> list[tuple[buckets.Bucket, Plan, comm.Comm]]:
        """Per bucket of the plan (buckets.py): the plan with its microbatching and schedule,
        and the messages at its sample shape; [] without buckets."""
        out = []
        for bucket in buckets.read(self.plan.doc):
            plan = buckets.bucket_plan(self.plan, bucket)
            shapes = comm.Shapes(self.model, bucket.microbatch_size, self.torch_device,
                                 self.precision.comm_dtype, self.precision.autocast,
                                 self.plan.sequence_layout, bucket.shape)
            out.append((bucket, plan, comm.Comm(plan, self.device, self.comm.ranks, shapes,
                                                self.torch_device)))
        return out

    def use_bucket(self, iteration: int) -> buckets.Bucket | None:
        """Runs the next iterations as bucket `iteration` mod n does (None without buckets)."""
        if not self.buckets:
            return None
        bucket, self.plan, self.comm = self.buckets[iteration % len(self.buckets)]
        return bucket

    def _make_frozen(self, sequence_index: int) -> frozen.Runner | None:
        """This rank's frozen ops (frozen.py); None when the plan runs none (no frozen
        section, or `cached`: the batches carry the outputs)."""
        spec = frozen.read(self.plan.doc)
        if spec is None or spec.placement == "cached":
            return None
        starts = [o.start_s for o in self.plan.doc.schedule[self.device]]
        return frozen.Runner(spec, self.model, self.device, self.replica,
                             self.plan.pipeline_ranks(self.replica, sequence_index), starts)

    def _make_dp_groups(self) -> tuple[Any, int]:
        """(this rank's data-parallel group or None, its size): under sequence parallelism
        every process of the replicas' sequence groups (plan.data_parallel_groups). new_group
        is collective: every rank creates every group, in the plan's order."""
        mine, size = None, 1
        for ranks in self.plan.data_parallel_groups:
            group = dist.new_group(ranks=ranks) if len(ranks) > 1 else None
            if self.rank in ranks:
                mine, size = group, len(ranks)
        return mine, size

    # --- one iteration -------------------------------------------------------------------

    def iteration(self, batch: Batch, next_batch: Batch | None = None,
                  first: bool = True) -> tuple[float, float]:
        """Runs this rank's ops (and its frozen ops: before the schedule, and in its bubbles
        on `next_batch`; `first`: the run's first iteration, frozen.py); returns (sum of its
        microbatch losses, seconds)."""
        start = time.perf_counter()
        self.store, self.saved, self.loss_sum = {}, {}, 0.0
        self.inputs, self.pending_w = {}, {}  # (stage, mb) -> input leaves / I's outputs
        self.held = {}  # mb -> {carried name: leaf}: the carried tensors this device holds
        self.batch = batch
        for p in self.params:
            p.grad = None
        self.comm.start_iteration()
        if self.frozen is not None:
            self.encoded = self.frozen.start(batch, next_batch, first)
        # (op, stage, mb, start_s, end_s, seconds blocked in receives, seconds posting
        # sends), times from the iteration start.
        self.trace = []
        for position, (op, stage, mb) in enumerate(self.plan.schedule[self.device]):
            if self.frozen is not None:
                self.frozen.in_bubble(position, next_batch)
            t0, waited, sent = time.perf_counter() - start, self.comm.wait_s, self.comm.send_s
            self.run_op[op](stage, mb)
            self.trace.append((op, stage, mb, t0, time.perf_counter() - start,
                               self.comm.wait_s - waited, self.comm.send_s - sent))
        if self.frozen is not None:  # those the plan places after the last op (or later)
            self.frozen.in_bubble(len(self.plan.schedule[self.device]), next_batch, last=True)
            self.frozen.finish()
        self.comm.finish_iteration()
        if self.sharded:  # the accumulated gradients, reduce-scattered once (sharding.py)
            for module in self.modules.values():
                sharding.reduce_gradients(module)
        self.optimizer.reduce_gradients()
        stepped = self.scaler.unscale_and_check(self.params)
        self.grads = {n: p.grad.detach().clone() for n, p in self.named.items()}
        if stepped:
            self.optimizer.step()
        self.store = self.saved = None
        return self.loss_sum, time.perf_counter() - start

    def microbatch(self, mb: int) -> Batch:
        b = self.plan.microbatch_size
        first = (self.replica * self.plan.num_microbatches + mb) * b
        samples = {k: v[first:first + b] for k, v in self.batch.items()}
        # Device 0's frozen outputs, of the pipeline's samples (frozen.py)
        samples.update((k, v[mb * b:(mb + 1) * b]) for k, v in self.encoded.items())
        if self.sequence is None:
            return samples
        return self.model.shard_batch(samples, self.sequence.index, self.sequence.degree)

    def forward(self, s: int, mb: int) -> None:
        for msg in self.plan.awaited_before("F", s):
            for item, t in zip(msg.items, self.comm.receive(msg, mb)):
                if (item.key, mb) in self.store:
                    raise RuntimeError(f"device {self.device} received {item.key} twice")
                self.put(item.key, mb, t)
        stage, data = self.stages[s], self.microbatch(mb)
        if s == 0:  # carried tensors that come with the batch start on the first device
            for c in self.model.carried:
                if c["producer"] is None:
                    self.put(("carried", c["name"]), mb, data[c["name"]])
        h = self.store[(("main", s - 1), mb)] if s > 0 else self.model.first_input(data)
        env = dict(data)
        env.update(self.held.get(mb, {}))
        env.update((k, self.store[(("skip", k), mb)]) for k in stage.skips_in)
        # The leaves whose gradients I computes: main-path input, skips and carried tensors.
        self.inputs[(s, mb)] = [v for v in [h, *env.values()]
                                if isinstance(v, torch.Tensor) and v.requires_grad]
        out, produced = self._run_stage(s, h, env)
        outputs: list[Output] = [(("carried", k), produced[k]) for k in stage.carried_out]
        outputs += [(("skip", k), produced[k]) for k in stage.skips_out]
        if s == self.last_stage:
            out = out.float() if self.precision.mixed else out  # the loss in float32
            # Under sequence parallelism each process's loss is its equal share of the tokens'
            # mean: the group's losses (and gradients, summed) add up to the whole sample's.
            loss = self.model.loss_sum(out, data) / (self.plan.global_batch
                                                     * self.plan.sequence_degree)
            self.loss_sum += loss.item()
            outputs.append((("loss", None), loss * self.scaler.scale))
        else:
            outputs.append((("main", s), out))
        comm_dtype = self.precision.comm_dtype
        if comm_dtype is not None:  # cast inside the graph: gradients come back cast
            outputs = [(k, t.to(comm_dtype) if k[0] != "loss" and t.is_floating_point() else t)
                       for k, t in outputs]
        for key, t in outputs:
            if key[0] != "loss":
                self.put(key, mb, t)
        self.saved[(s, mb)] = outputs
        for msg in self.plan.sent_after("F", s):
            self.comm.send(msg, mb, [self.store[(item.key, mb)] for item in msg.items])

    def _run_stage(self, s: int, h: torch.Tensor, env: dict[str, Any]
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The stage's blocks under autocast (its recomputed layers under checkpoint)."""
        with torch.enable_grad(), self.precision.autocast():
            return self.modules[s](h, env)

    def put(self, key: StoreKey, mb: int, tensor: torch.Tensor) -> None:
        """Store a value crossing a stage boundary as a detached leaf (see the module doc)."""
        leaf = blocklist.detached_leaf(tensor)
        self.store[(key, mb)] = leaf
        if key[0] == "carried":
            self.held.setdefault(mb, {})[key[1]] = leaf

    def backward(self, s: int, mb: int) -> None:
        """B: the whole backward of stage s for microbatch mb."""
        self.receive_grads(s, mb)
        tensors, grads = self.output_grads(self.saved.pop((s, mb)), mb)
        self.inputs.pop((s, mb))
        self._before_backward(s)
        torch.autograd.backward(tensors, grads)
        self.send_grads(s, mb)

    def backward_input(self, s: int, mb: int) -> None:
        """I: gradients of the stage's inputs only (what other stages wait for); the graph
        is kept for W. Same messages as B."""
        self.receive_grads(s, mb)
        tensors, grads = self.output_grads(self.saved[(s, mb)], mb)
        inputs = self.inputs.pop((s, mb))
        self._before_backward(s)
        if inputs:
            torch.autograd.backward(tensors, grads, inputs=inputs, retain_graph=True)
        self.pending_w[(s, mb)] = (tensors, grads)
        self.send_grads(s, mb)

    def backward_weight(self, s: int, mb: int) -> None:
        """W: parameter gradients of the stage. autograd re-walks the part of the graph
        shared with I (a cost a fused split-backward kernel would avoid)."""
        tensors, grads = self.pending_w.pop((s, mb))
        self.saved.pop((s, mb))
        # Under FSDP (ZeRO-2) the gathered weights I used: kept by sharding.before_backward.
        params = [p for p in self.stages[s].parameters() if p.requires_grad]
        self._before_backward(s)
        torch.autograd.backward(tensors, grads, inputs=params)

    def _before_backward(self, s: int) -> None:
        if self.sharded:
            sharding.before_backward(self.modules[s])

    def receive_grads(self, s: int, mb: int) -> None:
        for msg in self.plan.awaited_before("B", s):
            for item, g in zip(msg.items, self.comm.receive(msg, mb)):
                leaf = self.store[(item.key, mb)]
                leaf.grad = g if leaf.grad is None else leaf.grad + g

    def output_grads(self, outputs: list[Output], mb: int
                     ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        tensors, grads = [], []
        for key, t in outputs:
            g = torch.ones_like(t) if key[0] == "loss" else self.store[(key, mb)].grad
            if g is not None:  # e.g. a carried tensor no later block reads
                tensors.append(t)
                grads.append(g)
        return tensors, grads

    def send_grads(self, s: int, mb: int) -> None:
        for msg in self.plan.sent_after("B", s):
            self.comm.send(msg, mb, [self._grad_of(self.store[(item.key, mb)])
                                     for item in msg.items])

    @staticmethod
    def _grad_of(leaf: torch.Tensor) -> torch.Tensor:
        # A value nobody downstream used has a zero gradient; it still travels back, as the
        # planner counts it.
        return leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)

    # --- checkpoints ---------------------------------------------------------------------

    def held_bytes(self) -> dict[str, int]:
        """The training state this rank holds, counted from the tensors' storages (under
        FSDP the local shards): parameters, gradients, optimizer state."""
        return {"params": sharding.storage_bytes(self.params),
                "grads": sharding.storage_bytes(p.grad for p in self.params),
                "optimizer": self.optimizer.state_bytes}

    def state_dict(self) -> dict[str, Any]:
        return {"params": {n: p.detach().cpu() for n, p in self.named.items()},
                "optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state["params"]) != set(self.named):
            raise ValueError("the checkpoint holds other parameters than this rank's stages")
        with torch.no_grad():
            for n, p in self.named.items():
                p.copy_(state["params"][n])
        self.optimizer.load_state_dict(state["optimizer"])
        if "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
