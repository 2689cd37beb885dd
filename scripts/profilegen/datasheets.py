"""The device datasheets: one table, the only place a device's figures are written.

Every other module reads it: timing.py (V100, 910A) and hostfloor.py (H100, H200, A100,
910B) build their time models from its peaks and bandwidths, clusters.py puts the spec of
its device into every cluster profile, catalog.py the spec of every device type a model
profile has times for (specs.py writes both), and the planner derives a device's times from
another's with them (docs/profiles.md, "Another device without re-profiling").

A row says for each figure whether it is a datasheet figure, a measurement, a fit or an
assumption (`source`). The host/launch floor of a layer is not a datasheet figure: specs.py
computes it from the fits (timing.py's per-layer overhead, or calibrate.py's host cost per
dispatched op x the SD2 UNet's ops per layer).
"""

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

# The software a device's times were fitted in. A time derived across stacks carries the
# other stack's efficiency, so derivation prefers a source of the target's own stack.
CUDA_EAGER = "CUDA, eager PyTorch"
ASCEND_GRAPH = "Ascend, MindSpore graph mode"

HOPPER_REGIME = ("bf16 weights, gradients and activations (pure bf16, no fp32 master "
                 "weights), eager PyTorch (no torch.compile, no CUDA graphs), "
                 "F.scaled_dot_product_attention")
ASCEND_GRAPH_REGIME = ("fp16 (mixed precision as mindone trains it), MindSpore graph mode "
                       "(jit O2, data sink): compiled, the host does not launch each kernel")


@dataclass(frozen=True)
class Sheet:
    """One device: its datasheet figures, what its times describe and where it all comes
    from."""
    name: str                       # the device type clusters and model profiles use
    aliases: Tuple[str, ...]        # other names of it (torch.cuda.get_device_name, MLPerf)
    stack: str                      # the software its times are fitted in
    peak_flops: Dict[str, float]    # dense tensor peak per precision, FLOP/s (datasheet)
    hbm_bytes_per_s: float          # HBM bandwidth (datasheet)
    mem_efficiency: float           # achieved fraction of it (assumed)
    # How its host/launch floor per layer is set (specs.py): None for the per-layer overhead
    # of timing.py (V100, 910A); else the device whose fitted (or assumed) host cost per
    # dispatched op it shares.
    host_like: Optional[str]
    # The host-floor model's fit group (calibrate.py); None: no fitted times of its own
    # (timing.py's devices, and devices the planner derives, such as the B200).
    group: Optional[str]
    regime: str                     # what its times describe: dtype, eager or graph mode
    hardware: str                   # the datasheet figures in words, for provenance
    source: str                     # every figure's origin, datasheet vs measured vs assumed

    @property
    def achieved_bw(self) -> float:
        return self.hbm_bytes_per_s * self.mem_efficiency


KLOCKWOOD_B200 = ("glennklockwood.com/garden/processors/B200: NVIDIA's HGX B200 figures at "
                  "1,000 W, FP16/BF16 2,250 TFLOPS dense matrix (4,500 sparse), FP8 4,500, "
                  "8 TB/s HBM3e")
AO_B200_BW = ("pytorch/ao pull request #4002 (2026-03-05): the driver reports a 7680-bit bus "
              "at 3996 MHz, 7.67 TB/s rather than 8")

