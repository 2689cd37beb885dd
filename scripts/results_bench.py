#!/usr/bin/python3
"""The paper's comparison, on our cost model: every strategy planned fairly, written to
docs/results.md.

    /usr/bin/python3 scripts/results_bench.py [--binary build/pulse-plan] [--out docs/results.md]

For each model (SD2 UNet at 512 and 768 px, U-ViT-H/2, Hunyuan-DiT at 1024 px, SVD-XT, SDXL,
Flux.1-dev) and cluster (8 and 32 V100s, 8 and 32 Ascend 910As; 8 H100s, H200s, A100s and
Ascend 910Bs, 32 H100s and 910Bs) it plans every strategy (pulse, v-naive, 1f1b,
1f1b-direct, gpipe) with the same global batch (8 samples per device), twice:

  tuned     each strategy with its own best pipeline degree, data-parallel degree and
            microbatch size that fit (the planner's tuner);
  fixed pp  the pipeline degree held at 4 (8 devices) or 8 (32 devices) for every strategy,
            dp filling the cluster, the microbatch size tuned: what the pipeline itself
            does when pipelining is the choice.

Then a sensitivity study on the 910A clusters (tuned, every strategy planned again under
each condition): every Ascend-910A time in the model profile multiplied by a factor, from
the analytic figure the profiles had before they were anchored to measurements, through
the low and high ends of the profile's stated time range (`pulse-plan plan --compute-scale
F|range-low|range-high`); and every link of the cluster made 1/16 to 2 times as fast
(`--link-scale F`: bandwidth x F, latency / F).

The denoiser alone (--frozen cached: the encoders' outputs cached offline, as the paper
compares; docs/frozen.md places them in the step). Every figure is the plan's own
`predicted` and `comm` block: one simulator, one cost model
for all strategies. Deterministic (the planner is), so the page regenerates byte-identical.
Runs the plans in parallel (one per CPU); prints progress on stderr.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [
    ("sd2-unet-512", "SD2 UNet, 512 px"),
    ("sd2-unet-768", "SD2 UNet, 768 px"),
    ("uvit-h2-256", "U-ViT-H/2, 256 px"),
    ("hunyuan-dit-g2-1024", "Hunyuan-DiT, 1024 px"),
    ("svd-xt-unet-576x1024", "SVD-XT UNet, 25 x 576x1024"),
    ("sdxl-unet-1024", "SDXL UNet, 1024 px"),
    ("flux1-dev-1024", "Flux.1-dev, 1024 px (no skips)"),
]
CLUSTERS = [
    ("dgx1-v100-32gb-1n", "8 x V100 (one DGX-1)", 4),
    ("dgx1-v100-32gb-4n", "32 x V100 (four DGX-1)", 8),
    ("atlas800-910a-1n", "8 x Ascend 910A (one Atlas 800)", 4),
    ("atlas800-910a-4n", "32 x Ascend 910A (four Atlas 800)", 8),
    ("dgx-h100-1n", "8 x H100 (one DGX H100)", 4),
    ("dgx-h100-4n", "32 x H100 (four DGX H100)", 8),
    ("dgx-h200-1n", "8 x H200 (one DGX H200)", 4),
    ("dgx-a100-1n", "8 x A100 (one DGX A100)", 4),
    ("atlas800t-a2-910b-1n", "8 x Ascend 910B (one Atlas 800T A2)", 4),
    ("atlas800t-a2-910b-4n", "32 x Ascend 910B (four Atlas 800T A2)", 8),
]
STRATEGIES = ["pulse", "v-naive", "1f1b", "1f1b-direct", "gpipe"]
BASELINES = STRATEGIES[1:]
SAMPLES_PER_DEVICE = 8
GIB = 1024.0 ** 3

# The sensitivity study: these models on these clusters, tuned.
SENS_MODELS = MODELS[:4]
SENS_CLUSTERS = [c for c in CLUSTERS if c[0].startswith("atlas800-910a")]
SENS_DEVICE = "Ascend-910A"
LINK_SCALES = [1 / 16, 1 / 8, 0.25, 0.5, 2.0]
SENS_MODES = [("fixed", "fixed pp"), ("tuned", "tuned")]
PAPER_SPEEDUP = 2.3
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from profilegen import anchors, timing  # noqa: E402
from profilegen.catalog import model_specs  # noqa: E402


def devices(cluster):
    with open(os.path.join(ROOT, "profiles", "clusters", cluster + ".json")) as f:
        c = json.load(f)
    return c["devices_per_node"] * c["nodes"]


def model_path(model):
    return os.path.join(ROOT, "profiles", "models", model + ".json")


def cluster_path(cluster):
    return os.path.join(ROOT, "profiles", "clusters", cluster + ".json")


def plan(binary, model, cluster, strategy, pp, scales=()):
    """Plan one strategy; `scales`: extra planner options (--compute-scale, --link-scale)."""
    cmd = [binary, "plan", "--quiet", "--model", model_path(model), "--cluster",
           cluster_path(cluster), "--strategy", strategy, "--frozen", "cached",
           "--global-batch", str(SAMPLES_PER_DEVICE * devices(cluster)), *scales]
    if pp:
        cmd += ["--pp", str(pp)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 1:  # nothing fits: keep the planner's reason
        return {"fits": False, "reason": proc.stderr.strip().removeprefix("pulse-plan: ")}
    if proc.returncode != 0:
        sys.exit(f"results_bench: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    p = json.loads(proc.stdout)
    par, pred, comm = p["parallelism"], p["predicted"], p["comm"]
    # Pulse only: sharded data parallelism alone (pp 1, ZeRO-2 and ZeRO-3) and the verdict.
    pon = p.get("pipeline_or_not") or {}
    sharded = [a for a in pon.get("sharded", []) if a["feasible"]]
    best_sharded = min(sharded, key=lambda a: (a["iteration_s"], a["zero_stage"]), default=None)
    return {
        "fits": True,
        "pp": par["pp"], "dp": par["dp"], "mb": par["microbatch_size"],
        "microbatches": par["num_microbatches"],
        "p2p": comm["p2p_bytes_per_iteration"], "skip": comm["skip_bytes_per_iteration"],
        "iteration": pred["iteration_s"], "sps": pred["samples_per_s"],
        "bubble": pred["bubble_ratio"],
        "family": p["partition"].get("family", ""),
        "compute_scale": p["options"].get("compute_scale", 1.0),
        "link_scale": p["options"].get("link_scale", 1.0),
        "zero": p["options"].get("memory", {}).get("zero_stage", 0),
        "verdict": pon.get("verdict"),
        "sharded": best_sharded,
    }


def reduction(pulse, base):
    if not (pulse["fits"] and base["fits"]) or base["p2p"] == 0:
        return None
    return 1 - pulse["p2p"] / base["p2p"]


def speedup(pulse, base):
    if not (pulse["fits"] and base["fits"]):
        return None
    return pulse["sps"] / base["sps"]


def traffic(r):
    """A reduction as a signed change in bytes: 0.8 -> "-80%", -0.1 -> "+10%"."""
    return "n/a (no P2P)" if r is None else f"{-100 * r:+.0f}%"


def times(x):
    return "n/a" if x is None else f"{x:.2f}x"


def best_baseline(rows):
    fitting = [s for s in BASELINES if rows[s]["fits"]]
    return max(fitting, key=lambda s: (rows[s]["sps"], s)) if fitting else None


def strategy_table(rows):
    out = ["| strategy | pp x dp, mb (M) | P2P GiB/iter | of it skips | iteration | samples/s "
           "| bubble | pulse: traffic | pulse: speedup |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    pulse = rows["pulse"]
    for s in STRATEGIES:
        r = rows[s]
        if not r["fits"]:
            out.append(f"| {s} | does not fit: {r['reason'].split(';')[0]} | | | | | | | |")
            continue
        red = "" if s == "pulse" else traffic(reduction(pulse, r))
        spd = "" if s == "pulse" else times(speedup(pulse, r))
        name = f"{s} ({r['family']})" if s == "pulse" and r.get("family") else s
        out.append(
            f"| {name} | {r['pp']} x {r['dp']}, {r['mb']} ({r['microbatches']}) | "
            f"{r['p2p'] / GIB:.2f} | {r['skip'] / GIB:.2f} | {1000 * r['iteration']:.1f} ms | "
            f"{r['sps']:.1f} | {100 * r['bubble']:.1f}% | {red} | {spd} |")
    return out


def sharded_cells(pulse):
    """The sharded data-parallel column (pp 1 over every device, the faster of ZeRO-2 and
    ZeRO-3 as pulse planned it) and the verdict: pulse's speedup over it, or what it is."""
    a = pulse.get("sharded") if pulse["fits"] else None
    if a is None:
        return "does not fit", pulse.get("verdict") or "n/a"
    cell = f"ZeRO-{a['zero_stage']}, mb {a['microbatch_size']}: {1000 * a['iteration_s']:.1f} ms"
    return cell, f"{pulse['verdict']} ({a['iteration_s'] / pulse['iteration']:.2f}x)"


