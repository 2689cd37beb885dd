#!/usr/bin/env python3
"""`pulse-plan export --format torch-csv` judged by PyTorch's own schedule rules.

PyTorch (torch.distributed.pipelining, 2.4 and later) takes the CSV two ways:
`PipelineScheduleMulti._load_csv(path)` runs it lock-step (step t on every rank at once),
and `_PipelineScheduleRuntime._load_csv(path, format="compute_only")` lowers it to explicit
sends and receives first. tests/torch_rules.py restates both from PyTorch's source
(pytorch/pytorch torch/distributed/pipelining/schedules.py at commit
00722e648b740f91d0e71494baa17891749fd291, stage.py at 0138610331c90b8053a0bfc6df0175b200a1cad2),
since the installed PyTorch (1.13) predates them. Every export is checked for:

  loader      `_validate_schedule`: one row per rank, every stage on one row, F/I/B/W counts
  runtime     the `_PipelineScheduleRuntime` lowering (no deadlocking order) and a dry run of
              its executor (inputs received before use, sends and receives paired in order,
              the last stage's losses taken in microbatch order)
  rank_order  row g is the process with group rank g: `new_group` sorts its ranks (checked
              here with real gloo processes), so for every replica the ops of pipeline device
              d must be on row `sorted(G).index(G[d])`, G its pipeline group
  plan_order  every row is one device's ops, exactly in the plan's order
  lock_step   `PipelineScheduleMulti`: no consumer at the step of its producer or earlier
  side_file   the stages file agrees with the plan (rows, devices, global ranks, skips)

The corpus is every shipped model on one node of its first device type (a DGX-1, or the CPU
host for the measured CPU profile; SD2 512 and Hunyuan-DiT 512 also on a 910A node) at pp
1..8 with every strategy, with and without split backward (list schedules,
`--solver-time-limit 0`, to keep it near a minute), plus a few default plans. Under the
sanitizers, where the planner is about seven times slower, CMake passes `--sample 5`: each
model's grid keeps one case in five, rotating from model to model, so every (strategy, pp,
split) kind is still exported and checked; the unsanitized suite checks the whole grid.

Plans with several stages per side on each device, as the wave placement writes them, are
in the corpus too: planner plans rewritten as waves by tests/plan_edits.py (SD2 on a DGX-1 at
pp 2 and 4, 2 and 3 stages per side on each device, with and without split backward).

Two exports of each plan are checked (`--export cxx,reference`, the default). `cxx` is the
binary's, `reference` is tests/torch_export_ref.py, the format (`pulse.torch-stages/v2`)
written in Python. Both must pass every check on the whole corpus, and the binary's files
must be the reference's: the same CSV text, the same side file. The same export with its
rows put back in pipeline-device order (the old v1 export's order) must fail rank_order
(SD2 pp 4 on a DGX-1). The rules' own negative controls (a deadlocking order, a last stage
whose forwards are out of microbatch order, a consumer in its producer's step, receives
paired out of order, the loader's errors) and the real gloo check of `new_group`'s
numbering are in tests/test_torch_rules.py.

    /usr/bin/python3 tests/test_torch_csv.py --binary build/pulse-plan [--export cxx] [--sample K]
    /usr/bin/python3 tests/test_torch_csv.py --check plan.json out.csv out.stages.json
"""
import argparse
import concurrent.futures
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import torch_export_ref  # noqa: E402
from plan_edits import wave_plan  # noqa: E402
import torch_rules as rules  # noqa: E402
from test_schemas import schema_errors  # noqa: E402

BINARY = None
EXPORTS = ("cxx", "reference")
JOBS = 2
SAMPLE = 1  # --sample: one grid case in SAMPLE (tests/CMakeLists.txt: 5 under the sanitizers)
CHECKS = ("loader", "runtime", "rank_order", "plan_order", "lock_step", "side_file")
STRATEGIES = ("pulse", "v-naive", "1f1b", "1f1b-direct", "gpipe")


class CheckFailed(Exception):
    pass


def fail_unless(condition, message):
    if not condition:
        raise CheckFailed(message)


# --- the checks ----------------------------------------------------------------------------

def cell(op):
    return f"{op['stage']}{op['op']}{op['mb']}"


