"""Running a plan: one rank (run_rank), every rank of one host (launch_all), the summary.

A rank builds the whole model from the seed (identical everywhere), keeps the stages of its
pipeline device, joins the process groups, optionally resumes from a checkpoint, and runs
iterations: iteration i (from 0) trains on batch i of the data (the model's make_batch with
seed + 1 + i, or the i-th batch of a `--data` hook), so a resumed run sees the batches an
uninterrupted one would. Rank 0 prints one progress line per iteration.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterator

from . import blocklist, buckets, checkpoint, comm, frozen, models, optim, sequence, sharding
from .options import check_local_world, check_run_options
from .plan import Plan, PlanError
from .plan_doc import PlanDoc, read_plan
from .precision import DTYPES, NAMES, Precision, canonical, precision as make_precision
from .summary import summarize

__all__ = ["DTYPES", "NAMES", "RunError", "RunOptions", "launch_all", "prepare", "run_rank",
           "summarize"]


class RunError(Exception):
    """Bad input found before training (exit 2)."""


@dataclass(frozen=True)
class RunOptions:
    """What pulse-run was asked to do (cli.py builds it from the command line)."""
    plan: str
    model: str
    iterations: int = 1
    precision: str | None = None    # precision.py's names; None: --dtype, else the plan's
    dtype: str | None = None        # the older spelling (float32, float64, bfloat16, float16)
    force_precision: bool = False   # run another precision than the plan's, with a warning
    optimizer: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.0
    zero: str = "plan"              # "plan", or the ZeRO stage 0-3 to run instead
    seed: int = 0
    threads: int = 1
    device: str = "auto"            # auto | cpu | cuda
    data: str | None = None         # FILE.py:FUNCTION yielding global batches
    out: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int = 1
    resume: bool = False
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    timeout: float = 300.0
    quiet: bool = False


@dataclass
class Prepared:
    model: Any
    plan: Plan
    shapes: comm.Shapes
    precision: Precision
    zero: int                 # the ZeRO stage that runs
    notes: list[str]          # what runs otherwise than the plan says (--zero, --force-precision)


def device_type(opts: RunOptions) -> str:
    """"cuda" or "cpu" (--device auto picks CUDA when present)."""
    import torch
    if opts.device == "cuda" and not torch.cuda.is_available():
        raise RunError("--device cuda: this PyTorch sees no CUDA device")
    if opts.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return opts.device


def run_precision(opts: RunOptions, doc: PlanDoc) -> tuple[str, list[str]]:
    """The precision that runs: the plan's (`chosen.memory.precision`; v1: `options.memory`), or the one asked for
    (--precision, --dtype) when it is the plan's too; another is refused (RunError naming
    both) unless --force-precision, which runs it with a warning."""
    asked = opts.precision or opts.dtype
    if asked is None:
        return doc.precision, []
    flag = f"--precision {opts.precision}" if opts.precision else f"--dtype {opts.dtype}"
    try:
        name = canonical(asked)
    except ValueError as e:
        raise RunError(f"{flag}: {e}") from None
    if name == doc.precision:
        return name, []
    if not opts.force_precision:
        raise RunError(f"{doc.path}: the plan is made for precision {doc.precision} "
                       f"({doc.modes_path}.memory.precision), this run asks for {name} ({flag}); plan "
                       f"with --precision {name}, or pass --force-precision to run it anyway")
    return name, [f"running precision {name} on a plan made for {doc.precision} "
                  f"(--force-precision): the plan's memory and time figures are not this run's"]


def run_zero(opts: RunOptions, doc: PlanDoc) -> tuple[int, list[str]]:
    """The ZeRO stage that runs: the plan's, or --zero's with a warning."""
    if opts.zero == "plan" or int(opts.zero) == doc.zero_stage:
        return doc.zero_stage, []
    zero = int(opts.zero)
    return zero, [f"running ZeRO-{zero}, the plan says ZeRO-{doc.zero_stage} (--zero {zero}): "
                  f"the plan's memory figures are not this run's"]


def prepare(opts: RunOptions, torch_device: Any = None) -> Prepared:
    """Model, plan and tensor shapes, checked against each other, and the modes that run;
    RunError if they differ or a mode cannot run here. With `torch_device` None the caller
    is a launcher about to start every rank on this host: the plan's world size is held to
    the host's limit (options.host_process_limit) too."""
    import torch
    try:
        check_run_options(vars(opts))
        doc = read_plan(opts.plan)
        if torch_device is None:
            check_local_world(doc.processes, f"{doc.path}: $.rank_map.world_size")
        name, notes = run_precision(opts, doc)
        zero, zero_notes = run_zero(opts, doc)
        if zero >= 2:
            sharding.require_fully_shard(zero)
            if zero >= 3 and doc.split_backward:
                raise RunError(f"{doc.path}: ZeRO-3 with a split backward (I/W ops, "
                               f"$.options.split_backward) is a mode pulse-run does not run "
                               f"(its W ops missed gradients under FSDP's resharding); plan "
                               f"with --zero 2 or without --split-backward")
            if opts.checkpoint_dir:
                raise RunError(f"--checkpoint-dir: pulse-run writes no checkpoints of "
                               f"FSDP-sharded state (ZeRO-{zero}); train without it, or with "
                               f"--zero 1 or 0")
        prec = make_precision(name, device_type(opts))
        model = load_model(opts, prec)
        seq = doc.parallelism.sequence
        if seq is not None:
            sequence.check_model(model, seq.ulysses, seq.ring, opts.model)
    except (ValueError, TypeError, OSError) as e:
        raise RunError(str(e)) from None
    device = torch_device or torch.device("cpu")
    model.to(device)
    try:
        plan = Plan(doc, model)
        spec = frozen.check(doc, model)
        if spec is not None and spec.placement == "cached" and opts.data is None:
            raise PlanError(f"{doc.path}: $.frozen.placement: cached: the batches must carry "
                            f"the encoded fields {frozen.outputs(model)}, and make_batch's do "
                            f"not: give a --data hook that supplies them "
                            f"(examples/small_frozen.py:cached_data)")
        shapes = comm.Shapes(model, plan.microbatch_size, device, prec.comm_dtype,
                             prec.autocast, plan.sequence_layout)
        plan.check_bytes(shapes, prec.name)
        for bucket in buckets.read(doc):  # every bucket's samples go through the stages
            comm.Shapes(model, bucket.microbatch_size, device, prec.comm_dtype, prec.autocast,
                        plan.sequence_layout, bucket.shape)
    except (PlanError, OSError) as e:
        raise RunError(str(e)) from None
    except TypeError as e:
        raise RunError(f"--model {opts.model}: make_batch does not take the plan's bucket "
                       f"shapes ($.buckets.rows): {e}") from None
    return Prepared(model, plan, shapes, prec, zero, notes + zero_notes)


