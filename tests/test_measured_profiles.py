#!/usr/bin/python3
"""Every measured model profile this repository ships states its small-batch behaviour and
shows no artifact of the measurement (standard library only).

Shipped measured profiles: profiles/models/*.json and docs/fidelity/*.profile.json with
provenance.method "measured". (tests/torch/data holds test fixtures whose times no figure
uses.) For every block, with t(b) its forward + backward time at microbatch size b and b'
the next larger size:

- inversion: t(b) > 1.5 t(b'). A smaller microbatch taking longer than a larger one is not
  what a correct kernel does (the work could be padded to b'); it is a warm-up artifact or
  a pathological code path, the kind that made the earlier CPU profile 2-17x slower per
  sample at microbatch 1. 1.5 leaves room for noise on sub-millisecond blocks measured
  under contention on a shared machine.
- per-sample excess: t(b)/b > 1.2 t(b')/b'. Real for small blocks (fixed per-op costs), and
  plans at b pay it, so the profile must say so: scripts/profile_torch.py writes a
  "Small-batch check" line into provenance.assumptions naming exactly these blocks, and
  an "Inversion check" line; both must agree with the times in the file. Profiles from the
  profiler of issue 27 state the excess relative to the whole model (the line says "beyond
  the same ratio of the sum over all blocks"): t(b)/b over t(b')/b' more than 1.2 times
  T(b)/b over T(b')/b', T the sum over all blocks, so that a launch-bound model, where
  every block costs about the same at b as at b', is not flagged block by block.

Records of a GPU check (docs/fidelity/*.runN.profile.json, written by scripts/gpu_check.sh)
are held to the statement rule but not to the block inversion limit: their block times are
a whole-step attribution, and where the step is launch-bound (SD2 on an H200 below
microbatch 8: the step takes about the same time at 1, 2, 4 and 8) which block absorbs the
host's stalls is arbitrary, so single blocks invert by up to 2.3x while the step does not.
For them the limit applies to the step: the sum over all blocks at b must not exceed 1.5
times the sum at b'. No shipped cluster profile takes its times from these records.

Run: /usr/bin/python3 tests/test_measured_profiles.py
"""

import glob
import json
import os
import re
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PER_SAMPLE_LIMIT = 1.2   # the profiler's default --max-small-batch-ratio
INVERSION_LIMIT = 1.5


def shipped_measured():
    paths = sorted(glob.glob(os.path.join(ROOT, "profiles", "models", "*.json"))
                   + glob.glob(os.path.join(ROOT, "docs", "fidelity", "*.profile.json")))
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            profile = json.load(f)
        if profile["provenance"]["method"] == "measured":
            out.append((os.path.relpath(path, ROOT), profile))
    return out


RELATIVE_RULE = "beyond the same ratio of the sum over all blocks"


def relative_rule(profile):
    return any(line.startswith("Small-batch check") and RELATIVE_RULE in line
               for line in profile["provenance"].get("assumptions", []))


def totals(layer, device):
    """A block's forward + backward time at each profiled size."""
    return [f + b for f, b in zip(layer["forward_s"][device], layer["backward_s"][device])]


def model_totals(profile, device):
    """The sum over all blocks at each profiled size."""
    return [sum(t) for t in zip(*(totals(l, device) for l in profile["layers"]))]


def inversion_limit(profile):
    """The limit the profile's Inversion check line states (pulse-profile's --max-inversion;
    before it had its own option, the small-batch ratio), or None without one."""
    for line in profile["provenance"].get("assumptions", []):
        m = re.match(r"Inversion check \(a microbatch size taking more than ([\d.]+)x", line)
        if m:
            return float(m.group(1))
    return None