def check_export(plan, csv_path, side):
    """{check: None when it passes, else the reason}."""
    par = plan["parallelism"]
    pp, num_stages, m = par["pp"], par["num_stages"], par["num_microbatches"]
    stage_device = {s["id"]: s["device"] for s in plan["stages"]}
    state = {}

    def loader():
        state["rows"], state["stage_row"] = rules.load_compute_only(csv_path, pp, num_stages, m)

    def runtime():
        lowered = rules.lower_compute_only(state["rows"], state["stage_row"], num_stages, m)
        rules.run_runtime(lowered, state["stage_row"], num_stages)

    def rank_order():
        groups = plan["rank_map"]["pipeline_groups"]
        for k, group in enumerate(groups):
            for s, d in sorted(stage_device.items()):
                want = rules.group_rank(group[d], group)
                fail_unless(state["stage_row"][s] == want,
                            f"stage {s} (device {d}) is on row {state['stage_row'][s]}, but "
                            f"replica {k} runs device {d} as global rank {group[d]}, group rank "
                            f"{want} of new_group({group})")

    def plan_order():
        ops = {e["device"]: e["ops"] for e in plan["schedule"]}
        with open(csv_path, newline="") as f:
            raw = list(csv.reader(f))
        for r, row in state["rows"].items():
            devices = {stage_device[a.stage] for a in row if a is not None}
            fail_unless(len(devices) == 1, f"row {r} mixes the stages of devices {devices}")
            d = devices.pop()
            cells = [c for c in raw[r] if c.strip()]
            fail_unless(cells == [cell(o) for o in ops[d]],
                        f"row {r} is not device {d}'s op list in the plan's order")
            fail_unless(all(c == "" for c in raw[r] if not c.strip()),
                        f"row {r} has blank cells that are not empty")

    def lock_step():
        rules.run_lock_step(state["rows"], state["stage_row"], num_stages)

    def side_file():
        check_side_file(plan, side, state.get("stage_row"))

    results = {}
    for name, fn in (("loader", loader), ("runtime", runtime), ("rank_order", rank_order),
                     ("plan_order", plan_order), ("lock_step", lock_step),
                     ("side_file", side_file)):
        if name != "loader" and "stage_row" not in state:
            results[name] = "not run: the loader rejected the CSV"
            continue
        try:
            fn()
            results[name] = None
        except (rules.ScheduleError, CheckFailed) as e:
            results[name] = str(e)
    return results


def check_side_file(plan, side, stage_row):
    stage_device = {s["id"]: s["device"] for s in plan["stages"]}
    fail_unless([s["layers"] for s in side["stages"]] == [s["layers"] for s in plan["stages"]],
                "stage layer lists differ from the plan's")
    local = {d: sorted(k["name"] for k in plan["skips"] if stage_device[k["producer_stage"]]
                       == d == stage_device[k["consumer_stage"]])
             for d in set(stage_device.values())}
    remote = [k["name"] for k in plan["skips"]
              if stage_device[k["producer_stage"]] != stage_device[k["consumer_stage"]]]
    fail_unless([k["name"] for k in side["remote_skips"]] == remote, "remote skips differ")
    if side["schema"] == "pulse.torch-stages/v1":  # ranks[] is indexed by pipeline device
        for entry in side["ranks"]:
            fail_unless(sorted(k["name"] for k in entry["cached_skips"]) == local[entry["rank"]],
                        f"cached skips of device {entry['rank']} differ")
        return
    fail_unless(side["schema"] == "pulse.torch-stages/v2", f"unknown schema {side['schema']}")
    fail_unless(side["csv_rows"] == "group_rank" and side["csv_idle_cells"] == "lock_step"
                and side["csv_format"] == "compute_only", "csv_* keys do not describe the CSV")
    groups = plan["rank_map"]["pipeline_groups"]
    fail_unless(side["pipeline_groups"] == groups, "pipeline_groups differ from the plan's")
    row_device = {stage_row: stage_device[s] for s, stage_row in stage_row.items()}
    fail_unless(side["row_devices"] == [row_device[g] for g in range(len(row_device))],
                "row_devices does not name each row's device")
    for g, entry in enumerate(side["ranks"]):
        d = row_device[g]
        fail_unless(entry["group_rank"] == g and entry["device"] == d,
                    f"ranks[{g}] does not describe row {g} (device {d})")
        fail_unless(entry["stages"] == sorted(s for s, r in stage_row.items() if r == g),
                    f"ranks[{g}].stages differ from row {g}'s")
        fail_unless(entry["global_ranks"] == [group[d] for group in groups],
                    f"ranks[{g}].global_ranks are not device {d}'s ranks")
        fail_unless(sorted(k["name"] for k in entry["cached_skips"]) == local[d],
                    f"ranks[{g}].cached_skips differ")
    for s in side["stages"]:
        fail_unless(s["group_rank"] == stage_row[s["stage"]]
                    and s["device"] == stage_device[s["stage"]], f"stage {s['stage']}: row")
    for k in side["remote_skips"]:
        fail_unless(k["producer_group_rank"] == stage_row[k["producer_stage"]]
                    and k["consumer_group_rank"] == stage_row[k["consumer_stage"]],
                    f"remote skip {k['name']}: group ranks")