def load_model(opts: RunOptions, prec: Precision) -> Any:
    """The model of --model; a file that does not import is RunError naming it (an error
    the model's own code raises while building is not caught here)."""
    try:
        return models.load(opts.model, seed=opts.seed, dtype=prec.param_dtype)
    except (SyntaxError, ImportError) as e:
        raise RunError(f"--model {opts.model}: {type(e).__name__}: {e}") from None


def torch_device_of(opts: RunOptions, rank: int) -> Any:
    import torch
    if device_type(opts) != "cuda":
        return torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local % torch.cuda.device_count())


def start_rank(opts: RunOptions, rank: int, world_size: int | None,
               init_method: str | None) -> tuple[Any, Prepared]:
    """A rank's device, model and plan (checked), and its process group joined: NCCL on
    CUDA, gloo otherwise; with `init_method` None, torchrun's env://."""
    import torch
    import torch.distributed as dist

    blocklist.keep_freed_memory()
    torch.set_num_threads(opts.threads)
    torch_device = torch_device_of(opts, rank)
    if torch_device.type == "cuda":
        torch.cuda.set_device(torch_device)
    p = prepare(opts, torch_device)
    if world_size is not None and world_size != p.plan.world_size:
        raise RunError(f"{world_size} processes, but the plan's rank_map has "
                       f"{p.plan.world_size} ranks")
    dist.init_process_group("nccl" if torch_device.type == "cuda" else "gloo",
                            init_method=init_method or "env://", rank=rank,
                            world_size=p.plan.world_size,
                            timeout=datetime.timedelta(seconds=opts.timeout))
    return torch_device, p


