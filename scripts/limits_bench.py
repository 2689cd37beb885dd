#!/usr/bin/env python3
"""How pulse-plan scales up to its limits (include/pulse/base/limits.hpp): the CPU time and
peak memory of one plan per case, against the targets of issue 31 (docs/limits.md), and
that one past each limit is refused (exit 2) at once. Prints a Markdown table.

  scripts/limits_bench.py [--binary build/pulse-plan] [--only SUBSTR,...] [--repeat N]
                          [--tuned-sweep [--per-device 1,2,4,...,64]]
                          [--names "NAME;NAME..."] [--against OLD [--rounds N]]

Models are synthetic UNet-shaped chains with nested skips (unet() below), written to a
temporary directory, or the shipped profiles; clusters are shipped profiles or synthetic
ones of one device type (cluster() below). Times are `user` + `sys` CPU seconds of the
planning process (os.wait4), so a shared machine slows the wall clock, not the figure;
peak memory is its peak resident set. --repeat N plans the small fixed configuration N
times and counts distinct plans and safety-limit warnings. --tuned-sweep adds every shipped
model x cluster, tuned, at each of the given samples per device (global batch = that x
the cluster's devices). A case past --cpu-limit is stopped by SIGXCPU (exit -24).
--names picks cases by their whole names (';' between them: names contain commas, which
--only splits on). --against OLD makes it an A/B in one run: each case is planned with OLD
then with --binary, --rounds times over, and the table gives both mean CPU times, their
ratio, and whether the last two plans are the same bytes (with the same exit code).
"""

import argparse
import hashlib
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import copies_model  # noqa: E402  (issue 42's models of copied layers)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROFILES = ROOT / "profiles"