def findings(profile, limit, relative=False, inversion=None):
    """(per-sample excesses, inversions) as (block, smaller size, larger size, ratio);
    inversions at ``inversion`` (default: ``limit``)."""
    inversion = limit if inversion is None else inversion
    sizes = profile["timing"]["microbatch_sizes"]
    per_sample, inversions = [], []
    for device in profile["timing"]["device_types"]:
        model = model_totals(profile, device)
        for layer in profile["layers"]:
            total = totals(layer, device)
            for k in range(len(sizes) - 1):
                b0, b1 = sizes[k], sizes[k + 1]
                ratio = (total[k] / b0) / (total[k + 1] / b1)
                scale = (model[k] / b0) / (model[k + 1] / b1) if relative else 1.0
                if ratio > limit * scale:
                    per_sample.append((layer["name"], b0, b1, ratio))
                if total[k] > inversion * total[k + 1]:
                    inversions.append((layer["name"], b0, b1, total[k] / total[k + 1]))
    return per_sample, inversions


def stated(profile, prefix):
    """(block, smaller size) pairs a provenance check line names, or None without one."""
    for line in profile["provenance"].get("assumptions", []):
        if line.startswith(prefix):
            return {(m.group(1), int(m.group(2)))
                    for m in re.finditer(r"(?:: |; )([\w.]+): [^;]*?microbatch (\d+)", line)}
    return None


GPU_RECORD = re.compile(r"\.run\d+\.profile\.json$")


def step_inversions(profile, limit):
    """(smaller size, larger size, ratio) where the sum over all blocks inverts."""
    sizes = profile["timing"]["microbatch_sizes"]
    out = []
    for device in profile["timing"]["device_types"]:
        model = model_totals(profile, device)
        out += [(sizes[k], sizes[k + 1], model[k] / model[k + 1])
                for k in range(len(sizes) - 1) if model[k] > limit * model[k + 1]]
    return out


