#!/usr/bin/env python3
"""The JSON Schemas in schema/ are the contract: every shipped profile must satisfy its
schema, and so must every plan pulse-plan writes: every shipped model on both hardware
families with both strategies, every plan the golden CLI cases write, and the fixture plans
the golden cases read. Each of those plans must also pass `pulse-plan validate` against the
profiles it was made from, and `pulse-plan simulate --check` on its own cost model and on
that cluster (the report matching schema/simulation.schema.json). Uses Debian's python3-jsonschema.

Under the sanitizers, where the planner is about seven times slower, CMake passes
`--sample 5`: every fifth of each shipped model's cluster/strategy plans (at least one per
model, rotating from model to model so both strategies and both hardware families are met)
and every fifth of the golden cases' plans; the hand-picked option cases, the profiles and
the fixtures are all checked. The unsanitized suite checks all of them.

    /usr/bin/python3 tests/test_schemas.py --binary build/pulse-plan [--sample K]
"""
import argparse
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
import run_golden  # noqa: E402  (the golden runner: its case parser and runner)

BINARY = None
SAMPLE = 1  # --sample: keep one planned case in SAMPLE
FIXTURE_PLANS = os.path.join(ROOT, "tests", "cli", "fixtures", "plans")


def load(path):
    with open(path) as f:
        return json.load(f)


