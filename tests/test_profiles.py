#!/usr/bin/python3
"""Tests of the analytic profiles and their generator (standard library only).

Run: /usr/bin/python3 tests/test_profiles.py   (from anywhere; the repo root is found from
this file's location). Reference figures are from models_hw.md (the shared reference).
"""

import json
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GENERATOR = REPO / "scripts" / "gen_profiles.py"
MODELS = REPO / "profiles" / "models"
CLUSTERS = REPO / "profiles" / "clusters"
SCHEMAS = REPO / "schema"

MODEL_NAMES = ["sd2-unet-512", "sd2-unet-768", "sdxl-unet-1024", "uvit-h2-256", "uvit-l2-256",
               "hunyuan-dit-g2-1024", "hunyuan-dit-g2-512", "flux1-dev-1024",
               "svd-xt-unet-576x1024"]
# The video DiTs (scripts/profilegen/video.py), under profiles/models/video/: outside the corpus
# of every shipped model (profiles/models/*.json), in every check of a generated profile here.
VIDEO_NAMES = ["video/wan2.1-t2v-14b-81x720x1280", "video/hunyuanvideo-t2v-13b-129x720x1280",
               "video/open-sora-2.0-11b-129x768x768"]
MODEL_NAMES += VIDEO_NAMES
CLUSTER_NAMES = ([f"{prefix}-{n}n" for prefix in ("dgx1-v100-16gb", "dgx1-v100-32gb",
                                                  "atlas800-910a") for n in (1, 2, 4, 8)]
                 + [f"{prefix}-{n}n" for prefix in ("dgx-h100", "dgx-h200", "dgx-a100",
                                                    "atlas800t-a2-910b")
                    for n in (1, 2, 4, 8, 16)]
                 + ["dgx-b200-1n"])
DEVICE_TYPES = ["V100-SXM2", "Ascend-910A", "H100-SXM", "H200-SXM", "A100-SXM", "Ascend-910B"]
# Devices with a spec and no times of their own in any model profile: the planner derives them.
DERIVED_DEVICE_TYPES = ["B200"]