# --- planning and exporting ----------------------------------------------------------------

def clusters_for(model_path):
    """One node of each device type the model has times for (the largest memory); the
    910A only for the models whose plans for it the docs discuss, and of the 2026 devices
    none (their plans have the same shape), to keep the corpus to a minute."""
    with open(model_path) as f:
        types = json.load(f)["timing"]["device_types"]
    types = [t for t in types if t not in ("H100-SXM", "H200-SXM", "A100-SXM", "Ascend-910B")]
    name = os.path.basename(model_path)[:-5]
    if name not in ("sd2-unet-512", "hunyuan-dit-g2-512"):
        types = types[:1]
    best = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "profiles", "clusters", "*.json"))):
        with open(path) as f:
            c = json.load(f)
        if c["nodes"] != 1 or c["device"]["type"] not in types or c["devices_per_node"] < 8:
            continue
        key = c["device"]["type"]
        if key not in best or c["device"]["memory_bytes"] > best[key][0]:
            best[key] = (c["device"]["memory_bytes"], path)
    return [p for _, p in sorted(best.values(), key=lambda v: v[1])]


def corpus():
    """(label, plan arguments, stages per side on each device for a wave rewrite or None).
    With SAMPLE k > 1, the grid of each model and cluster keeps one (pp, strategy, split) in
    k, a different one for the next pair, so every kind is still met."""
    pairs = [(model, cluster)
             for model in sorted(glob.glob(os.path.join(ROOT, "profiles", "models", "*.json")))
             for cluster in clusters_for(model)]
    grid = [(pp, strategy, split) for pp in range(1, 9) for strategy in STRATEGIES
            for split in (False, True)]
    for index, (model, cluster) in enumerate(pairs):
        base = ["--model", model, "--cluster", cluster]
        name = f"{os.path.basename(model)[:-5]} on {os.path.basename(cluster)[:-5]}"
        for kind, (pp, strategy, split) in enumerate(grid):
            if (index + kind) % SAMPLE:
                continue
            args = base + ["--pp", str(pp), "--strategy", strategy, "--solver-time-limit", "0"]
            label = f"{name} pp {pp} {strategy}"
            if split:
                args.append("--split-backward")
                label += " split"
            yield label, args, None
    # A few plans with the default schedule synthesis, including the SD2 pp 4.
    for model, cluster, extra in (("sd2-unet-512", "dgx1-v100-32gb-1n", ["--pp", "4"]),
                                  ("sd2-unet-512", "atlas800-910a-2n", ["--pp", "8"]),
                                  ("hunyuan-dit-g2-512", "atlas800-910a-1n", ["--pp", "4"]),
                                  ("tiny-unet", "dgx1-v100-32gb-2n", ["--pp", "2"])):
        yield (f"{model} on {cluster} {' '.join(extra)} (default solver)",
               ["--model", os.path.join(ROOT, "profiles", "models", model + ".json"),
                "--cluster", os.path.join(ROOT, "profiles", "clusters", cluster + ".json")]
               + extra, None)
    # Waves: several stages per side on each device, rank groups as the planner placed them.
    sd2 = ["--model", os.path.join(ROOT, "profiles", "models", "sd2-unet-512.json"),
           "--cluster", os.path.join(ROOT, "profiles", "clusters", "dgx1-v100-32gb-1n.json"),
           "--strategy", "1f1b", "--solver-time-limit", "0"]
    for pp in (2, 4):
        for k in (2, 3):
            for split in (False, True):
                yield (f"sd2-unet-512 on dgx1-v100-32gb-1n pp {pp} waves k {k}"
                       + (" split" if split else ""),
                       sd2 + ["--pp", str(pp)] + (["--split-backward"] if split else []), k)


