"""The measurements the 2026 devices' times are fitted to, in one place.

To add a measurement: append a Whole(...) line to WHOLE_STEPS (a whole forward + backward
step of one microbatch, timed on the GPU without per-block synchronisation, in the regime
hostfloor.HOPPER_REGIME describes), then run

    /usr/bin/python3 scripts/gen_profiles.py          # refits, rewrites every profile
    /usr/bin/python3 tests/test_profiles.py           # every point within its tolerance

calibrate.py fits the Hopper constants to WHOLE_STEPS and to the block times of
BLOCK_PROFILE together; docs/profiles.md ("Calibration of the 2026 devices") prints the
fit against every point. A point is a range [low_ms, high_ms] because some statements are
ranges; a single figure has low_ms == high_ms.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parent.parent.parent
MEASURED_README = "profiles/measured/README.md (a copy of ../shared/measured/README.md)"

# Per-block H200 times (pulse-profile, each block alone with host synchronisation, bf16
# eager, microbatch 1-32; the README says how it was made). Its blocks are the layers of
# profiles/models/sd2-unet-512.json.
BLOCK_PROFILE = REPO / "profiles" / "measured" / "sd2-unet-512.h200-bf16.profile.json"
BLOCK_PROFILE_DEVICE = ("NVIDIA H200", "H200-SXM")  # its device type, ours


@dataclass(frozen=True)
class Whole:
    """One whole forward + backward step of the SD2 UNet at one microbatch size."""
    device: str          # device type of the profiles (H100-SXM, H200-SXM, ...)
    model: str           # the profile whose layers ran (sd2-unet-512, sd2-unet-768)
    microbatch: int
    low_ms: float        # milliseconds per step (one microbatch), the measured range;
    high_ms: float       # high_ms = inf: a lower bound only
    source: str          # where the figure comes from, and how


SEEN_FLAT = ("../shared/measured/README.md: 'The whole forward + backward step (CUDA events, "
             "no per-block synchronisation) is nearly flat, about 80-100 ms, for microbatch "
             "1-8 at 512 px', seen on an H200 and on an H100 80GB HBM3 the same day")


# MLPerf Training's Stable Diffusion (SD v2, 512 px, precomputed latents) in NVIDIA's
# optimized NeMo stack (fused kernels, CUDA graphs) is not the eager regime, but an eager
# step cannot beat it: its UNet share per sample at a microbatch size bounds the eager
# step below at that size and every smaller one (time per sample falls with the size). The
# UNet share removes the frozen OpenCLIP-H text encoder's forward (0.045 TF per sample at
# the step's own FLOP rate, 0.15 ms) and the optimizer (distributed, under 0.02 ms).
MLPERF_V40 = ("https://github.com/mlcommons/training_results_v4.0/blob/"
              "62f111b7690f163b269f32e4f93dcaaa13717c9c/NVIDIA/results/")
MLPERF_V31 = ("https://github.com/mlcommons/training_results_v3.1/blob/"
              "f33f9444205023cf49bf19ec960992b39663f6fd/NVIDIA/results/")
TEXT_ENCODER_MS = 0.15


def _mlperf_bound(ms_per_sample: float, microbatch: int) -> float:
    return (ms_per_sample - TEXT_ENCODER_MS) * microbatch


MLPERF_H200_MS = 1e3 * 49.868 / (51200 / 8)    # 7.79 ms per sample, 64 per GPU
MLPERF_H100_MS = 1e3 * 14.480 / (102400 / 64)  # 9.05 ms per sample, 16 per GPU
MLPERF_H100_V31_MS = 1e3 / (24160.0 / 512)     # 21.2 ms per sample, 4 per GPU

# The GPU check's whole steps (scripts/gpu_check.sh; docs/fidelity.md "The GPU check"): one
# H200, PyTorch 2.11.0+cu130, the SD2 UNet in pure bf16, eager, CUDA events around a plain
# forward + loss + backward, the median of 5 timed steps after 2 warm-ups, at 512 and 768 px.
# Read from the records as they were checked in; every size of both runs is a point.
GPU_CHECK_RECORDS = [REPO / "docs" / "fidelity" / name for name in
                     ("gpu-run-2026-11-26-h200.json", "gpu-run-2026-11-26-h200-run2.json")]
GPU_CHECK_DEVICES = {"NVIDIA H200": "H200-SXM"}


def gpu_check_steps(path: Path) -> List["Whole"]:
    """Every whole step a GPU check record holds, as points (low == high)."""
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    env = record["environment"]
    device = GPU_CHECK_DEVICES[env["device"]]
    out = []
    for key, step in sorted(record["steps"].items()):
        if not key.startswith("whole-") or "sizes" not in step:
            continue
        model = f"sd2-unet-{step['image_px']}"
        for size in step["sizes"]:
            if "step_s" not in size:
                continue  # out of memory or left out for time: nothing measured
            ms = 1e3 * size["step_s"]
            out.append(Whole(device, model, size["microbatch"], ms, ms,
                             f"measured: docs/fidelity/{path.name} steps.{key}, {env['device']}, "
                             f"torch {env['torch']}, {env['date_utc'][:10]}, median of "
                             f"{len(size['timed_steps'])} steps"))
    return out


WHOLE_STEPS = [
    *[w for path in GPU_CHECK_RECORDS for w in gpu_check_steps(path)],
    *[Whole("H100-SXM", "sd2-unet-512", b, 80.0, 100.0, SEEN_FLAT) for b in (1, 2, 4, 8)],
    Whole("H200-SXM", "sd2-unet-512", 32, _mlperf_bound(MLPERF_H200_MS, 32), math.inf,
          "bound: MLPerf Training v4.0 NVIDIA h200_ngc24.04_nemo stable_diffusion "
          "result_0.txt (" + MLPERF_V40 + "h200_ngc24.04_nemo/stable_diffusion/result_0.txt): "
          "8 H200-SXM, 64 samples per GPU, 51,200 samples between block_stop events 49.868 s "
          "apart = 7.79 ms per sample; minus the text encoder, x 32"),
    Whole("H100-SXM", "sd2-unet-512", 16, _mlperf_bound(MLPERF_H100_MS, 16), math.inf,
          "bound: MLPerf Training v4.0 NVIDIA eos_n8_ngc24.04_nemo stable_diffusion "
          "result_0.txt (" + MLPERF_V40 + "eos_n8_ngc24.04_nemo/stable_diffusion/"
          "result_0.txt): 64 H100-SXM, 16 per GPU, 102,400 samples per 14.48 s = 9.05 ms "
          "per sample; minus the text encoder, x 16"),
    Whole("H100-SXM", "sd2-unet-512", 4, _mlperf_bound(MLPERF_H100_V31_MS, 4), math.inf,
          "bound: MLPerf Training v3.1 NVIDIA eos_n64_ngc23.09_nemo_mm stable_diffusion "
          "result_0.txt (" + MLPERF_V31 + "eos_n64_ngc23.09_nemo_mm/stable_diffusion/"
          "result_0.txt): 512 H100-SXM, 4 per GPU, tracked_stats throughput 24,160 samples/s "
          "= 21.2 ms per sample; minus the text encoder, x 4"),
]

# The lead's tolerances for a planned whole step against the measured one: where the GPU
# is the bottleneck, and where the host is (the model's device side vs its host side).
TOLERANCE_DEVICE_BOUND = 0.15
TOLERANCE_HOST_BOUND = 0.30


# --- public figures for the devices no GPU of ours ran ---------------------------------------

@dataclass(frozen=True)
class Public:
    """A published throughput: UNet samples per second at a microbatch size."""
    key: str
    device: str
    model: str
    microbatch: int
    kind: str            # "forward" (sampling, UNet only) or "train" (a training step)
    per_second: float    # UNet calls per second (forward) or images per second (train)
    fitted: bool         # enters the fit, or shown beside it
    flash: bool          # the measured attention avoided the L x L score matrix
    source: str
    conditions: str


DIFFUSERS_T2 = ("https://github.com/huggingface/diffusers/blob/"
                "2c529b75bbd25e4c69348bbabd0a1a842d540193/docs/source/en/optimization/"
                "torch2.0.md")
MINDONE = ("https://github.com/mindspore-lab/mindone/blob/"
           "05d1d7e998fca94fc253ca2b7a7003bc08d3bad8/examples/stable_diffusion_v2/benchmark.md")
PUBLIC = [
    Public("diffusers-a100-b4", "A100-SXM", "sd2-unet-512", 8, "forward", 11.6, True, True,
           DIFFUSERS_T2, "SD 1.5 txt2img, A100 (variant not stated), PyTorch 2.0 without "
           "compile, fp16, SDPA, channels_last, diffusers 0.17.0.dev0, batch 4 (UNet batch 8 "
           "with classifier-free guidance): 11.6 it/s"),
    Public("diffusers-a100-b16", "A100-SXM", "sd2-unet-512", 32, "forward", 3.04, True, True,
           DIFFUSERS_T2, "as above, batch 16 (UNet batch 32): 3.04 it/s"),
    Public("diffusers-a100-b1", "A100-SXM", "sd2-unet-512", 2, "forward", 21.66, False, True,
           DIFFUSERS_T2, "as above, batch 1 (UNet batch 2): 21.66 it/s; host-bound in the "
           "2023 software stack, shown beside the fit"),
    Public("mindone-910b-512", "Ascend-910B", "sd2-unet-512", 3, "train", 12.75, True, False,
           MINDONE, "SD 2.0 vanilla training, 512x512, D910*x1-MS2.3.0 (one Ascend 910B), "
           "MindSpore 2.3.0 graph mode, jit O2, data sink, fp16, batch 3, no flash "
           "attention listed: 12.75 img/s"),
    Public("mindone-910b-768", "Ascend-910B", "sd2-unet-768", 3, "train", 5.80, True, False,
           MINDONE, "SD 2.1-v vanilla training, 768x768, D910*x1-MS2.2.10 (one Ascend 910B), "
           "graph mode, data sink, fp16, batch 3, no flash attention listed: 5.80 img/s"),
]
