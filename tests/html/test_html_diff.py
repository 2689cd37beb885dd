#!/usr/bin/env python3
"""The HTML diff in a real browser: `pulse-plan diff V100 910A --format html` for SD2 planned
on a DGX-1 (V100) and on an Atlas 800 (Ascend 910A) is loaded by headless Chromium (Debian's
chromium package). The page must load with no console message and reference nothing outside
itself; its DOM must hold both timelines with every op of both plans; and its screenshot must
show both timelines side by side: the old plan's ops in the left half and the new plan's in
the right, each with the stage colours of its forwards, device rows top to bottom, and on one
time scale (each half's ops span its plan's makespan over the slower plan's, in pixels).
Each check is also run on a page that must fail it, so the checks cannot pass vacuously.

    /usr/bin/python3 tests/html/test_html_diff.py --binary build/pulse-plan

Python standard library only (png.py beside this file decodes the screenshot).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import EXTERNAL, console_messages, run_chromium  # noqa: E402
from png import read_png  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = None
WINDOW = (1700, 560)  # the timelines come right under the title and the plans' headers
# Op fills (src/tools/html_parts.cpp): kStageColor for F, the same mixed half with white
# for B. In the V at pp 4, stage d < 4 runs on device d, so their rows go top to bottom.
# Stage 7's grey finds the timeline's rows but is left out of its span: anti-aliased text
# has greys too. The first op (F of stage 0) and the last (B of stage 0) are coloured, so the
# spans are the makespans.
STAGE_HEX = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
             "#7f7f7f"]


def rgb(hex_colour):
    v = int(hex_colour[1:], 16)
    return (v >> 16 & 255, v >> 8 & 255, v & 255)


def half_white(c):
    return tuple(int(x + (255 - x) * 0.5 + 0.5) for x in c)


FORWARD = [rgb(h) for h in STAGE_HEX]
OP_COLOURS = set(FORWARD) | {half_white(c) for c in FORWARD}
COLOURED = {c for c in OP_COLOURS if len(set(c)) > 1}  # not grey


def makespan(plan):
    return max(op["end_s"] for entry in plan["schedule"] for op in entry["ops"])


def timeline_problems(png_path, want_ratio):
    """What the screenshot lacks of two timelines side by side on one time scale (the right
    half's ops spanning `want_ratio` times the left half's); empty when it shows them."""
    width, height, rows = read_png(png_path)
    problems = []
    if len({p for row in rows[::8] for p in row[::8]}) < 20:
        problems.append("the screenshot is (nearly) blank")
    spans = []
    for name, lo, hi in (("left", 0, width // 2), ("right", width // 2, width)):
        # Timeline rows: rows with many op pixels in this half (a legend row has a few
        # 12-pixel squares at most).
        lanes = [y for y in range(height)
                 if sum(1 for p in rows[y][lo:hi] if p in OP_COLOURS) >= 150]
        if not lanes:
            problems.append(f"the {name} half shows no timeline")
            continue
        median_rows = []
        for k in range(4):
            hits = [(x, y) for y in lanes for x in range(lo, hi) if rows[y][x] == FORWARD[k]]
            if len(hits) < 200:
                problems.append(f"the {name} half: stage {k}'s forward colour covers "
                                f"{len(hits)} pixels of its timeline, expected at least 200")
                continue
            median_rows.append(sorted(y for _, y in hits)[len(hits) // 2])
        if len(median_rows) == 4 and median_rows != sorted(median_rows):
            problems.append(f"the {name} half: device rows are not top to bottom: median "
                            f"rows {median_rows}")
        xs = [x for y in lanes for x in range(lo, hi) if rows[y][x] in COLOURED]
        spans.append(max(xs) - min(xs))
    if len(spans) == 2 and spans[0] > 0:
        got = spans[1] / spans[0]
        if abs(got / want_ratio - 1) > 0.03:
            problems.append(f"the halves' op spans are {spans[0]} and {spans[1]} px, ratio "
                            f"{got:.3f}; the makespans' ratio is {want_ratio:.3f}: not one "
                            f"time scale")
    return problems


class HtmlDiff(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="pulse-html-diff-")
        model = os.path.join(ROOT, "profiles/models/sd2-unet-512.json")
        cls.plans, cls.paths = {}, {}
        for name, cluster in (("v100", "dgx1-v100-32gb-1n"), ("910a", "atlas800-910a-1n")):
            cls.paths[name] = os.path.join(cls.work, f"sd2-{name}.json")
            # --family v: the row-order check below reads stage k on device k (a V) of pp 4;
            # --frozen cached: weighing the encoders' step picks pp 2 on the 910A server.
            subprocess.run([BINARY, "plan", "--quiet", "--family", "v", "--frozen", "cached",
                            "--model", model,
                            "--cluster",
                            os.path.join(ROOT, "profiles/clusters", cluster + ".json"),
                            "-o", cls.paths[name]], check=True)
            with open(cls.paths[name]) as f:
                cls.plans[name] = json.load(f)
        cls.ratio = makespan(cls.plans["910a"]) / makespan(cls.plans["v100"])
        cls.page = cls.diff_page("diff.html", cls.paths["v100"], cls.paths["910a"])
        with open(cls.page, encoding="utf-8") as f:
            cls.html = f.read()
        # Controls: the same page without the new plan's timeline; a page with no timeline
        # and a script that logs errors; a diff of the V100 plan with itself (one span
        # ratio, 1, where the V100-to-910A pair has another).
        cls.one_sided = os.path.join(cls.work, "one-sided.html")
        with open(cls.one_sided, "w", encoding="utf-8") as f:
            f.write(re.sub(r'<svg id="timeline-new".*?</svg>', "", cls.html, flags=re.S))
        cls.broken = os.path.join(cls.work, "broken.html")
        with open(cls.broken, "w", encoding="utf-8") as f:
            f.write("<!DOCTYPE html><html><body><p>no timeline here</p>"
                    "<script>console.error('boom'); undefined_function();</script>"
                    "</body></html>\n")
        cls.same = cls.diff_page("same.html", cls.paths["v100"], cls.paths["v100"])

    @classmethod
    def diff_page(cls, name, old, new):
        page = os.path.join(cls.work, name)
        subprocess.run([BINARY, "diff", old, new, "--format", "html", "-o", page], check=True)
        return page

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def screenshot(self, page):
        shot = page[:-5] + ".png"
        run_chromium(page, self.work, f"--screenshot={shot}", window=WINDOW)
        return shot

    def test_the_pair_differs(self):
        # The V100 and 910A plans differ in makespan, so one scale is something to check.
        self.assertGreater(abs(self.ratio - 1), 0.05)

    def test_page_references_nothing_outside_itself(self):
        self.assertEqual(EXTERNAL.findall(self.html), [])
        with open(self.broken, encoding="utf-8") as f:
            self.assertNotEqual(EXTERNAL.findall(f.read()), [])  # the check can fail

    def test_loads_without_console_messages_with_every_op(self):
        dom, stderr = run_chromium(self.page, self.work, "--dump-dom", window=WINDOW)
        self.assertEqual(console_messages(stderr), [])
        for side, name in (("old", "v100"), ("new", "910a")):
            svg = re.search(rf'<svg id="timeline-{side}".*?</svg>', dom, re.S)
            self.assertIsNotNone(svg, side)
            ops = sum(len(e["ops"]) for e in self.plans[name]["schedule"])
            self.assertEqual(len(re.findall(r"<title>[FBIW] stage", svg.group(0))), ops, side)
        self.assertIn('id="diff-rows"', dom)

    def test_console_check_sees_errors(self):
        _, stderr = run_chromium(self.broken, self.work, "--dump-dom", window=WINDOW)
        messages = console_messages(stderr)
        self.assertTrue(any("boom" in m for m in messages), stderr[-2000:])

    def test_screenshot_shows_both_timelines_on_one_scale(self):
        self.assertEqual(timeline_problems(self.screenshot(self.page), self.ratio), [])

    def test_screenshot_check_fails_without_the_new_timeline(self):
        problems = timeline_problems(self.screenshot(self.one_sided), self.ratio)
        self.assertEqual(problems, ["the right half shows no timeline"])

    def test_screenshot_check_fails_on_a_blank_page(self):
        problems = timeline_problems(self.screenshot(self.broken), self.ratio)
        self.assertEqual(problems, ["the screenshot is (nearly) blank",
                                    "the left half shows no timeline",
                                    "the right half shows no timeline"])

    def test_screenshot_check_sees_another_scale(self):
        problems = timeline_problems(self.screenshot(self.same), self.ratio)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("not one time scale", problems[0])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args, rest = parser.parse_known_args()
    BINARY = os.path.abspath(args.binary)
    unittest.main(argv=[sys.argv[0]] + rest)