TABLE = [
    Sheet("V100-SXM2", ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"), CUDA_EAGER,
          {"fp16": 125e12}, 900e9, 0.9, None, None,
          "fp16 as the anchors ran it (diffusers sampling, PyTorch 2.0 eager, no compile); a "
          "training step is assumed to cost 2 x its forward",
          "V100 SXM2: 125 TFLOPS fp16 tensor, 900 GB/s HBM2",
          "datasheet: NVIDIA Tesla V100 SXM2, 125 TFLOPS fp16 tensor at 1530 MHz, 900 GB/s "
          "HBM2 (models_hw.md 6); assumed: 0.9 of the bandwidth achieved (800-850 GB/s "
          "achievable)"),
    Sheet("Ascend-910A", (), ASCEND_GRAPH, {"fp16": 256e12}, 1.2e12, 0.8, None, None,
          "fp16, MindSpore 2.1 graph mode with data sink (the anchors' setting)",
          "Ascend 910A: 256 TFLOPS fp16 cube, 1.2 TB/s HBM2",
          "datasheet: Huawei Ascend 910, Hot Chips 31 (2019), 256 TFLOPS fp16 cube; "
          "secondary sources: 1.2 TB/s HBM (models_hw.md 6); assumed: 0.8 of it achieved"),
    Sheet("H100-SXM", ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"), CUDA_EAGER,
          {"fp16": 989.4e12, "bf16": 989.4e12}, 3.35e12, 0.85, "H100-SXM", "hopper",
          HOPPER_REGIME, "H100 SXM5 80 GB: 989.4 TFLOPS bf16 dense, 3.35 TB/s HBM3",
          "datasheet: NVIDIA H100 SXM5, 989.4 TFLOPS fp16/bf16 dense, 3.35 TB/s HBM3; "
          "assumed: 0.85 of the bandwidth achieved"),
    Sheet("H200-SXM", ("NVIDIA H200", "H200-SXM5-141GB"), CUDA_EAGER,
          {"fp16": 989.4e12, "bf16": 989.4e12}, 4.8e12, 0.85, "H100-SXM", "hopper",
          HOPPER_REGIME, "H200 SXM 141 GB: 989.4 TFLOPS bf16 dense, 4.8 TB/s HBM3e",
          "datasheet: NVIDIA H200 SXM, 989.4 TFLOPS fp16/bf16 dense, 4.8 TB/s HBM3e; "
          "assumed: 0.85 of the bandwidth achieved"),
    Sheet("A100-SXM", ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"), CUDA_EAGER,
          {"fp16": 312e12, "bf16": 312e12}, 2.039e12, 0.85, "H100-SXM", "a100",
          HOPPER_REGIME + "; the device side is fitted to fp16 eager sampling in the 2023 stack "
          "(PyTorch 2.0, diffusers 0.17), the host side is the Hopper fit (PyTorch 2.11): a "
          "newer stack may run the device side faster (the time range's low end)",
          "A100 SXM4 80 GB: 312 TFLOPS bf16 dense, 2.039 TB/s HBM2e",
          "datasheet: NVIDIA A100 SXM4 80 GB, 312 TFLOPS fp16/bf16 dense, 2.039 TB/s HBM2e; "
          "assumed: 0.85 of the bandwidth achieved, and the Hopper host (the host cost per "
          "op is a host and framework property)"),
    Sheet("Ascend-910B", (), ASCEND_GRAPH, {"fp16": 354e12}, 1.6e12, 0.8, "Ascend-910B",
          "ascend910b", ASCEND_GRAPH_REGIME,
          "Ascend 910B (Atlas 800T A2): 354 TFLOPS fp16 (24 AI cores x 1.8 GHz x "
          "4096 fp16 MAC per cycle x 2), 64 GB HBM2e at about 1.6 TB/s",
          "derived from public figures: 354 TFLOPS fp16 = 24 AI cores (npu-smi) x 1.8 GHz x "
          "4096 fp16 MAC per cycle (Hot Chips 31) x 2; secondary sources: about 1.6 TB/s "
          "HBM2e; assumed: 0.8 of it achieved"),
    Sheet("B200", ("NVIDIA B200", "B200-SXM-180GB"), CUDA_EAGER,
          {"fp16": 2.25e15, "bf16": 2.25e15, "fp8": 4.5e15}, 8e12, 0.85, "H100-SXM", None,
          HOPPER_REGIME, "B200 SXM 180 GB: 2,250 TFLOPS bf16 dense, 8 TB/s HBM3e",
          "datasheet: NVIDIA HGX B200 at 1,000 W, 2,250 TFLOPS fp16/bf16 and 4,500 fp8 "
          "dense, 8 TB/s HBM3e (as glennklockwood.com/garden/processors/B200 lists them; the "
          "driver-reported memory bus gives 7.67 TB/s, pytorch/ao pull request #4002); "
          "assumed: 0.85 of the bandwidth achieved, as on Hopper, and the Hopper host (the "
          "same eager PyTorch host); nothing measured on a B200"),
]


def sheet(name: str) -> Sheet:
    return next(s for s in TABLE if s.name == name)