def validator(name):
    schema = load(os.path.join(ROOT, "schema", f"{name}.schema.json"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def schema_errors(plan):
    """Every way `plan` (a parsed document) breaks schema/plan.schema.json."""
    return [f"{list(e.path)}: {e.message}" for e in validator("plan").iter_errors(plan)]


def profile(kind, name):
    return os.path.join(ROOT, "profiles", kind + "s", name + ".json")


class Schemas(unittest.TestCase):
    def assert_valid_plan(self, path, model, cluster, label):
        self.assertEqual(schema_errors(load(path)), [], label)
        proc = subprocess.run([BINARY, "validate", path, "--model", model, "--cluster", cluster],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, f"{label}:\n{proc.stdout}{proc.stderr}")
        # The simulator replays the plan to exactly its own predicted figures, both on the
        # plan's cost model and on the cluster's; its report matches its schema.
        for extra in ([], ["--cluster", cluster]):
            proc = subprocess.run([BINARY, "simulate", path, "--json", "--check"] + extra,
                                  capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, f"{label} simulate {extra}:\n{proc.stderr}")
            report = json.loads(proc.stdout)
            errors = [e.message for e in validator("simulation").iter_errors(report)]
            self.assertEqual(errors, [], label)
            self.assertTrue(report["matches_plan"], label)

    def test_shipped_profiles_match_their_schemas(self):
        for kind in ("model", "cluster"):
            v = validator(kind)
            files = sorted(glob.glob(os.path.join(ROOT, "profiles", kind + "s", "*.json")))
            self.assertGreater(len(files), 0)
            for path in files:
                errors = [e.message for e in v.iter_errors(load(path))]
                self.assertEqual(errors, [], path)

    def test_plans_match_the_plan_schema(self):
        # Every shipped model on a V100 node and two 910A servers (or, for a model profiled
        # on other devices, on the first shipped cluster of its device type), both strategies.
        clusters = {os.path.basename(p)[:-5]: load(p)["device"]["type"]
                    for p in sorted(glob.glob(os.path.join(ROOT, "profiles", "clusters", "*.json")))}
        cases = []
        models = sorted(glob.glob(os.path.join(ROOT, "profiles", "models", "*.json")))
        for index, path in enumerate(models):
            types = load(path)["timing"]["device_types"]
            chosen = [c for c in ("dgx1-v100-32gb-1n", "atlas800-910a-2n") if clusters[c] in types]
            chosen = chosen or [c for c in clusters if clusters[c] in types][:1]
            mine = [(os.path.basename(path)[:-5], c, ["--strategy", s]) for c in chosen
                    for s in ("pulse", "sequential")]
            # Sampled: every SAMPLE-th of this model's cases, starting one further on for the
            # next model, so every model is met and the strategies and clusters alternate.
            start = index % len(mine)
            cases += (mine[start:] + mine[:start])[::SAMPLE]
        cases += [
            ("sd2-unet-512", "dgx1-v100-32gb-1n", ["--pp", "4"]),
            ("sd2-unet-512", "atlas800-910a-4n", ["--pp", "4", "--strategy", "sequential"]),
            ("hunyuan-dit-g2-512", "atlas800-910a-1n", ["--pp", "4", "--zero", "1"]),
            ("uvit-l2-256", "dgx1-v100-16gb-2n", ["--microbatch-size", "2"]),
            # What-if scales: recorded in options and cost_model, replayed and validated.
            ("sd2-unet-768", "atlas800-910a-2n",
             ["--pp", "4", "--compute-scale", "range-low", "--link-scale", "0.25"]),
        ]
        planned = 0
        with tempfile.TemporaryDirectory() as tmp:
            for model, cluster, extra in cases:
                out = os.path.join(tmp, "plan.json")
                cmd = [BINARY, "plan", "--quiet", "-o", out, "--model", profile("model", model),
                       "--cluster", profile("cluster", cluster)] + extra
                if subprocess.run(cmd, capture_output=True).returncode == 1:
                    continue  # does not fit this cluster
                self.assertTrue(os.path.exists(out), " ".join(cmd))
                self.assert_valid_plan(out, profile("model", model), profile("cluster", cluster),
                                       f"{model} on {cluster} {extra}")
                os.remove(out)
                planned += 1
        self.assertGreaterEqual(planned, 30 // SAMPLE)

    def test_plans_the_golden_cases_write(self):
        """Every case that runs `plan` successfully: its plan (file or stdout) is checked."""
        root, checked, seen = Path(ROOT), 0, 0
        for path in sorted(Path(ROOT, "tests/cli/cases").glob("*.case")):
            case = run_golden.parse_case(path)
            if not case.args.startswith("plan ") or case.exit != 0 or case.xfail:
                continue
            seen += 1
            if (seen - 1) % SAMPLE:
                continue
            keep = []
            try:
                run = run_golden.run_once(case, Path(BINARY), root, keep)
                if run.exit != 0:
                    continue  # the golden runner reports that
                words = shlex.split(run_golden.substitute(case.args, root, run.tmp))
                if "--model" not in words or "--cluster" not in words:
                    continue  # plan --help and the like
                model = os.path.join(run.tmp, words[words.index("--model") + 1])
                cluster = os.path.join(run.tmp, words[words.index("--cluster") + 1])
                outputs = [str(p) for p in run.tmp.rglob("*.json")
                           if load(p).get("schema") in ("pulse.plan/v1", "pulse.plan/v2")]
                if run.stdout.startswith('{\n  "schema": "pulse.plan/'):
                    outputs.append(os.path.join(run.tmp, "stdout.plan.json"))
                    with open(outputs[-1], "w") as f:
                        f.write(run.stdout)
                for out in outputs:
                    self.assert_valid_plan(out, model, cluster, f"{path.name}: {out}")
                    checked += 1
            finally:
                for tmp in keep:
                    shutil.rmtree(tmp, ignore_errors=True)
        self.assertGreater(checked, 5 // SAMPLE)

    def test_fixture_plans_match_the_plan_schema(self):
        files = sorted(glob.glob(os.path.join(FIXTURE_PLANS, "*.plan.json")))
        self.assertGreater(len(files), 0)
        for path in files:
            self.assertEqual(schema_errors(load(path)), [], path)

    def test_schema_rejects_a_broken_plan(self):
        # The schema must be able to fail: a plan with an op kind it does not know.
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "plan.json")
            subprocess.run([BINARY, "plan", "--quiet", "-o", out,
                            "--model", profile("model", "tiny-unet"),
                            "--cluster", profile("cluster", "dgx1-v100-32gb-1n")], check=True)
            plan = load(out)
            plan["schedule"][0]["ops"][0]["op"] = "X"
            self.assertTrue(schema_errors(plan))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--sample", type=int, default=1, metavar="K",
                        help="check one planned case in K (default 1: all)")
    args, rest = parser.parse_known_args()
    if args.sample < 1:
        parser.error(f"--sample must be 1 or more, not {args.sample}")
    BINARY = os.path.abspath(args.binary)
    SAMPLE = args.sample
    unittest.main(argv=[sys.argv[0]] + rest)