def summary_table(results, mode):
    out = ["| model | cluster | pulse family | best baseline | traffic vs best "
           "| speedup vs best | traffic vs 1f1b | largest traffic cut (vs) "
           "| largest speedup (vs) | sharded dp (pp 1) | pipeline or not (vs sharded) |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---|---|"]
    for model, model_name in MODELS:
        for cluster, cluster_name, _ in CLUSTERS:
            rows = results[(model, cluster, mode)]
            pulse, best = rows["pulse"], best_baseline(rows)
            if not pulse["fits"] or best is None:
                family = pulse.get("family", "") if pulse["fits"] else ""
                cell, verdict = sharded_cells(pulse)
                out.append(f"| {model_name} | {cluster_name} | {family} | n/a | | | | | | "
                           f"{cell} | {verdict} |")
                continue
            cuts = [(reduction(pulse, rows[s]), s) for s in BASELINES
                    if reduction(pulse, rows[s]) is not None]
            ups = [(speedup(pulse, rows[s]), s) for s in BASELINES
                   if speedup(pulse, rows[s]) is not None]
            cut, cut_vs = max(cuts) if cuts else (None, "")
            up, up_vs = max(ups)
            red = reduction(pulse, rows[best])
            out.append(
                f"| {model_name} | {cluster_name} | {pulse['family']} | {best} | "
                f"{traffic(red)} | "
                f"{times(speedup(pulse, rows[best]))} | "
                f"{traffic(reduction(pulse, rows['1f1b']))} | "
                f"{'n/a' if cut is None else traffic(cut) + ' (' + cut_vs + ')'} | "
                f"{times(up)} ({up_vs}) | {' | '.join(sharded_cells(pulse))} |")
    return out


