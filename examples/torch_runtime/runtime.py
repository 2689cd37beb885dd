#!/usr/bin/python3
"""Execute a pulse-plan plan with PyTorch: one process per rank of the plan's rank_map.

Launch every rank on this host (gloo on loopback), run 3 iterations, write results:
    /usr/bin/python3 examples/torch_runtime/runtime.py --plan plan.json \
        --model examples/small_unet.py:build --iterations 3 --out /tmp/run

Run one rank yourself (e.g. inside a network namespace), torchrun-style:
    ... runtime.py --plan plan.json --model ... --rank 1 --master-addr 10.0.0.1 \
        --master-port 29500 --out /tmp/run

Each rank writes OUT/rank<R>.pt (its loss share, gradients after the all-reduce,
parameters after the step, bytes sent by kind, iteration times); the launcher adds
OUT/summary.json (loss, bytes sent point to point in one iteration, iteration times).
"""

import argparse
import datetime
import json
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

DTYPES = ("float32", "float64")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plan", required=True)
    p.add_argument("--model", required=True, help="FILE.py:FUNCTION (block-list model)")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--iterations", type=int, default=1)
    p.add_argument("--seed", type=int, default=0, help="model init; the batch uses seed+1+it")
    p.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--out", required=True, help="directory for the results")
    p.add_argument("--rank", type=int, help="run only this rank (otherwise launch all)")
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int)
    p.add_argument("--timeout", type=float, default=300, help="seconds before giving up")
    return p.parse_args(argv)


# --- one rank ------------------------------------------------------------------------------

def run_rank(args):
    import torch
    import torch.distributed as dist
    import blocklist
    import plan as plan_mod
    import worker as worker_mod

    blocklist.keep_freed_memory()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    model = blocklist.load_factory(args.model)(seed=args.seed, dtype=dtype)
    blocklist.check_protocol(model)
    plan = plan_mod.Plan(args.plan, model)
    use_cuda = torch.cuda.is_available()
    local = plan.rank_info(args.rank)["local_device"]  # the rank's device on its node
    torch_device = torch.device("cuda", local % torch.cuda.device_count()) if use_cuda \
        else torch.device("cpu")
    model.to(torch_device)
    dist.init_process_group("nccl" if use_cuda else "gloo",
                            init_method=f"tcp://{args.master_addr}:{args.master_port}",
                            rank=args.rank, world_size=plan.world_size,
                            timeout=datetime.timedelta(seconds=args.timeout))
    w = worker_mod.Worker(plan, model, args.rank, torch_device, args.lr)
    losses, times, traces = [], [], []
    for it in range(args.iterations):
        batch = model.make_batch(plan.global_batch, seed=args.seed + 1 + it, device=torch_device)
        dist.barrier()  # all ranks start an iteration together: times are comparable
        w.comm.bytes.clear()
        loss, seconds = w.iteration(batch)
        losses.append(loss)
        times.append(seconds)
        traces.append(w.trace)
    result = {"rank": args.rank, "device": w.device, "replica": w.replica,
              "losses": losses, "iteration_s": times, "bytes": dict(w.comm.bytes),
              "messages": w.comm.messages_sent // max(args.iterations, 1), "traces": traces,
              "grads": {n: g.cpu() for n, g in w.grads.items()},
              "params": {n: p.detach().cpu() for n, p in w.named.items()}}
    torch.save(result, os.path.join(args.out, f"rank{args.rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


# --- launcher ------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_all(args):
    """Fork one process per rank. Forking after importing torch (but before any torch
    work or thread pool exists) saves each rank the second or so of `import torch`."""
    import multiprocessing
    import copy
    import torch  # noqa: F401  (imported once here, inherited by the forked ranks)
    with open(args.plan) as f:
        world = json.load(f)["rank_map"]["world_size"]
    port = args.master_port or free_port()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: every rank is on this host
    ctx = multiprocessing.get_context("fork")
    procs = []
    for r in range(world):
        rank_args = copy.copy(args)
        rank_args.rank, rank_args.master_port = r, port
        procs.append(ctx.Process(target=run_rank, args=(rank_args,), name=f"rank{r}"))
        procs[-1].start()
    failed = wait_all(procs, time.monotonic() + args.timeout)
    if failed:
        raise SystemExit(f"runtime.py: rank(s) {failed} failed or timed out")
    summary = summarize(args.out, world)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(json.dumps(summary))


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
    import torch
    results = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]
    iterations = len(results[0]["iteration_s"])
    byte_kinds = {"activation": 0, "skip": 0, "carried": 0}
    for r in results:
        for kind, n in r["bytes"].items():
            byte_kinds[kind] += n
    return {
        "world_size": world,
        "loss": [sum(r["losses"][i] for r in results) for i in range(iterations)],
        "iteration_s": [max(r["iteration_s"][i] for r in results) for i in range(iterations)],
        "p2p_bytes_per_iteration": sum(byte_kinds.values()),
        "p2p_bytes_by_kind": byte_kinds,
        "p2p_messages_per_iteration": sum(r["messages"] for r in results),
    }


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.makedirs(args.out, exist_ok=True)
    if args.rank is not None:
        if args.master_port is None:
            raise SystemExit("runtime.py: --rank needs --master-port")
        run_rank(args)
    else:
        launch_all(args)


if __name__ == "__main__":
    main()