def make_plan(workdir, label, args):
    """The plan, or None when the planner finds none (or the pipeline degree is too deep for
    the model)."""
    out = os.path.join(workdir, "plan.json")
    proc = subprocess.run([BINARY, "plan", "--quiet", "-o", out] + args, capture_output=True,
                          text=True)
    if proc.returncode == 1 or (proc.returncode == 2 and "needs at least" in proc.stderr):
        return None
    if proc.returncode != 0:
        raise AssertionError(f"{label}: pulse-plan plan exited {proc.returncode}: {proc.stderr}")
    with open(out) as f:
        return json.load(f)


def export(plan, workdir, how):
    """Writes the plan's torch-csv export (`how`: cxx or reference); returns (csv path, side
    file)."""
    csv_path = os.path.join(workdir, how + ".csv")
    stages = os.path.join(workdir, how + ".stages.json")
    if how == "reference":
        torch_export_ref.export(plan, csv_path, stages)
    else:
        path = os.path.join(workdir, "in.json")
        with open(path, "w") as f:
            json.dump(plan, f)
        subprocess.run([BINARY, "export", path, "--format", "torch-csv", "-o", csv_path],
                       check=True)
    with open(stages) as f:
        return csv_path, json.load(f)


def one_case(item):
    """(label, plan or None, {export: (side file schema, check results, CSV text, side
    file)})."""
    label, args, waves = item
    with tempfile.TemporaryDirectory() as tmp:
        plan = make_plan(tmp, label, args)
        if plan is None:
            return label, None, {}
        if waves:
            with open(args[args.index("--model") + 1]) as f:
                plan = wave_plan(plan, json.load(f), waves)
        out = {}
        for how in EXPORTS:
            csv_path, side = export(plan, tmp, how)
            with open(csv_path) as f:
                text = f.read()
            out[how] = (side["schema"], check_export(plan, csv_path, side), text, side)
        return label, plan, out


def run_corpus(cases):
    # Processes, not threads: the checks are Python and would hold one core.
    with concurrent.futures.ProcessPoolExecutor(max_workers=JOBS) as pool:
        return list(pool.map(one_case, cases, chunksize=8))


