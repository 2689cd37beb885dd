#!/usr/bin/env python3
"""How pulse-plan's planning time grows with layers, skips, pipeline degree and microbatches
(issue 42, item 3): plans a fixed configuration while one of the four varies and the others
stay at a base case, and fits CPU seconds = a x n^b by least squares on the logarithms, one
fit per dimension. Prints each run (a Markdown table), then the fitted exponents b with R^2.

  scripts/scaling_fit.py [--binary build/pulse-plan] [--only layers,skips,pp,microbatches]
                         [--cpu-limit 60]

The models are scripts/limits_bench.py's synthetic UNet-shaped chains (forward 10 us per
sample, backward twice, the outermost skips nested) and its synthetic V100 clusters of 8 per
node; every plan is a fixed configuration (--pp P --dp 1 --microbatch-size 1 --global-batch
M), so the tuner's choice of configuration does not move from point to point. Each series
varies one dimension around its own base (SERIES below): layers 256-4096 (8 skips, pp 4, 64
microbatches); nested skips 8-1024 over 2048 layers; pp 2-64 over 1024 layers; microbatches
16-1024 on the synthetic 1024 layers and on the shipped SD2 512 UNet (pp 4 on one DGX-1),
whose uneven stages keep the schedule search busier than the synthetic chain's. A point stopped at --cpu-limit (SIGXCPU) or
that does not plan is printed and left out of its fit. CPU seconds are user + sys of the
planning process (os.wait4), so the machine's load slows the wall clock, not the figure.
"""

import argparse
import math
import pathlib
import sys
import tempfile
import json

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import limits_bench  # noqa: E402  (its synthetic models and clusters, and its timed run)

ROOT = pathlib.Path(__file__).resolve().parent.parent
SD2 = "sd2"  # the "layers" of a point on the shipped SD2 512 UNet
# name: (the dimension varied, its points, the base the other dimensions keep)
SERIES = {
    "layers": ("layers", [256, 512, 1024, 2048, 4096],
               {"layers": 0, "skips": 8, "pp": 4, "microbatches": 64}),
    "skips": ("skips", [8, 32, 128, 512, 1024],
              {"layers": 2048, "skips": 0, "pp": 4, "microbatches": 64}),
    "pp": ("pp", [2, 4, 8, 16, 32, 64],
           {"layers": 1024, "skips": 8, "pp": 0, "microbatches": 64}),
    "microbatches": ("microbatches", [16, 64, 256, 1024],
                     {"layers": 1024, "skips": 8, "pp": 4, "microbatches": 0}),
    "microbatches-sd2": ("microbatches", [16, 64, 256, 1024],
                         {"layers": SD2, "skips": "-", "pp": 4, "microbatches": 0}),
}


def fit(xs, ys):
    """(b, a, R^2) of the least-squares line log y = log a + b log x."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    n = len(lx)
    mx, my = sum(lx) / n, sum(ly) / n
    sxx = sum((x - mx) ** 2 for x in lx)
    sxy = sum((x - mx) * (y - my) for x, y in zip(lx, ly))
    b = sxy / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ly)
    ss_res = sum((y - (a + b * x)) ** 2 for x, y in zip(lx, ly))
    return b, math.exp(a), (1 - ss_res / ss_tot) if ss_tot > 0 else 1.0


def case_args(tmp, case):
    """The plan arguments of one point: its model and cluster written to tmp once."""
    tmp = pathlib.Path(tmp)
    if case["layers"] == SD2:
        return ["--model", limits_bench.SD2,
                "--cluster", str(ROOT / "profiles" / "clusters" / "dgx1-v100-32gb-1n.json"),
                "--pp", str(case["pp"]), "--dp", "1", "--microbatch-size", "1",
                "--global-batch", str(case["microbatches"])]
    model = tmp / f"unet-{case['layers']}-{case['skips']}.json"
    if not model.exists():
        name = model.stem
        model.write_text(json.dumps(limits_bench.unet(case["layers"], name, case["skips"])))
    nodes = max(1, case["pp"] // 8)
    cluster = tmp / f"cluster-{nodes}x8.json"
    if not cluster.exists():
        cluster.write_text(json.dumps(limits_bench.cluster(nodes, 8)))
    return ["--model", str(model), "--cluster", str(cluster), "--pp", str(case["pp"]),
            "--dp", "1", "--microbatch-size", "1", "--global-batch", str(case["microbatches"])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "pulse-plan"))
    ap.add_argument("--only", default=",".join(SERIES),
                    help=f"the series to run (comma-separated: {', '.join(SERIES)})")
    ap.add_argument("--cpu-limit", type=int, default=60,
                    help="CPU seconds after which a point is stopped (SIGXCPU)")
    a = ap.parse_args()
    names = [d for d in a.only.split(",") if d]
    unknown = [d for d in names if d not in SERIES]
    if unknown:
        ap.error(f"--only: unknown series {', '.join(unknown)}; "
                 f"the series are {', '.join(SERIES)}")
    limits_bench.CPU_LIMIT[0] = a.cpu_limit
    fits = []
    print("| series | layers | skips | pp | microbatches | exit | CPU s | peak memory |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            dim, points, base = SERIES[name]
            xs, ys = [], []
            for x in points:
                case = dict(base, **{dim: x})
                code, cpu, _, rss, _ = limits_bench.run(a.binary, case_args(tmp, case))
                print(f"| {name} | {case['layers']} | {case['skips']} | {case['pp']} | "
                      f"{case['microbatches']} | {code} | {cpu:.2f} | {rss:.0f} MiB |", flush=True)
                if code == 0 and cpu > 0:
                    xs.append(x)
                    ys.append(cpu)
            if len(xs) >= 2:
                fits.append((name, xs, *fit(xs, ys)))
    print("\n| series | points | CPU s ~ a x n^b: b | a | R^2 |")
    print("|---|---|---:|---:|---:|")
    for name, xs, b, coeff, r2 in fits:
        print(f"| {name} | {', '.join(map(str, xs))} | {b:.2f} | {coeff:.3g} | {r2:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