def run_rank(opts: RunOptions, rank: int, world_size: int | None = None,
             init_method: str | None = None) -> None:
    """Runs one rank; with `init_method` None, torch.distributed reads torchrun's env://."""
    import torch.distributed as dist

    torch_device, p = start_rank(opts, rank, world_size, init_method)
    from .worker import Worker
    config = optim.Config(opts.optimizer, opts.lr, opts.momentum, p.zero)
    w = Worker(p.plan, p.model, rank, torch_device, config, p.shapes, p.precision)
    if rank == 0 and not opts.quiet:
        print(f"pulse-run: runs {describe(executed(w, p.plan))}", file=sys.stderr, flush=True)
    start = resume(opts, w, p.plan, rank) if opts.checkpoint_dir else 0
    record: dict[str, Any] = {"losses": [], "iteration_s": [], "traces": [], "messages": 0}
    shapes = [b.shape for b in buckets.read(p.plan.doc)]
    batches = data_batches(opts, p.model, p.plan.global_batch, torch_device, start, shapes)
    record["frozen"] = []
    batch = next(batches) if start < opts.iterations else None
    for it in range(start, opts.iterations):
        # The next batch too: frozen ops in bubbles encode it (frozen.py)
        next_batch = next(batches) if it + 1 < opts.iterations else None
        check_frozen_fields(opts, p.model, w, it, batch)
        dist.barrier()  # all ranks start an iteration together: times are comparable
        w.comm.bytes.clear()
        sent_before = w.comm.messages_sent
        bucket = w.use_bucket(it)
        loss, seconds = w.iteration(batch, next_batch, first=it == start)
        if bucket is not None:
            record.setdefault("buckets", []).append(
                {"name": bucket.name, "shape": bucket.shape,
                 "microbatch_size": bucket.microbatch_size,
                 "num_microbatches": bucket.num_microbatches,
                 "ops": [op for op, _, _ in w.plan.schedule[w.device]].count("F")})
        record["frozen"].append(list(w.frozen.record) if w.frozen is not None else [])
        batch = next_batch
        record["losses"].append(loss)
        record["iteration_s"].append(seconds)
        record["traces"].append(w.trace)
        record["messages"] = w.comm.messages_sent - sent_before
        progress(opts, p.plan, it, loss, seconds, torch_device)
        if opts.checkpoint_dir and ((it + 1) % opts.checkpoint_every == 0
                                    or it + 1 == opts.iterations):
            checkpoint.save(opts.checkpoint_dir, it + 1, rank,
                            dict(w.state_dict(), **run_identity(opts, p.plan)))
    if opts.out:
        write_rank_file(opts, w, record, rank, start)
    dist.barrier()
    dist.destroy_process_group()


def check_frozen_fields(opts: RunOptions, model: Any, w: Any, it: int,
                        batch: dict[str, Any]) -> None:
    """A plan that places its frozen components `cached` runs none of them: the batch must
    carry their outputs (RunError naming them otherwise)."""
    if w.frozen is not None or w.plan.doc.frozen is None:
        return
    missing = [f for f in frozen.outputs(model) if f not in batch]
    if missing:
        raise RunError(f"{w.plan.path}: $.frozen.placement is cached, but batch {it} lacks the "
                       f"encoded field(s) {missing}: give a --data hook whose batches carry them "
                       f"(examples/small_frozen.py:cached_data encodes once up front)")