def losses(results):
    """Rows where pulse has fewer samples/s than its best baseline (there should be none)."""
    out = []
    for (model, cluster, mode), rows in sorted(results.items()):
        best = best_baseline(rows)
        if best is None or not rows["pulse"]["fits"]:
            continue
        if rows["pulse"]["sps"] < rows[best]["sps"]:
            out.append(f"{model} on {cluster} ({mode}): pulse {rows['pulse']['sps']:.3f} "
                       f"< {best} {rows[best]['sps']:.3f} samples/s")
    return out


def headline(results, mode):
    cuts, ups = [], []
    for (model, cluster, m), rows in results.items():
        if m != mode or not rows["pulse"]["fits"]:
            continue
        for s in BASELINES:
            if reduction(rows["pulse"], rows[s]) is not None:
                cuts.append((reduction(rows["pulse"], rows[s]), model, cluster, s))
            if speedup(rows["pulse"], rows[s]) is not None:
                ups.append((speedup(rows["pulse"], rows[s]), model, cluster, s))
    return max(cuts), max(ups)


# --- sensitivity ----------------------------------------------------------------------------

def load(path):
    with open(path) as f:
        return json.load(f)


def analytic_factor(model):
    """Train time per sample at microbatch 8 (or the largest size below) of the profile as it
    was before the calibration, over the shipped one, on SENS_DEVICE."""
    spec = next(x for x in model_specs() if x.name == model)
    size = max(b for b in spec.microbatch_sizes if b <= 8)
    before = timing.DEVICE_BUILDERS[SENS_DEVICE](*timing.ANALYTIC_PARAMS[SENS_DEVICE])
    now = timing.DEVICE_BUILDERS[SENS_DEVICE]()
    total = [0.0, 0.0]
    for layer in spec.build().layers:
        for k, dev in enumerate((before, now)):
            fwd, bwd, _ = timing.layer_times(layer, dev, size)
            total[k] += fwd + bwd
    return total[0] / total[1]