class Exports(unittest.TestCase):
    """Every export of the corpus against every check."""

    @classmethod
    def setUpClass(cls):
        results = run_corpus(list(corpus()))
        cls.planned = [r for r in results if r[1] is not None]
        cls.unplanned = len(results) - len(cls.planned)

    def test_corpus_is_broad(self):
        self.assertGreater(len(self.planned), 500 // SAMPLE)
        for label, plan, _ in self.planned[::25]:  # a sample: schema_errors is slow
            self.assertEqual(schema_errors(plan), [], label)
        kinds = {(p["options"]["strategy"], p["parallelism"]["pp"],
                  p["schedule_info"]["split_backward"]) for _, p, _ in self.planned}
        for strategy in ("pulse", "1f1b", "gpipe"):
            for pp in range(1, 9):
                for split in (False, True):
                    self.assertIn((strategy, pp, split), kinds)

    def failures(self, how):
        failures = {name: [] for name in CHECKS}
        schemas = set()
        for label, _, out in self.planned:
            schema, res = out[how][:2]
            schemas.add(schema)
            for name, why in res.items():
                if why is not None:
                    failures[name].append(f"{label}: {why}")
        self.assertEqual(len(schemas), 1, schemas)
        counts = ", ".join(f"{name} {len(failures[name])}" for name in CHECKS)
        print(f"\n{how} export ({schemas.copy().pop()}): {len(self.planned)} exports, "
              f"{self.unplanned} cases without a plan; failures by check: {counts}",
              file=sys.stderr)
        return failures, schemas.pop()

    def test_reference_export(self):
        if "reference" not in EXPORTS:
            self.skipTest("--export does not include reference")
        failures, schema = self.failures("reference")
        self.assertEqual(schema, "pulse.torch-stages/v2")
        for name in CHECKS:
            self.assertEqual(failures[name], [], f"{name} failed")

    def test_cxx_export(self):
        if "cxx" not in EXPORTS:
            self.skipTest("--export does not include cxx")
        failures, schema = self.failures("cxx")
        self.assertEqual(schema, "pulse.torch-stages/v2")
        for name in CHECKS:
            self.assertEqual(failures[name], [], f"{name} failed")

    def test_waves_are_in_the_corpus(self):
        waves = [plan for label, plan, _ in self.planned if "waves" in label]
        self.assertEqual(len(waves), 8)
        for plan in waves:
            per_device = {}
            for stage in plan["stages"]:
                per_device[stage["device"]] = per_device.get(stage["device"], 0) + 1
            self.assertGreaterEqual(min(per_device.values()), 4, per_device)
        self.assertTrue(any(p["rank_map"]["pipeline_groups"][0] == [0, 3, 2, 1] for p in waves))

    def test_cxx_export_is_the_reference(self):
        if set(EXPORTS) != {"cxx", "reference"}:
            self.skipTest("--export does not include both cxx and reference")
        differ = []
        for label, _, out in self.planned:
            cxx, ref = out["cxx"], out["reference"]
            if cxx[2] != ref[2]:
                differ.append(f"{label}: the CSVs differ")
            if cxx[3] != ref[3]:
                keys = [k for k in ref[3] if cxx[3].get(k) != ref[3][k]]
                differ.append(f"{label}: the side files differ in {keys}")
        self.assertEqual(differ, [])


class RowsOutOfGroupRankOrder(unittest.TestCase):
    """The negative control that needs the planner: rows in pipeline-device order."""

    def test_rows_not_in_group_rank_order(self):
        # The case: SD2 pp 4 on a DGX-1, pipeline group [0, 3, 2, 1]. The reference
        # export with its rows put back in pipeline-device order fails rank_order only.
        with tempfile.TemporaryDirectory() as tmp:
            plan = make_plan(tmp, "sd2", [
                "--model", os.path.join(ROOT, "profiles/models/sd2-unet-512.json"),
                "--cluster", os.path.join(ROOT, "profiles/clusters/dgx1-v100-32gb-1n.json"),
                "--pp", "4", "--solver-time-limit", "0"])
            self.assertEqual(plan["rank_map"]["pipeline_groups"][0], [0, 3, 2, 1])
            csv_path, side = export(plan, tmp, "reference")
            self.assertEqual(side["row_devices"], [0, 3, 2, 1])
            self.assertTrue(all(v is None for v in check_export(plan, csv_path, side).values()))
            with open(csv_path) as f:
                lines = f.readlines()
            with open(csv_path, "w") as f:
                f.writelines(lines[side["row_devices"].index(d)] for d in range(4))
            got = check_export(plan, csv_path, side)
        self.assertEqual(got["rank_order"], "stage 1 (device 1) is on row 1, but replica 0 runs "
                         "device 1 as global rank 3, group rank 3 of new_group([0, 3, 2, 1])")
        self.assertEqual([n for n, why in got.items() if why], ["rank_order", "side_file"])


def check_files(plan_path, csv_path, stages_path):
    """--check: judge one export (any producer's) and print the verdict per check."""
    with open(plan_path) as f:
        plan = json.load(f)
    with open(stages_path) as f:
        side = json.load(f)
    results = check_export(plan, csv_path, side)
    for name in CHECKS:
        print(f"{name:11} {'ok' if results[name] is None else 'FAIL: ' + results[name]}")
    return 1 if any(results.values()) else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", help="pulse-plan (required unless --check)")
    parser.add_argument("--export", default="cxx,reference",
                        help="comma-separated: cxx (the binary's export), reference")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sample", type=int, default=1, metavar="K",
                        help="plan one case in K of each model's pp x strategy x split grid "
                             "(rotating, so every kind is still met); default 1: all")
    parser.add_argument("--check", nargs=3, metavar=("PLAN", "CSV", "STAGES"),
                        help="only judge these three files; exit 1 if a check fails")
    args, rest = parser.parse_known_args()
    if args.check:
        sys.exit(check_files(*args.check))
    if not args.binary:
        parser.error("--binary is required (or --check)")
    if args.sample < 1:
        parser.error(f"--sample must be 1 or more, not {args.sample}")
    BINARY, EXPORTS, JOBS = os.path.abspath(args.binary), args.export.split(","), args.jobs
    SAMPLE = args.sample
    unittest.main(argv=[sys.argv[0]] + rest)