def data_batches(opts: RunOptions, model: Any, global_batch: int, torch_device: Any,
                 start: int, shapes: list[dict[str, int]] | None = None
                 ) -> Iterator[dict[str, Any]]:
    """The global batch of every iteration from `start` on: the model's make_batch (seed + 1
    + i), or the batches the --data hook yields (called as FUNCTION(global_batch=, seed=,
    device=, model=); every rank must get the same batches), the first `start` skipped.
    With buckets (`shapes`, one per bucket, buckets.py), iteration i's samples have shape
    shapes[i mod n]: make_batch gets it as keywords (height=, width=, frames=), the hook
    gets the list as `shapes=`."""
    if opts.data is None:
        it = start
        while True:
            shape = shapes[it % len(shapes)] if shapes else {}
            try:
                batch = model.make_batch(global_batch, seed=opts.seed + 1 + it,
                                         device=torch_device, **shape)
            except TypeError as e:
                raise RunError(f"--model {opts.model}: make_batch does not take the plan's "
                               f"bucket shape {shape} ($.buckets.rows): {e}") from None
            yield batch
            it += 1
    try:
        hook = blocklist.load_factory(opts.data)
    except (ValueError, OSError) as e:
        raise RunError(f"--data {opts.data}: {e}") from None
    count = 0
    extra = {"shapes": shapes} if shapes else {}
    for batch in hook(global_batch=global_batch, seed=opts.seed, device=torch_device,
                      model=model, **extra):
        if count >= start:
            yield checked_batch(opts.data, count, batch, global_batch, torch_device)
        count += 1
    raise RunError(f"--data {opts.data}: yielded {count} batches, {opts.iterations} "
                   f"iterations need {opts.iterations}")


def checked_batch(hook: str, index: int, batch: Any, global_batch: int,
                  torch_device: Any) -> dict[str, Any]:
    """A data hook's batch: a dict of tensors with the global batch first, moved to the
    rank's device; RunError naming the field otherwise."""
    import torch
    if not isinstance(batch, dict):
        raise RunError(f"--data {hook}: batch {index} is a {type(batch).__name__}, expected a "
                       f"dict of tensors (the fields make_batch returns)")
    for name, value in batch.items():
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or \
                value.shape[0] != global_batch:
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise RunError(f"--data {hook}: batch {index} field {name!r} is {shape}, expected "
                           f"a tensor with the global batch ({global_batch}) first")
    return {k: v.to(torch_device) for k, v in batch.items()}


def run_identity(opts: RunOptions, plan: Plan) -> dict[str, Any]:
    """What a checkpoint must agree on with the run that resumes from it."""
    return {"plan_sha256": plan.sha256, "world_size": plan.world_size,
            "precision": run_precision(opts, plan.doc)[0], "optimizer_kind": opts.optimizer,
            "seed": opts.seed}


def resume(opts: RunOptions, w: Any, plan: Plan, rank: int) -> int:
    """The iteration to start at: after the newest checkpoint all ranks hold (--resume)."""
    if not opts.resume or opts.checkpoint_dir is None:
        return 0
    start = checkpoint.resume_point(opts.checkpoint_dir, rank, plan.world_size)
    if start:
        try:
            w.load_state_dict(checkpoint.load(opts.checkpoint_dir, start, rank,
                                              run_identity(opts, plan)))
        except ValueError as e:
            raise RunError(str(e)) from None
    if rank == 0 and not opts.quiet:
        print(f"pulse-run: resuming after iteration {start}" if start else
              f"pulse-run: no checkpoint in {opts.checkpoint_dir}; starting at iteration 1",
              file=sys.stderr, flush=True)
    return start


def progress(opts: RunOptions, plan: Plan, it: int, loss: float, seconds: float,
             torch_device: Any) -> None:
    """One line per iteration on rank 0: the loss summed over all ranks (the mean over the
    global batch), time, throughput."""
    import torch
    import torch.distributed as dist
    total = torch.tensor([loss], dtype=torch.float64, device=torch_device)
    dist.all_reduce(total)
    if dist.get_rank() == 0 and not opts.quiet:
        print(f"pulse-run: iteration {it + 1}/{opts.iterations}: loss {total.item():.6f}, "
              f"{seconds:.3f} s, {plan.global_batch / seconds:.1f} samples/s",
              file=sys.stderr, flush=True)