def load(path: Path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def model(name: str):
    return load(MODELS / f"{name}.json")


def layer(profile, name: str):
    return next(x for x in profile["layers"] if x["name"] == name)


def run_generator(*args):
    return subprocess.run([sys.executable, str(GENERATOR), *args], capture_output=True,
                          text=True, check=False)


# --- a JSON Schema (draft-07) subset: enough for schema/model and schema/cluster ---------

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _type_ok(value, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def _resolve(schema, root):
    while "$ref" in schema:
        path = schema["$ref"].lstrip("#/").split("/")
        schema = root
        for key in path:
            schema = schema[key]
    return schema


def schema_errors(value, schema, root, where="$"):
    """Every violation of schema by value, as 'path: problem' strings."""
    schema = _resolve(schema, root)
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_type_ok(value, t) for t in names):
            return [f"{where}: expected {types}, got {type(value).__name__}"]
    errors = []
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: expected {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: expected one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: below minimum {schema['minimum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            errors.append(f"{where}: not above {schema['exclusiveMinimum']}")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            errors.append(f"{where}: not below {schema['exclusiveMaximum']}")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        errors.append(f"{where}: shorter than {schema['minLength']}")
    if isinstance(value, list):
        errors += _array_errors(value, schema, root, where)
    if isinstance(value, dict):
        errors += _object_errors(value, schema, root, where)
    return errors


def _array_errors(value, schema, root, where):
    errors = []
    if len(value) < schema.get("minItems", 0):
        errors.append(f"{where}: fewer than {schema['minItems']} items")
    if schema.get("uniqueItems") and len({json.dumps(v) for v in value}) != len(value):
        errors.append(f"{where}: items not unique")
    for i, item in enumerate(value):
        if "items" in schema:
            errors += schema_errors(item, schema["items"], root, f"{where}[{i}]")
    return errors


def _object_errors(value, schema, root, where):
    errors = [f"{where}: missing {key}" for key in schema.get("required", []) if key not in value]
    if len(value) < schema.get("minProperties", 0):
        errors.append(f"{where}: fewer than {schema['minProperties']} properties")
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in props:
            errors += schema_errors(item, props[key], root, f"{where}.{key}")
        elif extra is False:
            errors.append(f"{where}: unexpected key {key}")
        elif isinstance(extra, dict):
            errors += schema_errors(item, extra, root, f"{where}.{key}")
    return errors


class SchemaSubsetTest(unittest.TestCase):
    """The validator below is only worth something if it rejects bad input."""

    def test_rejects_unknown_key_missing_key_and_bad_type(self):
        schema = load(SCHEMAS / "model.schema.json")
        bad = model("sd2-unet-512")
        bad["layers"][0]["typo"] = 1
        del bad["layers"][1]["params"]
        bad["layers"][2]["output_bytes_per_sample"] = 1.5
        errors = schema_errors(bad, schema, schema)
        self.assertIn("$.layers[0]: unexpected key typo", errors)
        self.assertIn("$.layers[1]: missing params", errors)
        self.assertTrue(any(e.startswith("$.layers[2].output_bytes_per_sample") for e in errors))


class GeneratorTest(unittest.TestCase):
    def test_check_passes_on_the_committed_profiles(self):
        result = run_generator("--check")
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_regenerates_every_committed_profile_byte_for_byte(self):
        with tempfile.TemporaryDirectory() as tmp:
            result = run_generator("--out", tmp)
            self.assertEqual(result.returncode, 0, result.stderr)
            generated = sorted(p.relative_to(tmp) for p in Path(tmp).rglob("*.json"))
            expected = sorted([Path("models", f"{n}.json") for n in MODEL_NAMES]
                              + [Path("clusters", f"{n}.json") for n in CLUSTER_NAMES])
            self.assertEqual(generated, expected)
            for rel in generated:
                with self.subTest(file=str(rel)):
                    new = (Path(tmp) / rel).read_bytes()
                    self.assertEqual(new, (REPO / "profiles" / rel).read_bytes())
                    self.assertTrue(new.endswith(b"}\n"))

    def test_check_reports_a_changed_and_a_missing_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(MODELS, Path(tmp) / "models")
            shutil.copytree(CLUSTERS, Path(tmp) / "clusters")
            changed = Path(tmp) / "models" / "uvit-l2-256.json"
            changed.write_text(changed.read_text().replace('"params": ', '"params": 1', 1))
            (Path(tmp) / "clusters" / "atlas800-910a-2n.json").unlink()
            result = run_generator("--check", "--out", tmp)
            self.assertEqual(result.returncode, 1)
            self.assertIn("uvit-l2-256.json: differs", result.stderr)
            self.assertIn("atlas800-910a-2n.json: missing", result.stderr)
            self.assertEqual(result.stdout, "")


class TotalsTest(unittest.TestCase):
    # (profile, reference total, relative tolerance); models_hw.md "Known parameter counts"
    PARAMS = [("sd2-unet-512", 865_910_724, 0.0), ("sd2-unet-768", 865_910_724, 0.0),
              ("sdxl-unet-1024", 2_567_463_684, 0.001), ("uvit-h2-256", 501e6, 0.01),
              ("uvit-l2-256", 287e6, 0.01), ("hunyuan-dit-g2-1024", 1.5e9, 0.03),
              ("hunyuan-dit-g2-512", 1.5e9, 0.03), ("flux1-dev-1024", 11.9e9, 0.03),
              # The published SVD UNet count: Ctrl-Crash (arXiv 2506.00227v2), Table G.6.
              ("svd-xt-unet-576x1024", 1_524_623_082, 0.0)]
    # Forward FLOPs per sample, models_hw.md sections 1-5.
    FLOPS = [("sd2-unet-512", 804e9), ("sd2-unet-768", 2149e9), ("sdxl-unet-1024", 6.76e12),
             ("uvit-h2-256", 266e9), ("uvit-l2-256", 153e9), ("hunyuan-dit-g2-1024", 14.3e12),
             ("hunyuan-dit-g2-512", 2.94e12), ("flux1-dev-1024", 74.4e12)]
    SKIPS = {"sd2-unet-512": 12, "sd2-unet-768": 12, "sdxl-unet-1024": 9, "uvit-h2-256": 14,
             "uvit-l2-256": 10, "hunyuan-dit-g2-1024": 19, "hunyuan-dit-g2-512": 19,
             "flux1-dev-1024": 0, "svd-xt-unet-576x1024": 12}

    def test_parameter_totals(self):
        for name, reference, tolerance in self.PARAMS:
            with self.subTest(profile=name):
                total = sum(x["params"] for x in model(name)["layers"])
                if tolerance == 0.0:
                    self.assertEqual(total, reference)
                else:
                    self.assertLessEqual(abs(total - reference), tolerance * reference, total)

    def test_forward_flops_within_five_percent(self):
        for name, reference in self.FLOPS:
            with self.subTest(profile=name):
                total = sum(x["forward_flops_per_sample"] for x in model(name)["layers"])
                self.assertLessEqual(abs(total - reference), 0.05 * reference, total)

    def test_skip_counts(self):
        for name, count in self.SKIPS.items():
            with self.subTest(profile=name):
                self.assertEqual(len(model(name)["skips"]), count)

    def test_skip_volume(self):
        # models_hw.md: SD2 12.7 / 28.5 MiB per sample; Hunyuan 19 x 11.0 MiB at 1024 px.
        mib = float(1 << 20)
        for name, reference in (("sd2-unet-512", 12.7), ("sd2-unet-768", 28.5),
                                ("sdxl-unet-1024", 48.8), ("hunyuan-dit-g2-1024", 209.0)):
            with self.subTest(profile=name):
                total = sum(s["bytes_per_sample"] for s in model(name)["skips"]) / mib
                self.assertAlmostEqual(total, reference, delta=0.1)


class VideoProfileTest(unittest.TestCase):
    """The video DiTs' sequences by hand: VAE stride (4, 8, 8), patch (1, 2, 2)."""

    # (profile, frames, height, width, text tokens in the joint sequence, heads, head width)
    SHAPES = [("video/wan2.1-t2v-14b-81x720x1280", 81, 720, 1280, 0, 40, 128),
              ("video/hunyuanvideo-t2v-13b-129x720x1280", 129, 720, 1280, 256, 24, 128),
              ("video/open-sora-2.0-11b-129x768x768", 129, 768, 768, 512, 24, 128)]

    def test_tokens_heads_and_the_quadratic_attention_core(self):
        for name, frames, h, w, text, heads, head_dim in self.SHAPES:
            tokens = ((frames - 1) // 4 + 1) * (h // 16) * (w // 16)
            seq = tokens + text
            with self.subTest(profile=name):
                by_hand = {81: 21 * 45 * 80, 129: 33 * (h // 16) * (w // 16)}
                self.assertEqual(tokens, by_hand[frames])
                blocks = [x for x in model(name)["layers"] if x.get("sequence", {}).get("heads")]
                self.assertGreaterEqual(len(blocks), 40)
                for x in blocks:
                    self.assertEqual(x["sequence"], {
                        "tokens": seq, "heads": heads, "head_dim": head_dim,
                        "attention_flops_per_sample": 4 * seq * seq * heads * head_dim})
                    self.assertLess(x["sequence"]["attention_flops_per_sample"],
                                    x["forward_flops_per_sample"])

    def test_provenance_says_analytic_and_cites_the_configuration(self):
        for name, *_ in self.SHAPES:
            prov = model(name)["provenance"]
            with self.subTest(profile=name):
                self.assertTrue(prov["assumptions"][0].startswith("Derived analytically"))
                self.assertTrue(any("4 * Lq * Lk * C" in a for a in prov["assumptions"]))
                self.assertTrue(any("frozen" in a for a in prov["assumptions"]))
                self.assertTrue(any("github.com" in r for r in prov["references"]))

    def test_parameter_totals_near_the_published_sizes(self):
        # Wan 2.1 "14B", HunyuanVideo "13B" (txt_in's refiner blocks left out), Open-Sora 2.0
        # "11B" (the Flux layout without guidance: 11.89B, as Flux.1-dev's 11.90B).
        for name, published, tolerance in (("video/wan2.1-t2v-14b-81x720x1280", 14e9, 0.03),
                                           ("video/hunyuanvideo-t2v-13b-129x720x1280", 13e9,
                                            0.05),
                                           ("video/open-sora-2.0-11b-129x768x768", 11.9e9,
                                            0.01)):
            total = sum(x["params"] for x in model(name)["layers"])
            with self.subTest(profile=name):
                self.assertLessEqual(abs(total - published), tolerance * published, total)


class StructureTest(unittest.TestCase):
    def test_models_match_the_schema(self):
        schema = load(SCHEMAS / "model.schema.json")
        for name in MODEL_NAMES:
            with self.subTest(profile=name):
                self.assertEqual(schema_errors(model(name), schema, schema), [])

    def test_clusters_match_the_schema(self):
        schema = load(SCHEMAS / "cluster.schema.json")
        for name in CLUSTER_NAMES:
            with self.subTest(profile=name):
                self.assertEqual(schema_errors(load(CLUSTERS / f"{name}.json"), schema, schema), [])

    def test_model_consistency(self):
        for name in MODEL_NAMES:
            with self.subTest(profile=name):
                self.check_model(model(name), name)

    def check_model(self, p, name):
        self.assertEqual(p["name"], name.split("/")[-1])
        self.assertEqual(p["provenance"]["method"], "analytic")
        self.assertEqual(p["provenance"]["generator"], "scripts/gen_profiles.py")
        sizes = p["timing"]["microbatch_sizes"]
        self.assertEqual(sizes, sorted(set(sizes)))
        self.assertEqual(p["timing"]["device_types"], DEVICE_TYPES)
        names = [x["name"] for x in p["layers"]]
        self.assertEqual(len(names), len(set(names)), "layer names must be unique")
        for x in p["layers"]:
            for key in ("forward_s", "backward_s"):
                self.assertEqual(sorted(x[key]), sorted(DEVICE_TYPES), x["name"])
                for times in x[key].values():
                    self.assertEqual(len(times), len(sizes), x["name"])
                    self.assertTrue(all(t > 0 for t in times), x["name"])
            self.assertGreater(x["forward_flops_per_sample"], 0, x["name"])
        index = {n: i for i, n in enumerate(names)}
        pairs = [(s["producer"], s["consumer"]) for s in p["skips"]]
        self.assertEqual(len(pairs), len(set(pairs)), "a skip pair may appear once")
        for producer, consumer in pairs:
            self.assertLess(index[producer], index[consumer], f"{producer} -> {consumer}")
        for c in p["carried"]:
            self.assertTrue(c["producer"] is None or c["producer"] in index, c["name"])

    def test_skips_are_nested(self):
        # LIFO push/pop: the first encoder output feeds the last decoder block.
        for name in MODEL_NAMES:
            p = model(name)
            index = {x["name"]: i for i, x in enumerate(p["layers"])}
            edges = sorted((index[s["producer"]], index[s["consumer"]]) for s in p["skips"])
            consumers = [c for _, c in edges]
            with self.subTest(profile=name):
                self.assertEqual(consumers, sorted(consumers, reverse=True))

    def test_cluster_consistency(self):
        for name in CLUSTER_NAMES:
            with self.subTest(profile=name):
                self.check_cluster(load(CLUSTERS / f"{name}.json"), name)

    def check_cluster(self, c, name):
        self.assertEqual(c["name"], name)
        self.assertIn(c["device"]["type"], DEVICE_TYPES + DERIVED_DEVICE_TYPES)
        self.assertLess(c["device"]["reserved_bytes"], c["device"]["memory_bytes"])
        self.assertEqual(c["nodes"], int(name.rsplit("-", 1)[1].rstrip("n")))
        matrix, n = c["intra_node"], c["devices_per_node"]
        self.assertEqual(len(matrix), n)
        for a in range(n):
            self.assertEqual(len(matrix[a]), n)
            for b in range(n):
                cell = matrix[a][b]
                self.assertEqual(cell == "X", a == b)
                self.assertEqual(cell, matrix[b][a])
                self.assertTrue(cell == "X" or cell in c["link_classes"], cell)
        self.assertIn(c["inter_node"], c["link_classes"])


class SpotCheckTest(unittest.TestCase):
    """Per-layer figures from the models_hw.md tables (rounded there, hence the deltas)."""

    def assert_layer(self, profile, name, params_m, gflops, params_delta=0.005, gf_delta=0.05):
        x = layer(profile, name)
        self.assertAlmostEqual(x["params"] / 1e6, params_m, delta=params_delta, msg=name)
        self.assertAlmostEqual(x["forward_flops_per_sample"] / 1e9, gflops, delta=gf_delta,
                               msg=name)

    def test_sd2(self):
        p512, p768 = model("sd2-unet-512"), model("sd2-unet-768")
        self.assert_layer(p512, "down0.attn0", 2.71, 38.8)
        self.assert_layer(p768, "down0.attn0", 2.71, 147.5)
        self.assert_layer(p512, "up1.upsample", 14.75, 30.2)
        self.assert_layer(p512, "up3.resnet0", 4.41, 32.7)
        self.assertEqual(layer(p512, "down1.attn0")["output_bytes_per_sample"], 640 * 32 * 32 * 2)
        self.assertEqual(p512["layers"][0]["name"], "time_embedding")
        self.assertEqual(p512["layers"][-1]["name"], "conv_out")

    def test_transformers(self):
        self.assert_layer(model("hunyuan-dit-g2-1024"), "block0", 34.09, 343.0, gf_delta=0.5)
        self.assert_layer(model("hunyuan-dit-g2-1024"), "block39", 38.06, 376.0, gf_delta=0.5)
        self.assert_layer(model("uvit-h2-256"), "in0", 15.94, 8.52, gf_delta=0.01)
        self.assert_layer(model("uvit-h2-256"), "out13", 18.59, 9.89, gf_delta=0.01)
        self.assert_layer(model("flux1-dev-1024"), "double0", 339.8, 1305.0, 0.05, 0.5)
        self.assert_layer(model("flux1-dev-1024"), "single37", 141.6, 1305.0, 0.05, 0.5)

    def test_svd(self):
        svd = model("svd-xt-unet-576x1024")
        # down0.resnet0, 320 -> 320 channels. Spatial ResnetBlock2D: 2 GroupNorms 2 x 640,
        # 2 conv3x3 2 x (9 x 320 x 320 + 320) = 1,843,840, time_emb_proj 1280 x 320 + 320
        # = 409,920. Temporal block: 2 GroupNorms 1,280, 2 Conv3d (3,1,1) 2 x (3 x 320 x
        # 320 + 320) = 615,040, time_emb_proj 409,920. Blend: 1. Total 3,281,281.
        self.assertEqual(layer(svd, "down0.resnet0")["params"], 3_281_281)
        # Every skip carries 25 frames of the 2D UNet's skip at the same positions:
        # 72 x 128 = 96 x 96 latents, so exactly 25 x SD2-768's skip bytes.
        sd2 = model("sd2-unet-768")
        self.assertEqual([s["bytes_per_sample"] for s in svd["skips"]],
                         [25 * s["bytes_per_sample"] for s in sd2["skips"]])
        self.assertEqual([(s["producer"], s["consumer"]) for s in svd["skips"]],
                         [(s["producer"], s["consumer"]) for s in sd2["skips"]])
        self.assertEqual(layer(svd, "conv_out")["output_bytes_per_sample"], 2 * 4 * 72 * 128 * 25)

    def test_hunyuan_skip_pairs(self):
        skips = {s["consumer"]: s["producer"] for s in model("hunyuan-dit-g2-1024")["skips"]}
        self.assertEqual(skips, {f"block{j}": f"block{39 - j}" for j in range(21, 40)})

    def test_saved_activations_are_calibrated_reference_counts(self):
        # models_hw.md: SD2 at 512 saves about 0.87 GiB/sample (flash), times the 1.4
        # calibration factor stated in the profile.
        total = sum(x["activation_bytes_per_sample"] for x in model("sd2-unet-512")["layers"])
        self.assertAlmostEqual(total / (1 << 30), 0.87 * 1.4, delta=0.02)


class TimeModelTest(unittest.TestCase):
    def test_time_per_sample_falls_with_microbatch_size(self):
        for name in MODEL_NAMES:
            p = model(name)
            sizes = p["timing"]["microbatch_sizes"]
            for x in p["layers"]:
                for key in ("forward_s", "backward_s"):
                    for device, times in x[key].items():
                        per_sample = [t / b for t, b in zip(times, sizes)]
                        with self.subTest(profile=name, layer=x["name"], key=key, device=device):
                            # A video block saturates the device at one sample (~76k-119k
                            # tokens): its ramp and launch are below the 6-digit rounding.
                            self.assertTrue(all(a > b or (name in VIDEO_NAMES and a == b)
                                                for a, b in zip(per_sample, per_sample[1:])))

    def test_backward_is_two_to_two_and_a_half_times_forward(self):
        for name in MODEL_NAMES:
            for x in model(name)["layers"]:
                for device in DEVICE_TYPES:
                    for f, b in zip(x["forward_s"][device], x["backward_s"][device]):
                        with self.subTest(profile=name, layer=x["name"], device=device):
                            self.assertTrue(2.0 * f * 0.9999 <= b <= 2.5 * f * 1.0001, (f, b))


sys.path.insert(0, str(REPO / "scripts"))
from profilegen import anchors, timing  # noqa: E402


def per_sample(profile, device, key_list, b):
    """Seconds per sample summed over the layers at microbatch b, interpolated linearly
    between the profiled sizes as the planner does."""
    sizes = profile["timing"]["microbatch_sizes"]
    hi = next(i for i, s in enumerate(sizes) if s >= b)
    lo = hi if sizes[hi] == b else hi - 1
    total = 0.0
    for x in profile["layers"]:
        for key in key_list:
            t_lo, t_hi = x[key][device][lo], x[key][device][hi]
            w = 0.0 if hi == lo else (b - sizes[lo]) / (sizes[hi] - sizes[lo])
            total += t_lo + w * (t_hi - t_lo)
    return total / b


class CalibrationTest(unittest.TestCase):
    def test_shipped_constants_are_the_fit(self):
        # timing.py holds the fit rounded to three digits; a changed anchor or time model
        # must be refitted (docs/profiles.md, Calibration).
        for device, scale, launch in (("V100-SXM2", timing.V100_SCALE, timing.V100_LAUNCH_S),
                                      ("Ascend-910A", timing.ASCEND_SCALE,
                                       timing.ASCEND_LAUNCH_S)):
            fitted_scale, fitted_launch = anchors.fit(device)
            with self.subTest(device=device):
                self.assertAlmostEqual(fitted_scale / scale, 1.0, delta=0.005)
                self.assertAlmostEqual(fitted_launch, launch, delta=1e-6)

    def test_anchored_profiles_within_25_percent_of_every_anchor(self):
        # The bar: the shipped SD2 profiles against each measurement-anchored
        # figure (UNet share of the public step time), read from the JSON files.
        for a in anchors.ANCHORS:
            keys = ["forward_s", "backward_s"] if a.kind == "train" else ["forward_s"]
            got = per_sample(model(a.model), a.device, keys, a.microbatch)
            target = anchors.derive(a).target[1]
            with self.subTest(anchor=a.key):
                self.assertLessEqual(abs(got / target - 1), 0.25, (got, target))

    def test_naive_attention_scores_by_hand(self):
        # SD2 at 64x64 latents, heads = C/64, elements = heads x L x (L + 77) per call:
        # down0 2x5x4096x4173 + down1 2x10x1024x1101 + down2 2x20x256x333 + mid 20x64x141
        # + up1 3x20x256x333 + up2 3x10x1024x1101 + up3 3x5x4096x4173 = 492,391,680.
        self.assertEqual(anchors.sd2_attention_scores(64), 492_391_680)

    def test_every_model_states_one_time_range_per_device(self):
        for name in MODEL_NAMES:
            ranges = [anchors.parse_range(line)
                      for line in model(name)["provenance"]["assumptions"]]
            ranges = [r for r in ranges if r]
            with self.subTest(profile=name):
                self.assertEqual(sorted(r[0] for r in ranges), sorted(DEVICE_TYPES))
                for _, low, high in ranges:
                    self.assertLess(low, 1.0)
                    self.assertGreater(high, 1.0)

    def test_parse_range_ignores_other_lines(self):
        self.assertIsNone(anchors.parse_range("Activations are fp16."))
        self.assertEqual(anchors.parse_range("time-range V100-SXM2: x0.84 to x1.07 (why)"),
                         ("V100-SXM2", 0.84, 1.07))


from profilegen import calibrate, floorreport, hostfloor, measurements, specs  # noqa: E402
from profilegen.unet import SD2_UNET, build_unet  # noqa: E402


def shipped_step_ms(name, device, b):
    """Forward + backward of one microbatch of b through every layer of the shipped profile,
    as a one-stage plan predicts it (interpolated as the planner does)."""
    return 1e3 * b * per_sample(model(name), device, ["forward_s", "backward_s"], b)


class HostFloorTest(unittest.TestCase):
    def test_every_whole_step_within_its_tolerance(self):
        # The lead's bar: the one-stage step within 15% of the measured range where the
        # device is the bottleneck, 30% where the host is; read from the shipped JSON.
        for w in measurements.WHOLE_STEPS:
            got = calibrate.step_ms(calibrate.devices()[w.device], w.model, w.microbatch)
            got["time"] = shipped_step_ms(w.model, w.device, w.microbatch)
            off, tol, ok = floorreport.within(w, got)
            with self.subTest(device=w.device, microbatch=w.microbatch, low=w.low_ms):
                self.assertTrue(ok, f"{got['time']:.1f} ms is {100 * off:+.1f}% off")

    def test_without_the_floor_the_small_microbatches_fail(self):
        # Negative control: the same fitted device with no host cost makes a microbatch of 1
        # take its device time alone (13 ms), far below the measured 80-100 ms.
        dev = calibrate.devices()["H200-SXM"]
        bare = hostfloor.with_constants(dev, dev.device.efficiency, 0.0, dev.elementwise)
        w = measurements.WHOLE_STEPS[0]
        self.assertEqual((w.device, w.microbatch), ("H200-SXM", 1))
        self.assertFalse(floorreport.within(w, calibrate.step_ms(bare, w.model, 1))[2])
        self.assertTrue(floorreport.within(w, calibrate.step_ms(dev, w.model, 1))[2])

    def test_small_microbatches_cost_the_same_on_hopper(self):
        # The measured flat region: microbatch 1 to 4 within 2% of each other at 512 px.
        for device in ("H100-SXM", "H200-SXM"):
            times = [shipped_step_ms("sd2-unet-512", device, b) for b in (1, 2, 4)]
            with self.subTest(device=device):
                self.assertLess(max(times) / min(times), 1.02, times)

    def test_kernel_counts_by_hand(self):
        layers = {x.name: x for x in build_unet(SD2_UNET, 64).layers}
        # down1.resnet0 (320 -> 640): GroupNorm 3 + conv 2 + temb linear 1 + GroupNorm 3 +
        # conv 2 + shortcut conv 2 + 6 pointwise (3 SiLU, temb add, residual add, scale) = 19.
        self.assertEqual(layers["down1.resnet0"].kernels, 19)
        # up0.resnet0: the same 19 with a shortcut, + the skip concatenation = 20.
        self.assertEqual(layers["up0.resnet0"].kernels, 20)
        # A Transformer2DModel: GroupNorm 3, layout copy 1, proj_in 1; the block: 3
        # LayerNorms, 10 linears, 2 flash calls x 2, 7 pointwise; proj_out 1, copy + add 2.
        attn = layers["down0.attn0"]
        self.assertEqual(attn.kernels, 3 + 1 + 1 + 3 + 10 + 4 + 7 + 1 + 2)
        self.assertEqual(attn.host_ops, 2 * 9)
        self.assertEqual(sum(x.kernels for x in layers.values()), 968)

    def test_regime_line_per_device(self):
        for name in MODEL_NAMES:
            lines = [a for a in model(name)["provenance"]["assumptions"]
                     if a.startswith(calibrate.REGIME_PREFIX)]
            with self.subTest(profile=name):
                self.assertEqual([a.split(":")[0].split()[1] for a in lines], DEVICE_TYPES)

    def test_the_layer_floors_in_the_specs_follow_the_fit(self):
        # The planner reads each device's host floor per layer from the spec a profile
        # carries: the fit's host cost per op x the SD2 UNet's dispatched ops over its layers
        # (the per-layer overhead of timing.py for V100 and 910A); a refit moves them. Read
        # from the shipped files, as the planner reads them.
        layers = build_unet(SD2_UNET, 64).layers
        ops, count = sum(x.dispatches for x in layers), len(layers)
        self.assertEqual((ops, count), (1256, 47))
        hopper = calibrate.hopper_fit().op_s
        expected = {"V100-SXM2": timing.V100_LAUNCH_S, "Ascend-910A": timing.ASCEND_LAUNCH_S,
                    "H100-SXM": hopper * ops / count, "H200-SXM": hopper * ops / count,
                    "A100-SXM": hopper * ops / count, "B200": hopper * ops / count,
                    "Ascend-910B": calibrate.ASCEND_910B_OP_S * ops / count}
        floors = {}
        for path in sorted(CLUSTERS.glob("*.json")):
            spec = load(path)["device"].get("spec")
            if spec:
                floors.setdefault(load(path)["device"]["type"], set()).add(spec["layer_floor_s"])
        self.assertEqual(floors, {name: {floor} for name, floor in expected.items()})
        for name in MODEL_NAMES:
            specs_of = model(name)["timing"]["device_specs"]
            with self.subTest(profile=name):
                self.assertEqual({d: s["layer_floor_s"] for d, s in specs_of.items()},
                                 {d: expected[d] for d in DEVICE_TYPES})

    def test_the_fit_is_deterministic_and_rounded(self):
        fit = calibrate.hopper_fit()
        for value in list(fit.efficiency.values())[:4] + list(fit.elementwise) + [fit.op_s]:
            self.assertEqual(value, calibrate.r3(value))

    def test_new_clusters_are_switched_fabrics(self):
        # DGX H100/H200/A100: NVSwitch; Atlas 800T A2: a full HCCS mesh. Every pair of a node
        # is one link class, and the inter-node class is each device's own NIC.
        for name in CLUSTER_NAMES:
            c = load(CLUSTERS / f"{name}.json")
            if c["device"]["type"] in ("V100-SXM2", "Ascend-910A"):
                continue
            cells = {cell for row in c["intra_node"] for cell in row} - {"X"}
            with self.subTest(cluster=name):
                self.assertEqual(len(cells), 1)
                self.assertEqual(c["nodes"] * c["devices_per_node"],
                                 8 * int(name.rsplit("-", 1)[1].rstrip("n")))


class DeviceSpecTest(unittest.TestCase):
    """Device datasheets are data: one table (datasheets.py) written into every profile."""

    def test_every_spec_in_a_shipped_profile_is_its_row_of_the_table(self):
        # tiny-unet.json is hand-written, not regenerated: its specs are checked here.
        seen = set()
        for path in sorted(MODELS.rglob("*.json")):
            for name, spec in load(path)["timing"].get("device_specs", {}).items():
                with self.subTest(profile=path.name, device=name):
                    self.assertEqual(spec, specs.spec_json(name))
                    seen.add(str(path.relative_to(MODELS))[:-len(".json")])
        for path in sorted(CLUSTERS.glob("*.json")):
            device = load(path)["device"]
            if "spec" in device:
                with self.subTest(profile=path.name):
                    self.assertEqual(device["spec"], specs.spec_json(device["type"]))
                    seen.add(path.stem)
        self.assertEqual(seen, set(MODEL_NAMES + CLUSTER_NAMES + ["tiny-unet"]))

    def test_a_generated_model_has_a_spec_for_every_device_type(self):
        for name in MODEL_NAMES + ["tiny-unet"]:
            timing_of = model(name)["timing"]
            with self.subTest(profile=name):
                self.assertEqual(list(timing_of["device_specs"]), timing_of["device_types"])

    def test_the_table_is_the_one_place_of_the_datasheet_figures(self):
        # A peak or bandwidth written anywhere else in the generator or the planner is a
        # second copy that a change to the table would miss.
        figures = re.compile(r"989\.4e12|\b125e12|\b354e12|\b312e12|2\.039e12|3\.35e12|"
                             r"\b4\.8e12|\b256e12|\b1\.6e12|\b1\.2e12|\b900e9|2\.25e15")
        sources = ([p for p in (REPO / "scripts" / "profilegen").glob("*.py")
                    if p.name != "datasheets.py"]
                   + [p for d in ("src", "include", "solver")
                      for p in (REPO / d).rglob("*") if p.suffix in (".cpp", ".hpp")])
        self.assertGreater(len(sources), 100)
        for path in sources:
            with self.subTest(file=str(path.relative_to(REPO))):
                self.assertIsNone(figures.search(path.read_text(encoding="utf-8")))
        self.assertIsNotNone(figures.search(
            (REPO / "scripts" / "profilegen" / "datasheets.py").read_text(encoding="utf-8")))

    def test_the_spec_schema_is_one_in_both_schemas(self):
        cluster = load(SCHEMAS / "cluster.schema.json")["definitions"]["device_spec"]
        self.assertEqual(load(SCHEMAS / "model.schema.json")["definitions"]["device_spec"],
                         cluster)
        for name in DEVICE_TYPES + DERIVED_DEVICE_TYPES:
            with self.subTest(device=name):
                self.assertEqual(schema_errors(specs.spec_json(name), cluster, cluster), [])
        bad = specs.spec_json("B200")
        del bad["stack"]
        bad["peak_flops"]["fp16"] = 0
        self.assertEqual(schema_errors(bad, cluster, cluster),
                         ["$: missing stack", "$.peak_flops.fp16: not above 0"])


class DocsTest(unittest.TestCase):
    def test_docs_tables_match_the_generator(self):
        result = run_generator("--summary")
        self.assertEqual(result.returncode, 0, result.stderr)
        doc = (REPO / "docs" / "profiles.md").read_text(encoding="utf-8")
        for line in result.stdout.splitlines():
            if line:
                self.assertIn(line, doc)


if __name__ == "__main__":
    unittest.main()
