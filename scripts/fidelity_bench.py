#!/usr/bin/python3
"""Fidelity benchmark: predicted vs measured iteration time over emulated links.

    sudo /usr/bin/python3 scripts/fidelity_bench.py --out /tmp/pulse-fidelity

Profiles examples/small_unet.py on this machine's CPU (scripts/profile_torch.py), joins two
network namespaces with a veth pair, and for each link bandwidth in --rates: shapes both
directions with tc tbf, writes a cluster profile with that bandwidth
(profiles/clusters/emulated-veth-<rate>.json), plans pp 2 x dp 1 with pulse and with
--strategy sequential, runs each plan with examples/torch_runtime/runtime.py (one rank per
namespace, gloo over the veth) and compares the measured iteration time with the plan's
predicted.iteration_s. Prints a Markdown table and writes OUT/results.json. Namespaces and
qdiscs are removed at the end, also on error or Ctrl-C. Root only; not part of CTest.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "fidelity"))
sys.path.insert(0, os.path.join(ROOT, "examples", "torch_runtime"))  # runtime.summarize
import netns  # noqa: E402

PY = "/usr/bin/python3"
MODEL = os.path.join(ROOT, "examples", "small_unet.py") + ":build"
# Payload share of a 1514-byte Ethernet frame for TCP with timestamps at MTU 1500 (1448 B):
# tbf meters whole frames, the planner's bandwidth is payload bytes.
PAYLOAD_SHARE = 1448 / 1514


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="/tmp/pulse-fidelity")
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "pulse-plan"))
    p.add_argument("--rates", default="1000,300,100,30,10", help="link rates, Mbit/s")
    p.add_argument("--delay-ms", type=float, default=0.0,
                   help="extra one-way delay (needs the netem qdisc)")
    p.add_argument("--blocking-sends", action="store_true",
                   help="write overlap_comm false in the cluster profiles (plans then charge "
                   "sends to the sender; the runtime still overlaps them)")
    p.add_argument("--queue-ms", type=float, default=50.0,
                   help="tbf queue length in milliseconds of data at the link rate")
    p.add_argument("--base-latency-us", type=float, default=30.0,
                   help="per-message latency written in the cluster profiles besides "
                   "--delay-ms: gloo send/recv over an unshaped veth (measured, docs/fidelity.md)")
    p.add_argument("--global-batch", type=int, default=16)
    p.add_argument("--microbatch-size", type=int, default=2)
    p.add_argument("--iterations", type=int, default=6, help="per run; the first is warm-up")
    p.add_argument("--repeats", type=int, default=3, help="sweeps over every configuration")
    p.add_argument("--profile", help="use this model profile instead of profiling now")
    p.add_argument("--profile-concurrent", type=int, default=2, metavar="N",
                   help="profile under the contention of the run: N copies at once "
                   "(scripts/profile_torch.py --concurrent; default 2, the two ranks here)")
    p.add_argument("--profiles-dir", default=os.path.join(ROOT, "profiles", "clusters"))
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--autogroup-nice", type=int,
                   help="run in a new scheduling autogroup with this nice value (e.g. -10) so "
                   "that other sessions' work disturbs the timings less")
    args = p.parse_args()
    args.rates = [int(r) for r in args.rates.split(",")]
    return args


def rate_name(mbit):
    return f"{mbit // 1000}gbit" if mbit % 1000 == 0 else f"{mbit}mbit"


def cluster_profile(mbit, args):
    latency = args.base_latency_us * 1e-6 + args.delay_ms * 1e-3
    name = f"emulated-veth-{rate_name(mbit)}" + ("-blocking" if args.blocking_sends else "")
    return name, {
        "schema": "pulse.cluster/v1",
        "name": name,
        "description": f"Two CPU processes in two network namespaces joined by a veth pair "
                       f"shaped to {mbit} Mbit/s each way (tc tbf): the link emulated by "
                       "scripts/fidelity_bench.py.",
        "provenance": {
            "method": "hand-written",
            "source": "The bandwidth and delay scripts/fidelity_bench.py configures with tc; "
                      "written by that script.",
            "generator": "scripts/fidelity_bench.py",
            "assumptions": [
                f"bandwidth = {mbit} Mbit/s x 1448/1514 (TCP payload share of an MTU-1500 "
                "Ethernet frame; tbf meters whole frames).",
                f"latency = {args.base_latency_us:g} us per message (gloo send/recv one way "
                f"over the unshaped veth, measured) + {args.delay_ms:g} ms netem delay.",
                "memory_bytes 2 GiB per process, an assumption (the runs use far less).",
                "overlap_comm false: sends charged to the sender, which makes the partition "
                "account for traffic; the runtime itself overlaps them (isend)."
                if args.blocking_sends else
                "overlap_comm true: the runtime sends with isend and keeps computing; the "
                "link still carries one message at a time per direction.",
            ],
        },
        "device": {"type": "CPU", "memory_bytes": 2 << 30, "reserved_bytes": 256 << 20},
        "devices_per_node": 2,
        "nodes": 1,
        "link_classes": {"VETH": {"bandwidth_bytes_per_s": round(mbit * 1e6 / 8 * PAYLOAD_SHARE, 3),
                                  "latency_s": round(latency, 9),
                                  "description": f"veth pair, tbf {mbit} Mbit/s"}},
        "intra_node": [["X", "VETH"], ["VETH", "X"]],
        "overlap_comm": not args.blocking_sends,
    }


def write_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")


def run_pair(pair, argv_for_rank, timeout, env_extra=None):
    """Start rank 0 and 1 in their namespaces; return rank 0's stdout. Kills both (by pid)
    if either fails or time runs out."""
    procs = []
    try:
        for r in (0, 1):
            env = {"GLOO_SOCKET_IFNAME": pair.dev[r], **(env_extra or {})}
            procs.append(subprocess.Popen(pair.command(r, argv_for_rank(r), env),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        outs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for r, p in enumerate(procs):
        if p.returncode != 0:
            raise RuntimeError(f"rank {r} exited {p.returncode}: {outs[r][1][-3000:]}")
    return outs[0][0]


class Ports:
    def __init__(self, first=29600):
        self.next = first

    def take(self):
        self.next += 1
        return self.next


def calibrate(pair, ports, bulk_bytes):
    port = ports.take()
    out = run_pair(pair, lambda r: [PY, os.path.join(HERE, "fidelity", "calibrate.py"),
                                    "--rank", str(r), "--master-addr", pair.addr[0],
                                    "--master-port", str(port), "--bulk-bytes",
                                    str(bulk_bytes)], timeout=300)
    return json.loads(out.strip().splitlines()[-1])


def plan(args, model_profile, cluster_path, strategy, out):
    subprocess.run([args.binary, "plan", "--model", model_profile, "--cluster", cluster_path,
                    "--pp", "2", "--dp", "1", "--strategy", strategy,
                    "--global-batch", str(args.global_batch),
                    "--microbatch-size", str(args.microbatch_size), "--quiet", "-o", out],
                   check=True)
    with open(out) as f:
        return json.load(f)


def execute(args, pair, ports, plan_path, run_dir):
    import runtime
    port = ports.take()
    run_pair(pair, lambda r: [PY, os.path.join(ROOT, "examples", "torch_runtime", "runtime.py"),
                              "--plan", plan_path, "--model", MODEL, "--iterations",
                              str(args.iterations), "--out", run_dir, "--rank", str(r),
                              "--master-addr", pair.addr[0], "--master-port", str(port)],
             timeout=args.timeout)
    return runtime.summarize(run_dir, 2), [load_rank(run_dir, r) for r in (0, 1)]


def load_rank(run_dir, r):
    import torch
    return torch.load(os.path.join(run_dir, f"rank{r}.pt"))


def compute_ratio(plan_json, ranks, iteration):
    """Measured compute (op time minus time blocked in receives and posting sends) over the
    profile's compute for the same ops, summed over both devices, in one iteration."""
    measured = sum(end - start - wait - send for r in ranks
                   for (_, _, _, start, end, wait, send) in r["traces"][iteration])
    planned = sum(d["compute_s"] for d in plan_json["predicted"]["devices"])
    return measured / planned


