#!/usr/bin/env python3
"""`pulse-plan export --format torch-csv` against PyTorch's loader rules.

PyTorch (torch.distributed.pipelining, 2.4 and later) loads a custom schedule with
`PipelineScheduleMulti._load_csv(path, format="compute_only")`: csv.reader, row r is
pipeline rank r, each cell `_Action.from_str` (stripped; empty is idle; otherwise the
regex `(\\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\\d*)`), then
`_validate_schedule`: one row per rank of the pipeline group; a B or I only after the F of
its stage and microbatch, a W only after its I; every stage on exactly one rank (that is
how the stage -> rank map is inferred); per stage, as many distinct F microbatches as
microbatches, I count = W count, and B + (I + W) / 2 = microbatches. `load_compute_only`
below restates those rules (PyTorch is not installed here), plus what its runtime
requires of compute-only schedules (a microbatch index on every action). The side file
(pulse.torch-stages/v1) must agree with the plan.

    /usr/bin/python3 tests/test_torch_csv.py --binary build/pulse-plan
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from test_schemas import schema_errors  # noqa: E402

BINARY = None
ACTION = re.compile(r"(\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)")


class LoaderError(Exception):
    """What PyTorch's loader would raise (AssertionError/RuntimeError there)."""


def parse_action(cell):
    cell = cell.strip()
    if cell == "":
        return None
    m = ACTION.fullmatch(cell)
    if not m:
        raise LoaderError(f"Invalid action string: {cell}")
    stage, kind, mb = m.groups()
    if kind not in ("F", "I", "B", "W"):
        raise LoaderError(f"{cell}: not a compute action (format compute_only)")
    if mb == "":
        raise LoaderError(f"{cell}: compute actions require a microbatch index")
    return int(stage), kind, int(mb)


def load_compute_only(path, pp_group_size, num_stages, num_microbatches):
    """Returns PyTorch's stage -> rank map for the CSV, or raises LoaderError."""
    with open(path, newline="") as f:
        actions = {rank: [parse_action(c) for c in row] for rank, row in enumerate(csv.reader(f))}
    if len(actions) != pp_group_size:
        raise LoaderError(f"Schedule has incorrect number of ranks - expected {pp_group_size}, "
                          f"actual {len(actions)}")
    seen = {s: {"F": set(), "B": set(), "I": set(), "W": set()} for s in range(num_stages)}
    stage_to_rank = {}
    for rank in range(pp_group_size):
        for step, action in enumerate(actions[rank]):
            if action is None:
                continue
            stage, kind, mb = action
            if stage not in seen:
                raise LoaderError(f"Rank {rank}, step {step}: stage {stage} out of range")
            if kind in ("B", "I") and mb not in seen[stage]["F"]:
                raise LoaderError(f"Rank {rank}, step {step}: Running {kind} for stage {stage}, "
                                  f"microbatch {mb} without first running Forward")
            if kind == "W" and mb not in seen[stage]["I"]:
                raise LoaderError(f"Rank {rank}, step {step}: Running Backward Weight for stage "
                                  f"{stage}, microbatch {mb} without first running Backward "
                                  f"Input")
            seen[stage][kind].add(mb)
            if stage_to_rank.setdefault(stage, rank) != rank:
                raise LoaderError(f"Rank {rank}, step {step}: Stage {stage} is assigned to both "
                                  f"rank {rank} and rank {stage_to_rank[stage]}")
    for s, kinds in seen.items():
        f, b, i, w = (len(kinds[k]) for k in "FBIW")
        if f != num_microbatches:
            raise LoaderError(f"Got {f} F microbatches for stage {s}, expected "
                              f"{num_microbatches}")
        if i != w:
            raise LoaderError(f"Invalid backward microbatches for stage {s}: I and W must have "
                              f"equal counts, but got I={i}, W={w}")
        if b + (i + w) // 2 != num_microbatches:
            raise LoaderError(f"Invalid backward microbatches for stage {s}: expected "
                              f"{num_microbatches} total backwards, but got B={b}, I={i}, W={w}")
    return stage_to_rank


def split_backward(plan):
    """The plan with every B turned into I then W (what a split-backward planner writes)."""
    for device in plan["schedule"]:
        ops = []
        for op in device["ops"]:
            if op["op"] != "B":
                ops.append(op)
                continue
            middle = round((op["start_s"] + op["end_s"]) / 2, 9)
            ops.append(dict(op, op="I", end_s=middle))
            ops.append(dict(op, op="W", start_s=middle))
        device["ops"] = ops
    plan["schedule_info"]["split_backward"] = True
    return plan


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