def write_rank_file(opts: RunOptions, w: Any, record: dict[str, Any], rank: int,
                    start: int) -> None:
    import torch
    assert opts.out is not None
    held = w.held_bytes()  # before the gathers below (which hold whole copies for a moment)
    # Under FSDP the gradients and parameters are gathered whole (collective over each data-
    # parallel group; every replica of a device writes the same names in the same order).
    result = {"rank": rank, "device": w.device, "replica": w.replica, "first_iteration": start,
              "losses": record["losses"], "iteration_s": record["iteration_s"],
              "bytes": dict(w.comm.bytes), "messages": record["messages"],
              "traces": record["traces"], "stages": sorted(w.stages),
              "grads": {n: sharding.full(g).cpu() for n, g in getattr(w, "grads", {}).items()},
              "params": {n: sharding.full(p.detach()).cpu() for n, p in w.named.items()},
              "optimizer_state_numel": w.optimizer.state_numel,
              "zero": w.optimizer.zero, "loss_scale": w.scaler.scale,
              "skipped_steps": w.scaler.skipped, "held_bytes": held,
              "executed": executed(w, w.plan), "frozen": frozen_record(w, record),
              "buckets": record.get("buckets", [])}
    os.makedirs(opts.out, exist_ok=True)
    torch.save(result, os.path.join(opts.out, f"rank{rank}.pt"))


def frozen_record(w: Any, record: dict[str, Any]) -> dict[str, Any]:
    """The frozen ops this rank ran per iteration (component, when, first sample, samples),
    and the state of the frozen parameters: no gradient, not trained."""
    params = [p for c in getattr(w.model, "frozen", None) or []
              for p in c["module"].parameters()]
    return {"ops": record.get("frozen", []), "params": sum(p.numel() for p in params),
            "requires_grad": any(p.requires_grad for p in params),
            "with_grad": any(p.grad is not None for p in params),
            "in_optimizer": any(any(p is q for q in w.params) for p in params)}


