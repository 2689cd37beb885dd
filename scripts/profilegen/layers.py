"""The per-layer record and the accounting helpers shared by every architecture.

Conventions (models_hw.md section 0):
- FLOPs are forward FLOPs per sample: conv k x k = 2*k^2*Cin*Cout*Hout*Wout, linear =
  2*in*out*tokens, attention core (QK^T plus PV) = 4*Lq*Lk*C. Norms, activations, softmax
  and residual adds are not FLOPs; the time model charges them as memory traffic.
- Activations are fp16, 2 bytes per element.
- "saved" counts the elements autograd keeps from the forward until the backward with
  flash/xformers attention (no L x L softmax matrix). Each op keeps its input; a tensor
  shared by several ops is counted once. This reproduces the reference's ResnetBlock
  figure 3*(Cin+Cout)*HW and BasicTransformerBlock figure 28*C*L + 2*C*77 exactly.
- "kernels" counts the GPU kernels one forward of the layer launches in eager PyTorch
  (bf16, no torch.compile, no CUDA graphs), the input of the host/launch floor
  (hostfloor.py): every helper below adds what its op launches (KERNELS), and each
  builder adds the pointwise kernels (activations, residual adds, modulation, casts,
  layout copies) with `pointwise(n, why)`. Views and reshapes that do not copy launch
  nothing. The backward launches about twice as many (hostfloor.BACKWARD_KERNELS).
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional

FP16_BYTES = 2

# FLOP classes. Each has its own achieved efficiency in the time model (timing.py):
CONV = "conv"                    # 3x3 / 1x1 convolutions on feature maps larger than 16x16
SMALL_SPATIAL = "small_spatial"  # convolutions producing 16x16 or fewer positions
LINEAR = "linear"                # GEMMs over a token sequence (projections, MLPs)
ATTENTION = "attention"          # the attention core, QK^T and PV (flash/xformers)
EMBEDDING = "embedding"          # GEMMs on one vector per sample, patch embeddings, heads
FLOP_CLASSES = (CONV, SMALL_SPATIAL, LINEAR, ATTENTION, EMBEDDING)

# models_hw.md section 6: "small-spatial layers (8^2-16^2)" get their own efficiency.
SMALL_SPATIAL_MAX_POSITIONS = 16 * 16

# Forward kernels per op in eager PyTorch on a GPU (the ATen CUDA implementations):
KERNELS = {
    "linear": 1,         # one cuBLAS GEMM; addmm fuses the bias into its epilogue
    "conv": 1,           # one cuDNN convolution ...
    "conv_bias": 1,      # ... and a separate broadcast add of the bias
    "attention": 2,      # scaled_dot_product_attention (flash) and the copy that merges
                         # the heads back into one (B, L, H*D) tensor
    "layer_norm": 1,     # vectorized_layer_norm_kernel
    "group_norm": 3,     # row-wise moments, fused parameters, the normalisation itself
    "rms_norm": 6,       # diffusers RMSNorm in eager: cast, pow, mean, rsqrt, two muls
}
# Ops the host dispatches that launch no kernel but cost it as much work: an attention
# processor splits q, k and v into heads and merges them back (view + transpose each, 7),
# casts the output to the query's dtype and calls the output dropout (2).
HOST_ONLY_OPS = {"attention": 9}


@dataclass
class Layer:
    """One profile layer: a block of the network, in execution order."""
    name: str
    kind: str
    params: int = 0
    flops: Dict[str, int] = field(default_factory=dict)  # forward FLOPs per sample by class
    saved_elems: int = 0   # fp16 elements kept for backward per sample, before calibration
    out_bytes: int = 0     # main-path bytes per sample after this layer
    kernels: int = 0       # GPU kernels one eager forward launches (see KERNELS)
    host_ops: int = 0      # ops it dispatches that launch nothing (see HOST_ONLY_OPS)
    # What a sequence-parallel layout splits (video.py): tokens, heads, head_dim,
    # attention_flops_per_sample. None: the layer is not split along a sequence.
    sequence: Optional[Dict[str, int]] = None

    @property
    def dispatches(self) -> int:
        """What the host does per forward: kernels plus the kernel-free ops."""
        return self.kernels + self.host_ops

    @property
    def forward_flops(self) -> int:
        return sum(self.flops.values())


@dataclass
class Skip:
    producer: str
    consumer: str
    bytes_per_sample: int


@dataclass
class Carried:
    name: str
    producer: Optional[str]
    bytes_per_sample: int
    needs_gradient: bool


@dataclass
class Architecture:
    """A model at one resolution: its layers, long skips and carried tensors."""
    layers: List[Layer]
    skips: List[Skip]
    carried: List[Carried]


class Acc:
    """Accumulates parameters, FLOPs and saved elements while a layer is described."""

    def __init__(self, name: str, kind: str):
        self.layer = Layer(name=name, kind=kind)

    def param(self, count: int) -> None:
        """Free-standing parameters: embedding tables, positional embeddings, padding."""
        self.layer.params += count

    def norm(self, channels: int, affine: bool = True) -> None:
        """LayerNorm weights; no FLOPs (charged as memory traffic)."""
        if affine:
            self.layer.params += 2 * channels
        self.layer.kernels += KERNELS["layer_norm"]

    def group_norm(self, channels: int) -> None:
        """GroupNorm: the same weights as a LayerNorm, more kernels."""
        self.layer.params += 2 * channels
        self.layer.kernels += KERNELS["group_norm"]

    def rms_norm(self, channels: int) -> None:
        """RMSNorm has a scale but no bias."""
        self.layer.params += channels
        self.layer.kernels += KERNELS["rms_norm"]

    def pointwise(self, count: int, why: str = "") -> None:
        """Kernels that compute no FLOPs of note (activations, adds, casts, copies); `why`
        names them for the reader."""
        del why
        self.layer.kernels += count

    def linear(self, d_in: int, d_out: int, tokens: int, bias: bool = True,
               cls: str = LINEAR) -> None:
        self.layer.params += d_in * d_out + (d_out if bias else 0)
        self.flop(cls, 2 * d_in * d_out * tokens)
        self.layer.kernels += KERNELS["linear"]

    def conv(self, c_in: int, c_out: int, k: int, out_positions: int, cls: Optional[str] = None,
             bias: bool = True) -> None:
        """A k x k convolution producing out_positions spatial positions per sample."""
        self.layer.params += k * k * c_in * c_out + (c_out if bias else 0)
        if cls is None:
            cls = SMALL_SPATIAL if out_positions <= SMALL_SPATIAL_MAX_POSITIONS else CONV
        self.flop(cls, 2 * k * k * c_in * c_out * out_positions)
        self.layer.kernels += KERNELS["conv"] + (KERNELS["conv_bias"] if bias else 0)

    def attention(self, lq: int, lk: int, width: int, groups: int = 1) -> None:
        """Attention core only (one batched call over `groups` independent sequences);
        the projections are separate linear() calls."""
        self.flop(ATTENTION, groups * 4 * lq * lk * width)
        self.layer.kernels += KERNELS["attention"]
        self.layer.host_ops += HOST_ONLY_OPS["attention"]

    def flop(self, cls: str, count: int) -> None:
        assert cls in FLOP_CLASSES, cls
        self.layer.flops[cls] = self.layer.flops.get(cls, 0) + count

    def save(self, elems: int) -> None:
        self.layer.saved_elems += elems

    def done(self, out_bytes: int) -> Layer:
        self.layer.out_bytes = out_bytes
        return self.layer


def fp16_bytes(*dims: int) -> int:
    """Bytes of an fp16 tensor with the given per-sample dimensions."""
    n = FP16_BYTES
    for d in dims:
        n *= d
    return n
