#!/usr/bin/env python3
"""The JSON Schemas in schema/ are the contract: every shipped profile must satisfy its
schema, and so must every plan pulse-plan writes (planned here for a few shipped models,
both strategies). Uses Debian's python3-jsonschema.

    /usr/bin/python3 tests/test_schemas.py --binary build/pulse-plan
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = None


def load(path):
    with open(path) as f:
        return json.load(f)


class Schemas(unittest.TestCase):
    def validator(self, name):
        schema = load(os.path.join(ROOT, "schema", f"{name}.schema.json"))
        jsonschema.Draft7Validator.check_schema(schema)
        return jsonschema.Draft7Validator(schema)

    def test_shipped_profiles_match_their_schemas(self):
        for kind in ("model", "cluster"):
            validator = self.validator(kind)
            files = sorted(glob.glob(os.path.join(ROOT, "profiles", kind + "s", "*.json")))
            self.assertGreater(len(files), 0)
            for path in files:
                errors = [e.message for e in validator.iter_errors(load(path))]
                self.assertEqual(errors, [], path)

    def test_plans_match_the_plan_schema(self):
        validator = self.validator("plan")
        cases = [
            ("tiny-unet", "dgx1-v100-32gb-1n", []),
            ("sd2-unet-512", "dgx1-v100-32gb-1n", ["--pp", "4"]),
            ("sd2-unet-512", "atlas800-910a-4n", ["--pp", "4", "--strategy", "sequential"]),
            ("hunyuan-dit-g2-512", "atlas800-910a-1n", ["--pp", "4", "--zero", "1"]),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            for model, cluster, extra in cases:
                out = os.path.join(tmp, "plan.json")
                cmd = [BINARY, "plan", "--quiet", "-o", out,
                       "--model", os.path.join(ROOT, "profiles", "models", model + ".json"),
                       "--cluster", os.path.join(ROOT, "profiles", "clusters", cluster + ".json")]
                subprocess.run(cmd + extra, check=True)
                errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(load(out))]
                self.assertEqual(errors, [], f"{model} on {cluster} {extra}")

    def test_schema_rejects_a_broken_plan(self):
        # The schema must be able to fail: a plan with an op kind it does not know.
        validator = self.validator("plan")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "plan.json")
            subprocess.run([BINARY, "plan", "--quiet", "-o", out,
                            "--model", os.path.join(ROOT, "profiles/models/tiny-unet.json"),
                            "--cluster", os.path.join(ROOT, "profiles/clusters/dgx1-v100-32gb-1n.json")],
                           check=True)
            plan = load(out)
            plan["schedule"][0]["ops"][0]["op"] = "X"
            self.assertTrue(list(validator.iter_errors(plan)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args, rest = parser.parse_known_args()
    BINARY = os.path.abspath(args.binary)
    unittest.main(argv=[sys.argv[0]] + rest)