class MeasuredProfilesTest(unittest.TestCase):
    def test_there_is_a_measured_profile(self):
        self.assertTrue(shipped_measured())

    def test_no_inversions(self):
        for path, profile in shipped_measured():
            with self.subTest(profile=path):
                if GPU_RECORD.search(path):
                    self.assertEqual(step_inversions(profile, INVERSION_LIMIT), [])
                else:
                    self.assertEqual(findings(profile, INVERSION_LIMIT)[1], [])

    def test_the_profilers_verdict_catches_the_shipped_cpu_profile(self):
        """small-unet-cpu was measured on a loaded machine before pulse-profile had a
        verdict: two of its blocks take 20% and 12% longer at microbatch 1 than at 2. The
        inversion check at the profiler's default --max-inversion (1.05) fails them, and the
        verdict refuses to write such a profile (python/pulse_runtime/profilechecks.py, no
        PyTorch needed)."""
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from pulse_runtime.profilechecks import small_batch_findings, verdict
        with open(os.path.join(ROOT, "profiles", "models", "small-unet-cpu.json")) as f:
            profile = json.load(f)
        sizes = profile["timing"]["microbatch_sizes"]

        class Model:
            block_names = [l["name"] for l in profile["layers"]]
        by_size = {b: [{"forward_s": l["forward_s"]["CPU"][k], "backward_s":
                        l["backward_s"]["CPU"][k]} for l in profile["layers"]]
                   for k, b in enumerate(sizes)}
        _, inversions = small_batch_findings(Model, by_size, sizes, PER_SAMPLE_LIMIT, 1.05)
        self.assertEqual([i.split(":")[0] for i in inversions], ["embed", "down0_down"])
        line, write = verdict({"inversion": inversions}, 0, cuda=False, thread_clock=False,
                              keep=False)
        self.assertFalse(write)
        self.assertTrue(line.startswith("pulse-profile: 2 check(s) failed (inversion 2)"), line)

    def test_the_gpu_records_are_checked(self):
        records = [path for path, _ in shipped_measured() if GPU_RECORD.search(path)]
        self.assertEqual(len(records), 2)
        # Negative control: a record whose step inverts is caught.
        _, profile = next(p for p in shipped_measured() if GPU_RECORD.search(p[0]))
        bad = json.loads(json.dumps(profile))
        for layer in bad["layers"]:
            for key in ("forward_s", "backward_s"):
                for device in layer[key]:
                    layer[key][device][0] *= 3.0
        self.assertEqual([(b0, b1) for b0, b1, _ in step_inversions(bad, INVERSION_LIMIT)],
                         [(1, 2)])

    def test_small_batch_excess_is_stated_exactly(self):
        for path, profile in shipped_measured():
            per_sample, inversions = findings(profile, PER_SAMPLE_LIMIT, relative_rule(profile),
                                              inversion_limit(profile))
            with self.subTest(profile=path):
                self.assertEqual(stated(profile, "Small-batch check"),
                                 {(name, b0) for name, b0, _, _ in per_sample})
                self.assertEqual(stated(profile, "Inversion check"),
                                 {(name, b0) for name, b0, _, _ in inversions})

    def test_the_checks_catch_the_earlier_artifact(self):
        # Blocks as the earlier profile had them (down0_res, seconds): 5.07 ms at microbatch
        # 1 against 0.73 ms at 2, then proportional.
        bad = {"timing": {"microbatch_sizes": [1, 2, 4], "device_types": ["CPU"]},
               "provenance": {"assumptions": []},
               "layers": [{"name": "down0_res", "forward_s": {"CPU": [0.0050, 0.0007, 0.0013]},
                           "backward_s": {"CPU": [0.0123, 0.0013, 0.0024]}}]}
        per_sample, inversions = findings(bad, PER_SAMPLE_LIMIT)
        self.assertEqual([(n, b0) for n, b0, _, _ in per_sample], [("down0_res", 1)])
        self.assertEqual([(n, b0) for n, b0, _, _ in findings(bad, INVERSION_LIMIT)[1]],
                         [("down0_res", 1)])
        self.assertIsNone(stated(bad, "Small-batch check"))

    def test_the_relative_rule_spares_a_launch_bound_model(self):
        # Two blocks that take as long at microbatch 2 as at 1 (the GPU waits on the host),
        # one flat block beside a linear one, and the line that selects the rule.
        def layer(name, fwd):
            return {"name": name, "forward_s": {"G": fwd}, "backward_s": {"G": fwd}}
        flat = {"timing": {"microbatch_sizes": [1, 2], "device_types": ["G"]},
                "provenance": {"assumptions": [f"Small-batch check (... {RELATIVE_RULE}): ..."]},
                "layers": [layer("a", [1e-3, 1e-3]), layer("b", [2e-3, 2e-3])]}
        self.assertTrue(relative_rule(flat))
        self.assertEqual(len(findings(flat, PER_SAMPLE_LIMIT)[0]), 2)
        self.assertEqual(findings(flat, PER_SAMPLE_LIMIT, relative=True)[0], [])
        mixed = dict(flat, layers=[layer("a", [1e-3, 1e-3]), layer("b", [9e-3, 18e-3])])
        self.assertEqual([(n, b0) for n, b0, _, _ in
                          findings(mixed, PER_SAMPLE_LIMIT, relative=True)[0]], [("a", 1)])

    def test_stated_reads_the_profiler_line(self):
        line = ("Small-batch check (per-sample ... next larger size): FLAGGED 2: embed: "
                "per-sample time at microbatch 1 is 2.44x that at 2; mid.res: per-sample time "
                "at microbatch 4 is 1.28x that at 8. Plans at the smaller size pay for it.")
        profile = {"provenance": {"assumptions": [line]}}
        self.assertEqual(stated(profile, "Small-batch check"), {("embed", 1), ("mid.res", 4)})
        none = {"provenance": {"assumptions": ["Inversion check (...): no block flagged."]}}
        self.assertEqual(stated(none, "Inversion check"), set())


if __name__ == "__main__":
    unittest.main()
