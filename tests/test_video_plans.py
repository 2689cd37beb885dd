#!/usr/bin/python3
"""Video DiTs through the binary: sequence parallelism as level 0 plans it.

    /usr/bin/python3 tests/test_video_plans.py --binary build/pulse-plan

Open-Sora 2.0 (24 heads) on one DGX H100 with every layer recomputed (the fastest such job, a
few seconds): the plan exits 0 with a sequence layout whose Ulysses degree divides the heads,
its rank map covers the cluster with sequence groups, every layout planned is in
alternatives[], the plan is no slower than any adoptable row, and the authors' own layout,
forced, is no faster. Bad layouts: exit 2 with the reason, nothing written.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = None
MODEL = os.path.join(ROOT, "profiles", "models", "video", "open-sora-2.0-11b-129x768x768.json")
HUNYUAN = os.path.join(ROOT, "profiles", "models", "video",
                       "hunyuanvideo-t2v-13b-129x720x1280.json")
ONE_NODE = os.path.join(ROOT, "profiles", "clusters", "dgx-h100-1n.json")
FOUR_NODES = os.path.join(ROOT, "profiles", "clusters", "dgx-h100-4n.json")


def plan(*args, model=MODEL, cluster=ONE_NODE):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.json")
        proc = subprocess.run([BINARY, "plan", "-q", "--model", model, "--cluster", cluster,
                               "-o", out] + list(args), capture_output=True, text=True)
        body = None
        if os.path.exists(out):
            with open(out) as f:
                body = json.load(f)
        return proc, body


class VideoPlanTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, cls.plan = plan("--recompute", "full")

    def test_a_sequence_layout_is_chosen_and_divides_the_heads(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        seq = self.plan["parallelism"]["sequence"]
        self.assertEqual(seq["degree"], seq["ulysses"] * seq["ring"])
        self.assertEqual(24 % seq["ulysses"], 0)
        par = self.plan["parallelism"]
        self.assertEqual(par["devices_used"], par["pp"] * par["dp"] * seq["degree"])

    def test_the_rank_map_covers_the_cluster_with_sequence_groups(self):
        rm, par = self.plan["rank_map"], self.plan["parallelism"]
        groups = rm["sequence_groups"]
        self.assertEqual(len(groups), par["pp"] * par["dp"])
        ranks = sorted(r for g in groups for r in g)
        self.assertEqual(ranks, list(range(par["devices_used"])))
        firsts = sorted(r["rank"] for r in rm["ranks"])
        self.assertEqual(firsts, sorted(g[0] for g in groups))
        for g in groups:
            self.assertEqual(g, list(range(g[0], g[0] + par["sequence"]["degree"])))

    def test_every_layout_is_an_alternative_and_none_is_faster(self):
        rows = self.plan["alternatives"]
        labels = {r.get("sequence") for r in rows if r["axis"] == "sequence"}
        self.assertTrue({"none", "Ulysses 2", "ring 2", "Ulysses 4", "ring 4", "Ulysses 8",
                         "ring 8"} <= labels, labels)
        mine = self.plan["predicted"]["iteration_s"]
        for r in rows:
            if r["feasible"] and r["adoptable"]:
                self.assertGreaterEqual(r["iteration_s"], mine * (1 - 1e-9), r)
        verdict = self.plan["pipeline_or_not"]
        label = rows[[r.get("chosen") for r in rows].index(True)]["sequence"]
        self.assertIn(label, verdict["layout"])
        self.assertIn(verdict["layout"], verdict["layout_note"])

    def test_the_authors_layout_forced_is_no_faster(self):
        proc, theirs = plan("--sequence", "1x4", "--pp", "1", "--zero", "2", "--recompute", "full")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(theirs["parallelism"]["sequence"], {"ulysses": 1, "ring": 4, "degree": 4})
        self.assertEqual(theirs["options"]["memory"]["zero_stage"], 2)
        self.assertGreaterEqual(theirs["predicted"]["iteration_s"],
                                self.plan["predicted"]["iteration_s"] * (1 - 1e-9))

    def test_bad_layouts_exit_2_and_write_nothing(self):
        cases = [
            (["--sequence", "16x1"], HUNYUAN, FOUR_NODES,
             "Ulysses degree 16 must divide the 24 heads of layer"),
            (["--sequence", "3x1"], MODEL, ONE_NODE,
             "degree 3 must divide the 8 devices of dgx-h100-1n"),
            (["--sequence", "4"], MODEL, ONE_NODE, "--sequence must be ULYSSESxRING"),
            (["--sequence", "2x1"], os.path.join(ROOT, "profiles", "models", "tiny-unet.json"),
             ONE_NODE, "no layer of tiny-unet states a sequence"),
        ]
        for args, model, cluster, message in cases:
            with self.subTest(args=args):
                proc, body = plan(*args, "--recompute", "full", model=model, cluster=cluster)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertIsNone(body)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args, rest = parser.parse_known_args()
    BINARY = os.path.abspath(args.binary)
    unittest.main(argv=[sys.argv[0]] + rest)