def time_range(model):
    for line in load(model_path(model))["provenance"]["assumptions"]:
        parsed = anchors.parse_range(line)
        if parsed and parsed[0] == SENS_DEVICE:
            return parsed[1], parsed[2]
    raise SystemExit(f"results_bench: {model} states no time range for {SENS_DEVICE}")


def sensitivity_conditions():
    """(model, cluster, condition label, factor, planner options) for every plan set."""
    out = []
    for model, _ in SENS_MODELS:
        low, high = time_range(model)
        analytic = analytic_factor(model)
        computes = [("analytic", analytic, ["--compute-scale", repr(analytic)]),
                    ("range low", low, ["--compute-scale", "range-low"]),
                    ("anchored", 1.0, []),
                    ("range high", high, ["--compute-scale", "range-high"])]
        for cluster, _, _ in SENS_CLUSTERS:
            for label, factor, options in sorted(computes, key=lambda x: x[1]):
                out.append((model, cluster, label, factor, options))
            for factor in LINK_SCALES:
                out.append((model, cluster, f"links x{factor:.4g}", factor,
                            ["--link-scale", repr(factor)]))
    return out


def sensitivity_jobs():
    jobs = []
    fixed = {c: pp for c, _, pp in CLUSTERS}
    for model, cluster, label, _, options in sensitivity_conditions():
        for mode, _ in SENS_MODES:
            pp = fixed[cluster] if mode == "fixed" else None
            for s in STRATEGIES:
                jobs.append(((model, cluster, label, mode), s, (model, cluster, s, pp, options)))
    return jobs


def check_recorded_scales(sens):
    """Every plan states the factor its condition names (range-low/high read by the planner
    from the same line time_range reads here)."""
    for model, cluster, label, factor, options in sensitivity_conditions():
        key = "link_scale" if label.startswith("links") else "compute_scale"
        for mode, _ in SENS_MODES:
            for s, r in sens[(model, cluster, label, mode)].items():
                if r["fits"] and abs(r[key] - factor) > 1e-12 * factor:
                    sys.exit(f"results_bench: {model} on {cluster}, {label}, {s}: the plan "
                             f"records {key} {r[key]}, expected {factor}")


def sensitivity_section(sens):
    lines = [
        "## Sensitivity: how much the 910A figures depend on the profiles and the links",
        "",
        "On the Ascend 910A clusters, every strategy planned again under each condition, at "
        "the fixed pipeline degree and tuned. *Compute*: every 910A time of the model profile "
        "multiplied by the factor shown (`pulse-plan plan --compute-scale`): `analytic` is the "
        "profile as it was before it was anchored to the public measurements (docs/profiles.md, "
        "Calibration: the 910A then ran SD2 2.3x faster), `range low` and `range high` the ends "
        "of the time range the profile states (`--compute-scale range-low`, `range-high`), "
        "`anchored` the shipped profile. *Links*: every link of the cluster made that many "
        "times as fast (`--link-scale`: bandwidth multiplied, latency divided), with the "
        "anchored profile.",
        "",
    ]
    names = dict(MODELS)
    cnames = {c: n for c, n, _ in CLUSTERS}
    for mode, title in SENS_MODES:
        reached = []
        lines += [f"### Sensitivity, {title}", "",
                  "| model | cluster | condition | x | best baseline | pulse traffic vs best "
                  "| pulse speedup vs best | largest speedup (vs) |",
                  "|---|---|---|---:|---|---:|---:|---:|"]
        for model, cluster, label, factor, _ in sensitivity_conditions():
            rows = sens[(model, cluster, label, mode)]
            pulse, best = rows["pulse"], best_baseline(rows)
            if not pulse["fits"] or best is None:
                lines.append(f"| {names[model]} | {cnames[cluster]} | {label} | {factor:.2f} "
                             "| n/a | | | |")
                continue
            ups = [(speedup(pulse, rows[b]), b) for b in BASELINES
                   if speedup(pulse, rows[b]) is not None]
            up, up_vs = max(ups)
            if up >= PAPER_SPEEDUP:
                reached.append(f"{names[model]} on {cnames[cluster]}, {label} ({up:.2f}x "
                               f"against {up_vs}; {times(speedup(pulse, rows[best]))} against "
                               f"the best baseline, {best})")
            lines.append(f"| {names[model]} | {cnames[cluster]} | {label} | {factor:.2f} | "
                         f"{best} | {traffic(reduction(pulse, rows[best]))} | "
                         f"{times(speedup(pulse, rows[best]))} | {times(up)} ({up_vs}) |")
        lines.append("")
        if reached:
            lines.append(f"{title.capitalize()}: the paper's {PAPER_SPEEDUP}x over some baseline "
                         "is reached in " + "; ".join(reached) + ".")
        else:
            lines.append(f"{title.capitalize()}: the paper's {PAPER_SPEEDUP}x is reached under "
                         "none of these conditions, against any baseline.")
        lines.append("")
    return lines