def executed(w: Any, plan: Plan) -> dict[str, Any]:
    """The modes this rank runs: ZeRO stage and how, precision, recomputed layers."""
    zero = w.optimizer.zero
    how = ("FSDP fully_shard" if w.sharded else "ZeroRedundancyOptimizer" if zero == 1
           else "all-reduce")
    return {"zero_stage": zero, "plan_zero_stage": plan.zero_stage, "sharding": how,
            "replicas": w.optimizer.dp_size // w.plan.sequence_degree,
            "precision": w.precision.name,
            "plan_precision": plan.doc.precision,
            "sequence": ({"ulysses": w.sequence.ulysses, "ring": w.sequence.ring,
                          "index": w.sequence.index,
                          "group": list(plan.doc.rank_map.sequence_groups[
                              w.rank // w.sequence.degree])}
                         if w.sequence is not None else None),
            "recomputed": {str(s): list(plan.stages[s].recomputed) for s in sorted(w.stages)
                           if plan.stages[s].recomputed}}


def describe(e: dict[str, Any]) -> str:
    """One line: what runs (executed())."""
    layers = sum(len(v) for v in e["recomputed"].values())
    seq = e.get("sequence")
    layout = " x ".join([f"Ulysses {seq['ulysses']}"] * (seq['ulysses'] > 1)
                        + [f"ring {seq['ring']}"] * (seq['ring'] > 1)) if seq else ""
    ulysses = f", {layout} over ranks {seq['group']}" if seq else ""
    return (f"ZeRO-{e['zero_stage']} ({e['sharding']} over {e['replicas']} replica(s)), "
            f"precision {e['precision']}{ulysses}, {layers} recomputed layer(s) on this rank")


# --- every rank on this host -----------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def warm_before_fork() -> None:
    """Loads once, in the launcher, what each forked rank would otherwise load on its own: a
    PyTorch optimizer's first `add_param_group` imports torch._dynamo (the `_disable_dynamo`
    wrapper in torch/_compile.py, PyTorch 2.13), which took 2.5-5 CPU seconds per rank here,
    longer than the small examples train. Imported before the fork, every rank shares it.
    Starts no thread (the fork stays safe)."""
    import torch
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)


def launch_all(opts: RunOptions, deadline: float | None = None) -> None:
    """Checks the plan against the model, then starts one process per rank of the plan: forked
    on the CPU (after `import torch`, before any thread pool exists, which saves each rank the
    second or so of importing it), spawned on CUDA (a forked process cannot use CUDA), one
    rank per GPU. `deadline` (time.monotonic(); default --timeout from now) bounds the whole
    run: past it every rank still running is killed and SystemExit says so (exit 1); no rank
    outlives this process."""
    import multiprocessing
    import torch
    deadline = time.monotonic() + opts.timeout if deadline is None else deadline
    p = prepare(opts)
    world = p.plan.world_size
    cuda = device_type(opts) == "cuda"
    if cuda and world > torch.cuda.device_count():
        raise RunError(f"the plan has {world} ranks and this host {torch.cuda.device_count()} "
                       f"CUDA device(s): NCCL needs one GPU per rank (run on more hosts with "
                       f"torchrun, or on the CPU with --device cpu)")
    port = opts.master_port or free_port()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: every rank is on this host
    if not opts.quiet:
        par = p.plan.doc.parallelism
        seq = "" if par.sequence is None else \
            f" x Ulysses {par.sequence.ulysses} x ring {par.sequence.ring}"
        print(f"pulse-run: {os.path.basename(opts.plan)} ({p.plan.doc.strategy}, "
              f"pp {par.pp} x dp {par.dp}{seq}, {par.num_stages} stages, {par.num_microbatches} "
              f"microbatches of {par.microbatch_size}, precision {p.precision.name}, ZeRO-{p.zero})"
              f" on {world} processes of "
              f"this host ({'NCCL, one GPU each' if cuda else 'gloo'})",
              file=sys.stderr, flush=True)
    for note in [] if opts.quiet else p.notes:
        print(f"pulse-run: warning: {note}", file=sys.stderr, flush=True)
    if not cuda:
        warm_before_fork()
    ctx = multiprocessing.get_context("spawn" if cuda else "fork")
    procs: list[Any] = []
    try:
        for r in range(world):
            if time.monotonic() > deadline:
                break
            procs.append(ctx.Process(target=_rank_main, args=(opts, r, world,
                                                              f"tcp://127.0.0.1:{port}"),
                                     name=f"rank{r}"))
            procs[-1].start()
        failed = wait_all(procs, deadline) if len(procs) == world else []
    finally:
        stop(procs)  # on any way out (an exception, ^C): no rank is left behind
    if len(procs) < world or (failed and time.monotonic() > deadline):
        raise SystemExit(f"pulse-run: timed out after {opts.timeout:g} s (--timeout) with "
                         f"{len(procs)} of {world} ranks started; every rank was stopped")
    if failed:
        raise SystemExit(f"pulse-run: rank(s) {failed} failed; every rank was stopped")
    if opts.out:
        summary = summarize(opts.out, world, p.plan.doc, p.notes)
        with open(os.path.join(opts.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
        for warning in [] if opts.quiet else summary["warnings"]:
            print(f"pulse-run: warning: {warning}", file=sys.stderr, flush=True)
        print(json.dumps(summary))


def _rank_main(opts: RunOptions, rank: int, world: int, init_method: str) -> None:
    die_with_parent()
    try:
        run_rank(opts, rank, world, init_method)
    except RunError as e:
        print(f"pulse-run: rank {rank}: {e}", file=sys.stderr, flush=True)
        sys.exit(2)


def die_with_parent() -> None:
    """Linux: this process gets SIGKILL when the launcher dies, so that no rank outlives a
    launcher killed from outside (prctl PR_SET_PDEATHSIG; elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the launcher died before prctl took effect
        os._exit(1)


def stop(procs: list[Any]) -> None:
    """Kill every process still running and reap them all."""
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join()


def wait_all(procs: list[Any], deadline: float) -> list[int]:
    """Wait for every rank; if one fails or time runs out, stop the others (by pid)."""
    while any(p.is_alive() for p in procs):
        if any(p.exitcode not in (None, 0) for p in procs) or time.monotonic() > deadline:
            for p in procs:
                if p.is_alive():
                    p.kill()
            break
        time.sleep(0.05)
    for p in procs:
        p.join()
    return [r for r, p in enumerate(procs) if p.exitcode != 0]
