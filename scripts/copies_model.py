#!/usr/bin/env python3
"""A model of N copies of one layer of a shipped profile, with K nested skips around the
middle (layer i feeds layer N-1-i, i < K): the shapes a new user tries when probing how
pulse-plan scales (issue 42: 4001 copies of tiny-unet's second layer with 2000 skips, or a
3001-layer chain). Writes the model profile JSON.

  scripts/copies_model.py N [--skips K] [--layer INDEX] [--source PROFILE] -o FILE

Each copy keeps the source layer's times (every device type, every microbatch size),
parameters and bytes; the timing block, dtype and device specs are the source's; each skip
carries the copied layer's output bytes per sample.
"""

import argparse
import copy
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def copies_model(n, skips=0, layer=1, source=ROOT / "profiles" / "models" / "tiny-unet.json"):
    src = json.loads(pathlib.Path(source).read_text())
    if not 0 <= skips <= n // 2:
        raise ValueError(f"{skips} skips do not nest in {n} layers (at most {n // 2})")
    template = src["layers"][layer]
    layers = []
    for i in range(n):
        x = copy.deepcopy(template)
        x["name"] = f"l{i}"
        layers.append(x)
    pairs = [{"producer": f"l{i}", "consumer": f"l{n - 1 - i}",
              "bytes_per_sample": template["output_bytes_per_sample"]} for i in range(skips)]
    name = f"{src['name']}-x{n}-{skips}skips"
    doc = {"schema": src["schema"], "name": name,
           "description": f"{n} copies of {src['name']}'s layer {template['name']}, "
                          f"{skips} nested skips around the middle",
           "provenance": {"method": "hand-written",
                          "source": f"scripts/copies_model.py {n} --skips {skips} "
                                    f"--layer {layer} from {pathlib.Path(source).name}"},
           "timing": src["timing"], "layers": layers, "skips": pairs}
    if "dtype" in src:
        doc["dtype"] = src["dtype"]
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("--skips", type=int, default=0)
    ap.add_argument("--layer", type=int, default=1)
    ap.add_argument("--source", default=str(ROOT / "profiles" / "models" / "tiny-unet.json"))
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    try:
        doc = copies_model(a.n, a.skips, a.layer, a.source)
    except (ValueError, IndexError, KeyError, OSError) as e:
        print(f"copies_model.py: {e}", file=sys.stderr)
        return 2
    pathlib.Path(a.output).write_text(json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
