"""Running a plan: one rank (run_rank), every rank of one host (launch_all), the summary.

A rank builds the whole model from the seed (identical everywhere), keeps the stages of its
pipeline device, joins the process groups, optionally resumes from a checkpoint, and runs
iterations: iteration i (from 0) trains on the batch of seed + 1 + i, so a resumed run sees
the batches an uninterrupted one would. Rank 0 prints one progress line per iteration.
"""

import datetime
import json
import os
import socket
import sys
import time

from . import blocklist, checkpoint, comm, models, optim
from .plan import Plan, PlanError

DTYPES = ("float32", "float64")


class RunError(Exception):
    """Bad input found before training (exit 2)."""


def prepare(args, torch_device=None):
    """Model, plan and tensor shapes, checked against each other; RunError if they differ."""
    import torch
    dtype = getattr(torch, args.dtype)
    try:
        model = models.load(args.model, seed=args.seed, dtype=dtype)
    except (ValueError, TypeError, OSError) as e:
        raise RunError(str(e)) from None
    if torch_device is not None:
        model.to(torch_device)
    try:
        plan = Plan(args.plan, model)
        shapes = comm.Shapes(model, plan.microbatch_size, torch_device or "cpu")
        plan.check_bytes(shapes, args.dtype)
    except (PlanError, OSError, KeyError) as e:
        raise RunError(str(e) if not isinstance(e, KeyError) else
                       f"{args.plan}: missing key {e}") from None
    return model, plan, shapes


def zero_enabled(args, plan):
    return plan.zero_stage >= 1 if args.zero == "plan" else args.zero == "1"


def run_rank(args, rank, world_size=None, init_method=None):
    """Runs one rank; with `init_method` None, torch.distributed reads torchrun's env://."""
    import torch
    import torch.distributed as dist

    blocklist.keep_freed_memory()
    torch.set_num_threads(args.threads)
    use_cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch_device = torch.device("cuda", local % torch.cuda.device_count()) if use_cuda \
        else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(torch_device)
    model, plan, shapes = prepare(args, torch_device)
    if world_size is not None and world_size != plan.world_size:
        raise RunError(f"{world_size} processes, but the plan's rank_map has "
                       f"{plan.world_size} ranks")
    dist.init_process_group("nccl" if use_cuda else "gloo",
                            init_method=init_method or "env://", rank=rank,
                            world_size=plan.world_size,
                            timeout=datetime.timedelta(seconds=args.timeout))
    from .worker import Worker
    config = optim.Config(args.optimizer, args.lr, args.momentum, zero_enabled(args, plan))
    w = Worker(plan, model, rank, torch_device, config, shapes)
    start = resume(args, w, plan, rank) if args.checkpoint_dir else 0
    record = {"losses": [], "iteration_s": [], "traces": [], "messages": 0}
    for it in range(start, args.iterations):
        batch = model.make_batch(plan.global_batch, seed=args.seed + 1 + it, device=torch_device)
        dist.barrier()  # all ranks start an iteration together: times are comparable
        w.comm.bytes.clear()
        sent_before = w.comm.messages_sent
        loss, seconds = w.iteration(batch)
        record["losses"].append(loss)
        record["iteration_s"].append(seconds)
        record["traces"].append(w.trace)
        record["messages"] = w.comm.messages_sent - sent_before
        progress(args, plan, it, loss, seconds, torch_device)
        if args.checkpoint_dir and args.checkpoint_every and \
                ((it + 1) % args.checkpoint_every == 0 or it + 1 == args.iterations):
            checkpoint.save(args.checkpoint_dir, it + 1, rank, dict(w.state_dict(),
                                                                   **run_identity(args, plan)))
    if args.out:
        write_rank_file(args, w, record, rank, start)
    dist.barrier()
    dist.destroy_process_group()


def run_identity(args, plan):
    """What a checkpoint must agree on with the run that resumes from it."""
    return {"plan_sha256": plan.sha256, "world_size": plan.world_size, "dtype": args.dtype,
            "optimizer_kind": args.optimizer, "seed": args.seed}