def unet(n, name, skips=8):
    """n layers, forward 1e-5 s per sample (backward twice), 100 kB of activations and
    10 kB of output per sample, the outermost `skips` skips nested (at most n // 2)."""
    t = 1e-5
    layers = [{"name": f"l{i}", "params": 10000,
               "forward_s": {"V100-SXM2": [t, 1.8 * t]},
               "backward_s": {"V100-SXM2": [2 * t, 3.6 * t]},
               "activation_bytes_per_sample": 100000, "output_bytes_per_sample": 10000}
              for i in range(n)]
    pairs = [{"producer": f"l{i}", "consumer": f"l{n - 1 - i}", "bytes_per_sample": 10000}
             for i in range(min(skips, n // 2))]
    return {"schema": "pulse.model/v1", "name": name,
            "provenance": {"method": "hand-written", "source": "scripts/limits_bench.py"},
            "timing": {"microbatch_sizes": [1, 2], "device_types": ["V100-SXM2"]},
            "layers": layers, "skips": pairs}


def cluster(nodes, per_node):
    """nodes x per_node V100s of 32 GiB, 100 GB/s within a node, 10 GB/s between nodes."""
    return {"schema": "pulse.cluster/v1", "name": f"v100-{nodes}x{per_node}",
            "provenance": {"method": "hand-written", "source": "scripts/limits_bench.py"},
            "device": {"type": "V100-SXM2", "memory_bytes": 32 << 30, "reserved_bytes": 0},
            "devices_per_node": per_node, "nodes": nodes,
            "link_classes": {"nv": {"bandwidth_bytes_per_s": 1e11, "latency_s": 5e-6},
                             "ib": {"bandwidth_bytes_per_s": 1e10, "latency_s": 1e-5}},
            "intra_node": [["X" if a == b else "nv" for b in range(per_node)]
                           for a in range(per_node)],
            "inter_node": "ib"}


CPU_LIMIT = [120]  # seconds of CPU a case may take before SIGXCPU stops it (--cpu-limit)


def limit_cpu():
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT[0], CPU_LIMIT[0] + 5))


def run(binary, args, out=None):
    """(exit code, CPU s, wall s, peak resident MiB, stderr lines) of one plan."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([binary, "plan", *args, "-q", "-o", out or "-"],
                             stdout=subprocess.DEVNULL, stderr=err, preexec_fn=limit_cpu)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - start
        err.seek(0)
        lines = err.read().decode("utf-8", "replace").strip().splitlines()
    return (os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, wall,
            usage.ru_maxrss / 1024, lines)


SD2 = str(PROFILES / "models" / "sd2-unet-512.json")
SMALL_FIXED = ["--model", SD2, "--cluster", str(PROFILES / "clusters" / "atlas800-910a-4n.json"),
               "--pp", "2", "--dp", "16", "--microbatch-size", "4", "--global-batch", "256"]


def cases(tmp):
    """(name, target CPU s or None, target MiB or None, arguments) of every case."""
    def model(n, skips=8):
        path = pathlib.Path(tmp) / f"unet-{n}-{skips}.json"
        if not path.exists():
            path.write_text(json.dumps(unet(n, f"unet-{n}-{skips}", skips)))
        return str(path)

    def nodes(n, per):
        path = pathlib.Path(tmp) / f"cluster-{n}x{per}.json"
        if not path.exists():
            path.write_text(json.dumps(cluster(n, per)))
        return str(path)

    one = str(PROFILES / "clusters" / "dgx1-v100-32gb-1n.json")
    out = []
    for n in (256, 1024, 2048, 4096, 4097):
        out.append((f"{n} layers, tuned, 8 V100", 10 if n <= 4096 else 1, None,
                    ["--model", model(n), "--cluster", one]))
    out.append(("4096 layers, 2048 nested skips, tuned, 8 V100", 10, None,
                ["--model", model(4096, 2048), "--cluster", one]))
    # pp 1024 over these 4096 layers is past the microbatch limit at the default global batch
    # (8192 microbatches at dp 1); pp 512 and 1024 are measured over 2048 layers below.
    for pp in (2, 8, 64, 512):
        out.append((f"4096 layers, 2048 nested skips, pp {pp}, {max(8, pp)} V100", 10, None,
                    ["--model", model(4096, 2048), "--cluster", nodes(max(1, pp // 8), 8),
                     "--pp", str(pp), "--dp", "1", "--microbatch-size", "1"]))
    out.append(("3999 layers, 1999 nested skips, pp 2 x dp 1", 10, None,
                ["--model", model(3999, 1999), "--cluster", one, "--pp", "2", "--dp", "1"]))
    def copies(n, skips):  # issue 42's new-user shapes: copies of tiny-unet's second layer
        path = pathlib.Path(tmp) / f"tiny-x{n}-{skips}.json"
        if not path.exists():
            path.write_text(json.dumps(copies_model.copies_model(n, skips)))
        return str(path)

    out.append(("4001 tiny-unet layers, 2000 nested skips, pp 2 x dp 1 (does not fit)", 10, None,
                ["--model", copies(4001, 2000), "--cluster", one, "--pp", "2", "--dp", "1"]))
    out.append(("3001 tiny-unet layers, a chain, pp 4", 10, None,
                ["--model", copies(3001, 0), "--cluster", one, "--pp", "4"]))
    for pp in (512, 1024):
        out.append((f"2048 layers, 1024 nested skips, pp {pp}, 1024 V100", 10, 1024,
                    ["--model", model(2048, 1024), "--cluster", nodes(128, 8), "--pp", str(pp)]))
    # At the default global batch (8 per device) pp 1024 is past the op limit (4096
    # microbatches over 2048 stages), refused at once; 2048 samples are 1024 microbatches of 2.
    out.append(("2048 layers, 1024 nested skips, pp 1024, 1024 V100, global batch 2048", 10, 1024,
                ["--model", model(2048, 1024), "--cluster", nodes(128, 8), "--pp", "1024",
                 "--global-batch", "2048"]))
    out.append(("SD2 512, atlas800-910a-4n, pp 2 x dp 16, microbatch 4 x 4", 2, None, SMALL_FIXED))
    for m in (1024, 4096, 4097):
        out.append((f"SD2 512, pp 4 x dp 1, {m} microbatches", 10, None,
                    ["--model", SD2, "--cluster", one, "--pp", "4", "--dp", "1",
                     "--microbatch-size", "1", "--global-batch", str(m)]))
    out.append(("SD2 512, 65,536 one-device nodes, pp 2", 10, None,
                ["--model", SD2, "--cluster", nodes(65536, 1), "--pp", "2"]))
    for name in ("flux1-dev-1024", "hunyuan-dit-g2-1024"):
        for c, devices in (("dgx1-v100-32gb-8n", 64), ("dgx-h100-8n", 64)):
            out.append((f"{name}, tuned, {c}, 64 samples per device", 5, None,
                        ["--model", str(PROFILES / "models" / f"{name}.json"),
                         "--cluster", str(PROFILES / "clusters" / f"{c}.json"),
                         "--global-batch", str(64 * devices)]))
    return out


def devices_of(path):
    doc = json.loads(pathlib.Path(path).read_text())
    return doc["nodes"] * doc["devices_per_node"]


def sweep(per_device):
    """Every shipped model x cluster, tuned, at each samples-per-device figure."""
    for m in sorted((PROFILES / "models").glob("*.json")):
        for c in sorted((PROFILES / "clusters").glob("*.json")):
            for k in per_device:
                yield (f"{m.stem}, tuned, {c.stem}, {k} per device", 5, None,
                       ["--model", str(m), "--cluster", str(c),
                        "--global-batch", str(k * devices_of(c))])


def row(binary, name, cpu_target, mib_target, args):
    code, cpu, wall, rss, lines = run(binary, args)
    line = lines[0] if lines else ""
    text = (line[:100] + "...") if len(line) > 100 else line
    met = "yes"
    if (cpu_target and cpu > cpu_target) or (mib_target and rss > mib_target):
        met = "**no**"
    target = " and ".join(t for t in (f"{cpu_target} s" if cpu_target else "",
                                      f"{mib_target} MiB" if mib_target else "") if t)
    print(f"| {name} | {code} | {cpu:.2f} | {wall:.2f} | {rss:.0f} MiB | {target} | {met} | "
          f"{text.replace('|', '/')} |", flush=True)
    return met == "yes"


def ab_row(old, new, rounds, name, cpu_target, args):
    """One case planned with `old` then `new`, `rounds` times over: mean CPU s of each."""
    times = {old: [], new: []}
    last = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for i, b in enumerate((old, new)):
                out = pathlib.Path(tmp) / f"{i}.json"
                out.unlink(missing_ok=True)
                code, cpu, _, _, _ = run(b, args, str(out))
                times[b].append(cpu)
                last[b] = (code, out.read_bytes() if out.exists() else b"")
    o, n = (sum(times[b]) / rounds for b in (old, new))
    each = " / ".join(" ".join(f"{t:.2f}" for t in times[b]) for b in (old, new))
    same = "same" if last[old] == last[new] else "differ"
    print(f"| {name} | {cpu_target} | {last[new][0]} | {o:.2f} | {n:.2f} | {n / o:.2f} | "
          f"{same} | {each} |", flush=True)


def repeat(binary, n):
    """Plans the small fixed configuration n times: distinct plans, safety-limit warnings,
    the largest CPU time."""
    digests, warned, worst = set(), 0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        out = str(pathlib.Path(tmp) / "plan.json")
        for _ in range(n):
            code, cpu, _, _, lines = run(binary, SMALL_FIXED, out)
            worst = max(worst, cpu)
            warned += any("safety limit" in line for line in lines)
            body = pathlib.Path(out).read_bytes() if code == 0 else b""
            digests.add((code, hashlib.sha256(body).hexdigest()))
    print(f"\nSmall fixed configuration planned {n} times: {len(digests)} distinct plan(s), "
          f"{warned} with a safety-limit warning, at most {worst:.2f} s of CPU.")
    return len(digests) == 1 and warned == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "pulse-plan"))
    ap.add_argument("--only", default="",
                    help="cases whose name contains one of these (comma-separated)")
    ap.add_argument("--repeat", type=int, default=0,
                    help="also plan the small fixed configuration this many times")
    ap.add_argument("--tuned-sweep", action="store_true",
                    help="also every shipped model x cluster, tuned, at --per-device")
    ap.add_argument("--per-device", default="1,2,4,8,16,32,64")
    ap.add_argument("--cpu-limit", type=int, default=120,
                    help="CPU seconds after which a case is stopped (SIGXCPU: exit -24)")
    ap.add_argument("--names", default="",
                    help="cases whose whole name is one of these (';'-separated)")
    ap.add_argument("--against", metavar="OLD",
                    help="an A/B: plan each case with OLD, then with --binary, alternating")
    ap.add_argument("--rounds", type=int, default=1,
                    help="with --against: plans per binary and case (the table gives means)")
    a = ap.parse_args()
    CPU_LIMIT[0] = a.cpu_limit
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        todo = cases(tmp)
        if a.tuned_sweep:
            todo += list(sweep([int(k) for k in a.per_device.split(",")]))
        names = [n for n in a.names.split(";") if n]
        if a.against:
            print("| case | target CPU s | exit | CPU s, OLD | CPU s, new | ratio | plan | each run |")
            print("|---|---:|---:|---:|---:|---:|---|---|")
        else:
            print("| case | exit | CPU s | wall s | peak memory | target | met | first stderr line |")
            print("|---|---:|---:|---:|---:|---|---|---|")
        for name, cpu_target, mib_target, args in todo:
            picked = name in names if names else any(p in name for p in a.only.split(","))
            if not picked:
                continue
            if a.against:
                ab_row(a.against, a.binary, a.rounds, name, cpu_target, args)
            else:
                ok = row(a.binary, name, cpu_target, mib_target, args) and ok
    if a.repeat:
        ok = repeat(a.binary, a.repeat) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
