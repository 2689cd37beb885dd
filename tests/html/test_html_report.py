#!/usr/bin/env python3
"""The HTML report in a real browser: `pulse-plan export --format html` for SD2 on a DGX-1
(the V, with the sequential baseline beside it) is loaded by headless Chromium (Debian's
chromium package). The page must load with no console message, reference nothing outside
itself, and its screenshot must show the schedule timeline: the stage colours of the ops,
device rows top to bottom, across the timeline's width. Each check is also run on a page
that must fail it, so the checks cannot pass vacuously.

    /usr/bin/python3 tests/html/test_html_report.py --binary build/pulse-plan

Python standard library only (png.py beside this file decodes the screenshot).
"""
import argparse
import json
import os
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
WINDOW = (1200, 1400)
# Fills of forward ops of stages 0..3 (src/tools/html_parts.cpp kStageColor); in SD2's V at
# pp 4, stage d runs on device d, so their rows go top to bottom. Backward ops have the
# same colour halfway to white.
STAGE_RGB = [(0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C), (0xD6, 0x27, 0x28)]
STAGE_LIGHT_RGB = [tuple((c + 255 + 1) // 2 for c in rgb) for rgb in STAGE_RGB]


def timeline_problems(png_path):
    """What the screenshot lacks of a schedule timeline; empty when it shows one."""
    width, height, rows = read_png(png_path)
    problems = []
    if len({p for row in rows[::8] for p in row[::8]}) < 20:
        problems.append("the screenshot is (nearly) blank")
    band = height // 3  # the main plan's timeline comes first, right under the title
    rows_of = []
    for k, rgb in enumerate(STAGE_RGB):
        # A stage's forwards may all come early (large microbatches, few of them); its ops
        # span the timeline with the backwards.
        shades = (rgb, STAGE_LIGHT_RGB[k])
        hits = [(x, y) for y in range(band) for x, p in enumerate(rows[y]) if p in shades]
        if len(hits) < 300:
            problems.append(f"stage {k}'s colour {rgb} covers {len(hits)} pixels in the top "
                            f"third, expected at least 300")
            continue
        xs = sorted(x for x, _ in hits)
        # The timeline is 1000 px wide, on the time scale of the slowest plan shown.
        if xs[-1] - xs[0] < 0.25 * width:
            problems.append(f"stage {k}'s ops span {xs[-1] - xs[0]} px, expected at least 25% "
                            f"of the {width} px page")
        rows_of.append(sorted(y for _, y in hits)[len(hits) // 2])
    if len(rows_of) == len(STAGE_RGB) and rows_of != sorted(rows_of):
        problems.append(f"device rows are not top to bottom: median rows {rows_of}")
    return problems


class HtmlReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="pulse-html-")
        model = os.path.join(ROOT, "profiles/models/sd2-unet-512.json")
        cluster = os.path.join(ROOT, "profiles/clusters/dgx1-v100-32gb-1n.json")
        plans = {}
        for strategy in ("pulse", "sequential"):
            plans[strategy] = os.path.join(cls.work, f"sd2-{strategy}.json")
            family = ["--family", "v"] if strategy == "pulse" else []  # the V, as drawn below
            subprocess.run([BINARY, "plan", "--quiet", "--model", model, "--cluster", cluster,
                            "--pp", "4", "--strategy", strategy, *family, "-o", plans[strategy]],
                           check=True)
        cls.page = os.path.join(cls.work, "report.html")
        subprocess.run([BINARY, "export", plans["pulse"], "--format", "html", "--compare",
                        plans["sequential"], "-o", cls.page], check=True)
        with open(cls.page, encoding="utf-8") as f:
            cls.html = f.read()
        cls.broken = os.path.join(cls.work, "broken.html")
        with open(cls.broken, "w", encoding="utf-8") as f:
            f.write("<!DOCTYPE html><html><body><p>no timeline here</p>"
                    "<script>console.error('boom'); undefined_function();</script>"
                    "</body></html>\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_page_references_nothing_outside_itself(self):
        self.assertEqual(EXTERNAL.findall(self.html), [])
        with open(self.broken, encoding="utf-8") as f:
            self.assertNotEqual(EXTERNAL.findall(f.read()), [])  # the check can fail

    def test_loads_without_console_messages(self):
        dom, stderr = run_chromium(self.page, self.work, "--dump-dom", window=WINDOW)
        self.assertEqual(console_messages(stderr), [])
        self.assertIn('<svg id="timeline-0"', dom)
        self.assertIn('<svg id="timeline-1"', dom)
        with open(os.path.join(self.work, "sd2-pulse.json"), encoding="utf-8") as f:
            ops = sum(len(d["ops"]) for d in json.load(f)["schedule"])
        self.assertGreaterEqual(dom.count("<rect"), ops)  # every op of the V plan

    def test_console_check_sees_errors(self):
        _, stderr = run_chromium(self.broken, self.work, "--dump-dom", window=WINDOW)
        messages = console_messages(stderr)
        self.assertTrue(any("boom" in m for m in messages), stderr[-2000:])
        self.assertTrue(any("undefined_function" in m for m in messages), stderr[-2000:])

    def test_screenshot_shows_the_timeline(self):
        shot = os.path.join(self.work, "report.png")
        run_chromium(self.page, self.work, f"--screenshot={shot}", window=WINDOW)
        self.assertEqual(timeline_problems(shot), [])

    def test_screenshot_check_fails_without_a_timeline(self):
        shot = os.path.join(self.work, "broken.png")
        run_chromium(self.broken, self.work, f"--screenshot={shot}", window=WINDOW)
        problems = timeline_problems(shot)
        self.assertIn("the screenshot is (nearly) blank", problems)
        self.assertEqual(len(problems), 1 + len(STAGE_RGB))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args, rest = parser.parse_known_args()
    BINARY = os.path.abspath(args.binary)
    unittest.main(argv=[sys.argv[0]] + rest)