def resume(args, w, plan, rank):
    """The iteration to start at: after the newest checkpoint all ranks hold (--resume)."""
    if not args.resume:
        return 0
    start = checkpoint.resume_point(args.checkpoint_dir, rank, plan.world_size)
    if start:
        try:
            w.load_state_dict(checkpoint.load(args.checkpoint_dir, start, rank,
                                              run_identity(args, plan)))
        except ValueError as e:
            raise RunError(str(e)) from None
    if rank == 0 and not args.quiet:
        print(f"pulse-run: resuming after iteration {start}" if start else
              f"pulse-run: no checkpoint in {args.checkpoint_dir}; starting at iteration 1",
              file=sys.stderr, flush=True)
    return start


def progress(args, plan, it, loss, seconds, torch_device):
    """One line per iteration on rank 0: the loss summed over all ranks (the mean over the
    global batch), time, throughput."""
    import torch
    import torch.distributed as dist
    total = torch.tensor([loss], dtype=torch.float64, device=torch_device)
    dist.all_reduce(total)
    if dist.get_rank() == 0 and not args.quiet:
        print(f"pulse-run: iteration {it + 1}/{args.iterations}: loss {total.item():.6f}, "
              f"{seconds:.3f} s, {plan.global_batch / seconds:.1f} samples/s",
              file=sys.stderr, flush=True)


def write_rank_file(args, w, record, rank, start):
    import torch
    result = {"rank": rank, "device": w.device, "replica": w.replica, "first_iteration": start,
              "losses": record["losses"], "iteration_s": record["iteration_s"],
              "bytes": dict(w.comm.bytes), "messages": record["messages"],
              "traces": record["traces"],
              "grads": {n: g.cpu() for n, g in getattr(w, "grads", {}).items()},
              "params": {n: p.detach().cpu() for n, p in w.named.items()},
              "optimizer_state_numel": w.optimizer.state_numel,
              "zero": w.optimizer.zero}
    os.makedirs(args.out, exist_ok=True)
    torch.save(result, os.path.join(args.out, f"rank{rank}.pt"))


# --- every rank on this host -----------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_all(args):
    """Checks the plan against the model, then forks one process per rank of the plan.
    Forking after `import torch` (before any torch thread pool exists) saves each rank the
    second or so of importing it."""
    import multiprocessing
    import torch  # noqa: F401  (imported once here, inherited by the forked ranks)
    _, plan, _ = prepare(args)
    world = plan.world_size
    port = args.master_port or free_port()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: every rank is on this host
    if not args.quiet:
        par = plan.raw["parallelism"]
        print(f"pulse-run: {os.path.basename(args.plan)} ({plan.raw['options']['strategy']}, "
              f"pp {plan.pp} x dp {plan.dp}, {par['num_stages']} stages, "
              f"{plan.num_microbatches} microbatches of {plan.microbatch_size}) on {world} "
              f"processes of this host", file=sys.stderr, flush=True)
    ctx = multiprocessing.get_context("fork")
    procs = []
    for r in range(world):
        procs.append(ctx.Process(target=_rank_main, args=(args, r, world,
                                                          f"tcp://127.0.0.1:{port}"),
                                 name=f"rank{r}"))
        procs[-1].start()
    failed = wait_all(procs, time.monotonic() + args.timeout)
    if failed:
        raise SystemExit(f"pulse-run: rank(s) {failed} failed or timed out")
    if args.out:
        summary = summarize(args.out, world)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
        print(json.dumps(summary))


def _rank_main(args, rank, world, init_method):
    try:
        run_rank(args, rank, world, init_method)
    except RunError as e:
        print(f"pulse-run: rank {rank}: {e}", file=sys.stderr, flush=True)
        sys.exit(2)


def wait_all(procs, deadline):
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


def summarize(out, world):
    """Over the rank files of one run: loss per iteration, slowest rank's time, bytes sent
    point to point in the last iteration by kind."""
    import torch
    results = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]
    iterations = len(results[0]["iteration_s"])
    byte_kinds = {"activation": 0, "skip": 0, "carried": 0}
    for r in results:
        for kind, n in r["bytes"].items():
            byte_kinds[kind] += n
    return {
        "world_size": world,
        "first_iteration": results[0].get("first_iteration", 0) + 1,
        "loss": [sum(r["losses"][i] for r in results) for i in range(iterations)],
        "iteration_s": [max(r["iteration_s"][i] for r in results) for i in range(iterations)],
        "p2p_bytes_per_iteration": sum(byte_kinds.values()),
        "p2p_bytes_by_kind": byte_kinds,
        "p2p_messages_per_iteration": sum(r["messages"] for r in results),
    }