def run_once(args, pair, ports, model_profile, mbit, strategy, tag):
    """Plan and run one configuration; the measured time is the median iteration."""
    name, cluster = cluster_profile(mbit, args)
    cluster_path = os.path.join(args.profiles_dir, f"{name}.json")
    write_json(cluster_path, cluster)
    plan_path = os.path.join(args.out, f"{name}.{strategy}.plan.json")
    p = plan(args, model_profile, cluster_path, strategy, plan_path)
    summary, ranks = execute(args, pair, ports, plan_path,
                             os.path.join(args.out, f"{name}.{strategy}.{tag}.run"))
    times = summary["iteration_s"][1:]  # the first iteration warms up
    middle = times.index(sorted(times)[len(times) // 2]) + 1
    row = {
        "predicted_s": p["predicted"]["iteration_s"],
        "measured_s": statistics.median(times), "iterations_s": times,
        "p2p_bytes_plan": p["comm"]["p2p_bytes_per_iteration"],
        "p2p_bytes_measured": summary["p2p_bytes_per_iteration"],
        "compute_ratio": compute_ratio(p, ranks, middle),
        # Per device in the median iteration: seconds blocked in receives, posting sends.
        "recv_wait_s": [sum(op[5] for op in r["traces"][middle]) for r in ranks],
        "send_post_s": [sum(op[6] for op in r["traces"][middle]) for r in ranks],
        "stages": [s["layers"] for s in p["stages"]],
    }
    print(f"fidelity: {tag} {mbit} Mbit/s {strategy}: predicted {row['predicted_s']:.3f} s, "
          f"measured {row['measured_s']:.3f} s", file=sys.stderr)
    return row


def aggregate(runs):
    """Runs of one configuration -> median over runs of their median iteration, with the
    spread of those medians."""
    medians = [r["measured_s"] for r in runs]
    predicted = runs[0]["predicted_s"]
    measured = statistics.median(medians)
    return {"predicted_s": predicted, "measured_s": measured, "min_s": min(medians),
            "max_s": max(medians), "error_pct": 100 * (measured - predicted) / predicted,
            "compute_ratio": statistics.median(r["compute_ratio"] for r in runs),
            "p2p_bytes_plan": runs[0]["p2p_bytes_plan"],
            "bytes_match": all(r["p2p_bytes_plan"] == r["p2p_bytes_measured"] for r in runs),
            "runs": runs}


def markdown(results, meta):
    lines = [
        "| link Mbit/s | achieved MB/s | strategy | P2P MB/iter | predicted s | measured s "
        "(median of runs, their range) | error | compute measured/profiled |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for strategy in ("pulse", "sequential"):
            x = r[strategy]
            lines.append(
                f"| {r['mbit']} | {r['achieved_bytes_per_s'] / 1e6:.1f} | {strategy} | "
                f"{x['p2p_bytes_plan'] / 1e6:.2f} | {x['predicted_s']:.3f} | "
                f"{x['measured_s']:.3f} ({x['min_s']:.3f}-{x['max_s']:.3f}) | "
                f"{x['error_pct']:+.1f}% | {x['compute_ratio']:.2f} |")
    lines += ["", "| link Mbit/s | predicted speedup (sequential / pulse) | measured speedup |",
              "|---:|---:|---:|"]
    for r in results:
        pred = r["sequential"]["predicted_s"] / r["pulse"]["predicted_s"]
        meas = r["sequential"]["measured_s"] / r["pulse"]["measured_s"]
        lines.append(f"| {r['mbit']} | {pred:.2f}x | {meas:.2f}x |")
    lines += ["", f"Unshaped veth, gloo send/recv: one-way latency "
              f"{meta['base']['latency_s'] * 1e6:.0f} us, bulk "
              f"{meta['base']['bandwidth_bytes_per_s'] / 1e6:.0f} MB/s. "
              f"{meta['repeats']} sweep(s). Load average before/after: {meta['load_before']} / "
              f"{meta['load_after']}."]
    return "\n".join(lines)


def sweep(args, pair, ports, model_profile):
    """Every repeat visits every rate and both strategies, so drift in the machine's load
    spreads over all configurations instead of biasing one."""
    runs = {(m, s): [] for m in args.rates for s in ("pulse", "sequential")}
    achieved = {}
    for k in range(args.repeats):
        for mbit in args.rates:
            pair.shape(mbit, args.delay_ms, args.queue_ms)
            if mbit not in achieved:  # ~0.5 s of data at the configured rate
                achieved[mbit] = calibrate(pair, ports, int(mbit * 1e6 / 8 * 0.5))
            for strategy in ("pulse", "sequential"):
                runs[(mbit, strategy)].append(
                    run_once(args, pair, ports, model_profile, mbit, strategy, f"r{k}"))
    return [{"mbit": m, "achieved_bytes_per_s": achieved[m]["bandwidth_bytes_per_s"],
             **{s: aggregate(runs[(m, s)]) for s in ("pulse", "sequential")}}
            for m in args.rates]


def profile_model(args):
    if args.profile:
        return args.profile
    path = os.path.join(args.out, "small-unet-cpu.json")
    sizes = sorted({1, 2, 4, 8, args.microbatch_size})
    # Run from the repository root with a relative model path, as docs/torch.md does, so
    # that the profile's provenance reads the same as a checked-in one.
    subprocess.run([PY, "scripts/profile_torch.py", "--model", "examples/small_unet.py:build",
                    "--sizes", ",".join(map(str, sizes)), "--repeats", "9", "--concurrent",
                    str(args.profile_concurrent), "-o", os.path.abspath(path)],
                   check=True, cwd=ROOT)
    return path


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def raise_priority(nice):
    """With autogroup scheduling (Linux default), nice only ranks processes within a
    session: a session of its own with a nice value is what lifts the benchmark (profiler,
    both ranks) over other sessions' work on a shared machine."""
    try:
        os.setsid()
    except PermissionError:
        pass  # already a session leader
    with open("/proc/self/autogroup", "w") as f:
        f.write(str(nice))


def interrupted(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main():
    args = parse_args()
    if os.geteuid() != 0:
        raise SystemExit("fidelity_bench.py: needs root (network namespaces, tc)")
    if not netns.qdisc_available("tbf"):
        raise SystemExit("fidelity_bench.py: this kernel has no tbf qdisc")
    if args.delay_ms > 0 and not netns.qdisc_available("netem"):
        raise SystemExit("fidelity_bench.py: --delay-ms needs the netem qdisc, which this "
                         "kernel lacks (tc: 'Specified qdisc kind is unknown')")
    os.makedirs(args.out, exist_ok=True)
    if args.autogroup_nice is not None:
        raise_priority(args.autogroup_nice)
    meta = {"load_before": loadavg(), "autogroup_nice": args.autogroup_nice}
    model_profile = profile_model(args)
    pair, ports = netns.VethPair(), Ports()
    # SIGTERM/SIGHUP unwind like Ctrl-C so that `finally` removes the namespaces.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)
    try:
        pair.up()
        meta["base"] = calibrate(pair, ports, 16 << 20)
        results = sweep(args, pair, ports, model_profile)
    finally:
        pair.down()
    meta["load_after"] = loadavg()
    meta["repeats"] = args.repeats
    write_json(os.path.join(args.out, "results.json"),
               {"meta": meta, "results": results, "args": vars(args)})
    print(markdown(results, meta))


if __name__ == "__main__":
    main()
