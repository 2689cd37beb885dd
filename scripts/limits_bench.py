#!/usr/bin/env python3
"""How pulse-plan scales up to its limits (include/pulse/base/limits.hpp): the CPU time and
peak memory of one plan as the layers, microbatches and devices grow to the limit, and
that one past each limit is refused (exit 2) at once. Prints a Markdown table.

  scripts/limits_bench.py [--binary build/pulse-plan]

Models are synthetic UNet-shaped chains (scripts/limits_bench.py:unet), written to a
temporary directory; clusters are the shipped DGX-1 profiles. Times are `user` CPU seconds
(the machine may be shared), with wall seconds beside them.
"""

import argparse
import json
import pathlib
import os
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def unet(n, name):
    """n layers, forward 1e-5 s per sample (backward twice), 100 kB of activations and
    10 kB of output per sample, the outermost 8 skips nested."""
    t = 1e-5
    layers = [{"name": f"l{i}", "params": 10000,
               "forward_s": {"V100-SXM2": [t, 1.8 * t]},
               "backward_s": {"V100-SXM2": [2 * t, 3.6 * t]},
               "activation_bytes_per_sample": 100000, "output_bytes_per_sample": 10000}
              for i in range(n)]
    skips = [{"producer": f"l{i}", "consumer": f"l{n - 1 - i}", "bytes_per_sample": 10000}
             for i in range(min(8, n // 2))]
    return {"schema": "pulse.model/v1", "name": name,
            "provenance": {"method": "hand-written", "source": "scripts/limits_bench.py"},
            "timing": {"microbatch_sizes": [1, 2], "device_types": ["V100-SXM2"]},
            "layers": layers, "skips": skips}


def run(binary, args):
    """Exit code, user CPU s, wall s, peak resident MiB of one plan, first stderr line."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([binary, "plan", *args, "-q", "-o", "-"],
                             stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        err.seek(0)
        lines = err.read().decode("utf-8", "replace").strip().splitlines()
    return p.returncode, usage.ru_utime, wall, usage.ru_maxrss / 1024, lines[:1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "pulse-plan"))
    a = ap.parse_args()
    clusters = ROOT / "profiles" / "clusters"
    one = str(clusters / "dgx1-v100-32gb-1n.json")
    sd2 = str(ROOT / "profiles" / "models" / "sd2-unet-512.json")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def model(n):
            path = pathlib.Path(tmp) / f"unet-{n}.json"
            if not path.exists():
                path.write_text(json.dumps(unet(n, f"unet-{n}")))
            return str(path)

        for n in (256, 1024, 2048, 4096, 4097):
            rows.append((f"{n} layers, tuned, 8 V100", ["--model", model(n), "--cluster", one]))
        for n in (4096,):
            rows.append((f"{n} layers, pp 8, 8 V100",
                         ["--model", model(n), "--cluster", one, "--pp", "8",
                          "--microbatch-size", "1"]))
        for m in (1024, 4096, 4097):
            rows.append((f"SD2 512, pp 4 x dp 1, {m} microbatches",
                         ["--model", sd2, "--cluster", one, "--pp", "4", "--dp", "1",
                          "--microbatch-size", "1", "--global-batch", str(m)]))
        rows.append(("SD2 512, tuned, 64 V100, global batch 32768",
                     ["--model", sd2, "--cluster", str(clusters / "dgx1-v100-32gb-8n.json"),
                      "--global-batch", "32768"]))
        print("| case | exit | user s | wall s | peak memory | first stderr line |")
        print("|---|---:|---:|---:|---:|---|")
        for name, args in rows:
            code, user, wall, rss, line = run(a.binary, args)
            text = (line[0][:110] + "...") if line and len(line[0]) > 110 else (line[0] if line else "")
            print(f"| {name} | {code} | {user:.2f} | {wall:.2f} | {rss:.0f} MiB | {text} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