class TorchCsv(unittest.TestCase):
    CASES = [
        ("tiny-unet", "dgx1-v100-32gb-1n", ["--pp", "2"]),
        ("sd2-unet-512", "dgx1-v100-32gb-1n", []),
        ("sd2-unet-512", "atlas800-910a-2n", ["--pp", "8"]),
        ("sd2-unet-512", "dgx1-v100-32gb-1n", ["--pp", "4", "--strategy", "sequential"]),
        ("hunyuan-dit-g2-512", "atlas800-910a-1n", ["--pp", "4"]),
        ("flux1-dev-1024", "dgx1-v100-32gb-1n", []),
    ]

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def plan(self, model, cluster, extra):
        out = os.path.join(self.tmp.name, "plan.json")
        subprocess.run([BINARY, "plan", "--quiet", "-o", out,
                        "--model", os.path.join(ROOT, "profiles/models", model + ".json"),
                        "--cluster", os.path.join(ROOT, "profiles/clusters", cluster + ".json")]
                       + extra, check=True)
        with open(out) as f:
            return json.load(f)

    def export(self, plan):
        path = os.path.join(self.tmp.name, "in.json")
        with open(path, "w") as f:
            json.dump(plan, f)
        csv_path = os.path.join(self.tmp.name, "out.csv")
        subprocess.run([BINARY, "export", path, "--format", "torch-csv", "-o", csv_path],
                       check=True)
        with open(os.path.join(self.tmp.name, "out.stages.json")) as f:
            return csv_path, json.load(f)

    def check(self, plan, label):
        self.assertEqual(schema_errors(plan), [], label)  # every plan a test makes
        csv_path, side = self.export(plan)
        par = plan["parallelism"]
        stage_to_rank = load_compute_only(csv_path, par["pp"], par["num_stages"],
                                          par["num_microbatches"])
        self.assertEqual(stage_to_rank, {s["id"]: s["device"] for s in plan["stages"]}, label)
        with open(csv_path, newline="") as f:
            rows = list(csv.reader(f))
        for d, device in enumerate(plan["schedule"]):
            self.assertEqual(rows[d], [f"{o['stage']}{o['op']}{o['mb']}" for o in device["ops"]])
        self.assertEqual([s["layers"] for s in side["stages"]],
                         [s["layers"] for s in plan["stages"]], label)
        for rank in side["ranks"]:
            local = sorted(k["name"] for k in plan["skips"]
                           if k["producer_device"] == k["consumer_device"] == rank["rank"])
            self.assertEqual(sorted(k["name"] for k in rank["cached_skips"]), local, label)
        remote = [k["name"] for k in plan["skips"] if k["producer_device"] != k["consumer_device"]]
        self.assertEqual([k["name"] for k in side["remote_skips"]], remote, label)

    def test_exported_schedules_load(self):
        for model, cluster, extra in self.CASES:
            plan = self.plan(model, cluster, extra)
            self.check(plan, f"{model} on {cluster} {extra}")
            self.check(split_backward(plan), f"{model} on {cluster} {extra}, split backward")

    def test_loader_rules_can_fail(self):
        M = 2
        cases = {
            "Schedule has incorrect number of ranks - expected 2, actual 1":
                [["0F0", "0F1", "0B0", "0B1"]],
            "Rank 1, step 0: Stage 0 is assigned to both rank 1 and rank 0":
                [["0F0", "0B0"], ["0F1", "0B1"]],
            "Rank 0, step 0: Running B for stage 0, microbatch 0 without first running Forward":
                [["0B0", "0F0", "0F1", "0B1"], ["1F0", "1F1", "1B0", "1B1"]],
            "Rank 0, step 2: Running Backward Weight for stage 0, microbatch 0 without first "
            "running Backward Input":
                [["0F0", "0F1", "0W0", "0I0"], ["1F0", "1F1", "1B0", "1B1"]],
            "Got 1 F microbatches for stage 1, expected 2":
                [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0"]],
            "Invalid backward microbatches for stage 0: I and W must have equal counts, but got "
            "I=2, W=1":
                [["0F0", "0F1", "0I0", "0I1", "0W0"], ["1F0", "1F1", "1B0", "1B1"]],
            "Invalid backward microbatches for stage 1: expected 2 total backwards, but got B=1, "
            "I=0, W=0":
                [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1F1", "1B0"]],
            "Invalid action string: 0X0": [["0X0"], ["1F0"]],
        }
        path = os.path.join(self.tmp.name, "bad.csv")
        for message, rows in cases.items():
            write_csv(path, rows)
            with self.assertRaises(LoaderError) as e:
                load_compute_only(path, 2, 2, M)
            self.assertEqual(str(e.exception), message)
        write_csv(path, [["0F0", "0F1", "", "0I0", "0W0", "0B1"], ["1F0", "1F1", "1B0", "1B1"]])
        self.assertEqual(load_compute_only(path, 2, 2, M), {0: 0, 1: 1})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args, rest = parser.parse_known_args()
    BINARY = os.path.abspath(args.binary)
    unittest.main(argv=[sys.argv[0]] + rest)
