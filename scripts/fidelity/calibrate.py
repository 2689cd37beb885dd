#!/usr/bin/python3
"""Measure what torch.distributed (gloo) point-to-point achieves between two ranks: one-way
latency of a small message (ping-pong / 2) and bulk bandwidth (one large message, one way).

    calibrate.py --rank R --master-addr A --master-port P [--bulk-bytes N]

Rank 0 prints one JSON line: {"latency_s": ..., "bandwidth_bytes_per_s": ...}.
"""

import argparse
import datetime
import json
import statistics
import time

import torch
import torch.distributed as dist


def ping_pong(rank, tensor, reps):
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        if rank == 0:
            dist.send(tensor, 1)
            dist.recv(tensor, 1)
        else:
            dist.recv(tensor, 0)
            dist.send(tensor, 0)
        times.append((time.perf_counter() - start) / 2)
    return statistics.median(times)


def one_way(rank, tensor, reps):
    times = []
    for _ in range(reps):
        dist.barrier()
        start = time.perf_counter()
        if rank == 0:
            dist.send(tensor, 1)
            dist.recv(torch.zeros(1), 1)  # acknowledgement: the data has arrived
        else:
            dist.recv(tensor, 0)
            dist.send(torch.zeros(1), 0)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--master-addr", required=True)
    p.add_argument("--master-port", type=int, required=True)
    p.add_argument("--bulk-bytes", type=int, default=4 << 20)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{args.master_addr}:{args.master_port}",
                            rank=args.rank, world_size=2,
                            timeout=datetime.timedelta(seconds=120))
    small = torch.zeros(16)  # 64 bytes
    ping_pong(args.rank, small, 20)  # warm-up
    latency = ping_pong(args.rank, small, 200)
    bulk = torch.zeros(args.bulk_bytes // 4)
    one_way(args.rank, bulk, 1)  # warm-up (TCP window growth)
    seconds = one_way(args.rank, bulk, args.reps) - 2 * latency
    if args.rank == 0:
        print(json.dumps({"latency_s": latency,
                          "bandwidth_bytes_per_s": args.bulk_bytes / max(seconds, 1e-9)}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