NEW_CLUSTERS = [c for c in CLUSTERS if not c[0].startswith(("dgx1-", "atlas800-910a"))]


def new_clusters_section(results):
    """What the 2026 clusters change, read from the plans: where pulse chose no pipeline,
    and the largest speedup and traffic cut on them."""
    names = dict(MODELS)
    lines = ["## The 2026 clusters", "",
             "H100, H200 and A100 run eager bf16 under a host/launch floor: below about "
             "microbatch 8 a stage costs what launching its kernels costs, so splitting a model "
             "into pipeline stages with small microbatches saves little time (docs/profiles.md, "
             "Host floor). The 910B runs in graph mode, where the floor is small.", ""]
    for cluster, cluster_name, _ in NEW_CLUSTERS:
        flat = [names[m] for m, _ in MODELS
                if results[(m, cluster, "tuned")]["pulse"].get("pp") == 1]
        lines.append(f"- {cluster_name}, tuned: pulse plans no pipeline (pp 1, data "
                     f"parallel only) for {'; '.join(flat) if flat else 'no model'}.")
    for mode, title in (("fixed", "fixed pp"), ("tuned", "tuned")):
        sub = {k: v for k, v in results.items() if k[1] in {c for c, _, _ in NEW_CLUSTERS}}
        (cut, cm, cc, cs), (up, um, uc, us) = headline(sub, mode)
        lines.append(f"- Largest on these clusters, {title}: traffic cut {traffic(cut)} ({cm} on "
                     f"{cc}, against {cs}); speedup {times(up)} ({um} on {uc}, against {us}).")
    return lines + [""]


def page(results, command, sens=None):
    lines = [
        "# Results: pulse against the baselines",
        "",
        "Generated by `" + command + "` (every figure below comes from the plans it makes; "
        "edit the script, not this page). The planner is deterministic, so the page "
        "regenerates byte-identical.",
        "",
        "**What is compared.** For each model and cluster every strategy is planned with the "
        f"same global batch ({SAMPLES_PER_DEVICE} samples per device: 64 on 8 devices, 256 on "
        "32) and evaluated by the same simulator on the same cost model (`pulse-plan "
        "simulate` replays any of these plans to the same figures). The denoiser alone, as "
        "the Pulse paper compares: the frozen encoders' outputs cached offline (`--frozen "
        "cached`), so their weights take no device memory; docs/frozen.md places them in the "
        "step (before it or in the pipeline's bubbles). *Tuned*: each strategy "
        "with its own best pipeline degree, data-parallel degree and microbatch size that "
        "fits. *Fixed pp*: pipeline degree 4 on 8 devices and 8 on 32 devices for every "
        "strategy (dp fills the cluster, microbatch size tuned), which isolates what the "
        "pipeline does. `pulse: traffic` is pulse's P2P bytes per iteration relative to that "
        "row (-80% = a fifth of the bytes), `pulse: speedup` pulse's samples/s over that row's. "
        "The best baseline is the one with the most samples/s. `sharded dp (pp 1)`: the "
        "faster of ZeRO-2 and ZeRO-3 data parallelism over every device, without a "
        "pipeline, as pulse plans it beside every plan (`pipeline_or_not` in the plan); "
        "`pipeline or not` is what pulse's plan is, and in brackets its samples/s over "
        "that sharded answer's. Under a fixed pp the pipeline is kept even where sharding "
        "is faster (below 1.00x); tuned, pulse adopts the faster (data parallel, or "
        "sharded data parallel when it needs ZeRO to fit).",
        "",
        "**What the numbers rest on.** The model profiles are analytic (FLOPs, parameters and "
        "activation bytes by formula from the published configurations, times from peak "
        "throughput times efficiencies fitted to published Stable Diffusion UNet throughput "
        "on V100 and Ascend 910A, docs/profiles.md, Calibration), the cluster profiles are "
        "vendor link figures with stated achieved-bandwidth factors; nothing here was "
        "measured by us on V100 or 910A hardware, and every profile states the range its "
        "times may be off by (the sensitivity section shows what the 910A range does). "
        "On H100, H200 and A100 the times describe pure bf16 in eager PyTorch under a "
        "host/launch floor fitted to our H200 and H100 measurements of the SD2 UNet (small "
        "microbatches cost what launching their kernels costs), on the 910B MindSpore graph "
        "mode fitted to the mindone 910B figures (docs/profiles.md, The 2026 devices); the "
        "links are NCCL/HCCL-measured bandwidths. docs/fidelity.md checks the simulator "
        "against real runs over emulated links on CPUs.",
        "",
    ]
    for mode, title in (("fixed", "Fixed pipeline degree"), ("tuned", "Tuned configurations")):
        (cut, cm, cc, cs), (up, um, uc, us) = headline(results, mode)
        lines += [
            f"## Summary: {title.lower()}",
            "",
            f"Largest traffic cut: {traffic(cut)} ({cm} on {cc}, against {cs}); largest speedup: "
            f"{times(up)} ({um} on {uc}, against {us}).",
            "",
        ] + summary_table(results, mode) + [""]
    for mode, title in (("fixed", "fixed pp"), ("tuned", "tuned")):
        lines += [f"## Every strategy, {title}", ""]
        for model, model_name in MODELS:
            for cluster, cluster_name, _ in CLUSTERS:
                lines += [f"### {model_name} on {cluster_name} ({title})", ""]
                lines += strategy_table(results[(model, cluster, mode)]) + [""]
    lines += new_clusters_section(results)
    if sens is not None:
        lines += sensitivity_section(sens)
    with open(os.path.join(ROOT, "docs", "results_notes.md")) as f:
        lines += [f.read().rstrip("\n")]
    return "\n".join(lines) + "\n"


def run_jobs(jobs, binary, workers):
    """jobs: (key, strategy, plan args); returns {key: {strategy: result}}."""
    out = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(plan, binary, *args): (key, s) for key, s, args in jobs}
        for done, f in enumerate(concurrent.futures.as_completed(futures), 1):
            key, s = futures[f]
            out.setdefault(key, {})[s] = f.result()
            if sys.stderr.isatty():
                print(f"\r{done}/{len(jobs)} plans", end="", file=sys.stderr, flush=True)
    print(f"\r{len(jobs)} plans", file=sys.stderr)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "pulse-plan"))
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "results.md"))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--no-sensitivity", action="store_true",
                   help="leave the sensitivity section out (it plans the 910A cases again "
                   "under every condition)")
    args = p.parse_args()
    jobs = []
    for model, _ in MODELS:
        for cluster, _, fixed_pp in CLUSTERS:
            for mode, pp in (("tuned", None), ("fixed", fixed_pp)):
                for s in STRATEGIES:
                    jobs.append(((model, cluster, mode), s, (model, cluster, s, pp)))
    results = run_jobs(jobs, args.binary, args.jobs)
    for line in losses(results):
        print(f"results_bench: pulse below its best baseline: {line}", file=sys.stderr)
    sens = None
    if not args.no_sensitivity:
        sens = run_jobs(sensitivity_jobs(), args.binary, args.jobs)
        check_recorded_scales(sens)
    command = "/usr/bin/python3 scripts/results_bench.py"
    text = page(results, command, sens)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
