"""A small diffusion transformer (DiT) in the block-list protocol, able to run Ulysses sequence
parallelism.

The shape follows DiT (Peebles and Xie, arXiv 2212.09748; facebookresearch/DiT models.py):
patchified latents embedded as tokens plus a learned position embedding, a timestep MLP whose
output every block reads (a carried tensor), transformer blocks whose LayerNorms are
modulated by it (adaLN: shift, scale and gate from one linear layer), multi-head
self-attention over all tokens and an MLP, then a modulated LayerNorm and a linear head back
to patches. The latents come patchified (make_batch draws tokens of patch x patch x channels
values), so every block but attention works token by token.

Sequence parallelism (docs/torch.md, "Sequence parallelism"): `set_sequence_parallel(ctx)`
gives the model a context with `index` and `degree` (this process's share of its sequence
group), `ulysses` and `attention(q, k, v)`; the runtime then hands each process
`shard_batch(batch, index, degree)`, a contiguous slice of the tokens. Each attention gives
its share's q, k and v to `ctx.attention`, which exchanges them with the group (Ulysses:
an all-to-all to head-sharded q, k, v over the whole sequence and one back, DeepSpeed-Ulysses,
arXiv 2309.14509; ring attention: keys and values passed around the ring, arXiv 2310.01889;
python/pulse_runtime/sequence.py). The embedding adds the position embedding of its own
tokens (offset index x local tokens). Without a context (or with degree 1) the model is the
plain one-process reference.
"""

import math

import torch
from torch import nn
import torch.nn.functional as F


def timestep_features(t, dim):
    """Sinusoidal timestep features (DiT's TimestepEmbedder.timestep_embedding)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64,
                                                    device=t.device) / half)
    args = t.to(torch.float64)[:, None] * freqs[None, :]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1)


def modulate(x, shift, scale):
    return x * (1 + scale[:, None, :]) + shift[:, None, :]


class Embed(nn.Module):
    """Patch tokens -> width, plus the position embedding of this rank's tokens; the timestep
    MLP's output is the carried tensor `temb`."""

    def __init__(self, patch_dim, tokens, width, owner):
        super().__init__()
        self.proj = nn.Linear(patch_dim, width)
        self.pos = nn.Parameter(torch.randn(1, tokens, width) * 0.02)
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, width))
        self.width, self.owner = width, owner

    def forward(self, h, env):
        ctx = self.owner.sequence
        local = h.shape[1]
        first = ctx.index * local if ctx is not None else 0
        h = self.proj(h) + self.pos[:, first:first + local]
        feats = timestep_features(env["t"], self.width).to(h.dtype)
        return h, {"temb": self.mlp(feats)}


class Attention(nn.Module):
    """Multi-head self-attention; under a sequence context, Ulysses (the module docstring)."""

    def __init__(self, width, heads, owner):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.heads, self.owner = heads, owner

    def forward(self, x):
        n, tokens, width = x.shape
        q, k, v = self.qkv(x).reshape(n, tokens, 3, self.heads, width // self.heads).unbind(2)
        ctx = self.owner.sequence
        if ctx is not None and ctx.degree > 1:  # this share's queries over every token
            out = ctx.attention(q, k, v)
        else:
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                 v.transpose(1, 2)).transpose(1, 2)
        return self.proj(out.reshape(n, tokens, width))


class Block(nn.Module):
    """DiT block with adaLN-Zero's six modulation vectors (here initialised at random, not
    zero, so that every parameter has a gradient from the first step)."""

    def __init__(self, width, heads, owner):
        super().__init__()
        self.norm1 = nn.LayerNorm(width, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(width, heads, owner)
        self.norm2 = nn.LayerNorm(width, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * width, width))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(width, 6 * width))

    def forward(self, h, env):
        shift1, scale1, gate1, shift2, scale2, gate2 = self.ada(env["temb"]).chunk(6, dim=1)
        h = h + gate1[:, None, :] * self.attn(modulate(self.norm1(h), shift1, scale1))
        h = h + gate2[:, None, :] * self.mlp(modulate(self.norm2(h), shift2, scale2))
        return h, {}


class Head(nn.Module):
    def __init__(self, width, patch_dim):
        super().__init__()
        self.norm = nn.LayerNorm(width, elementwise_affine=False, eps=1e-6)
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(width, 2 * width))
        self.out = nn.Linear(width, patch_dim)

    def forward(self, h, env):
        shift, scale = self.ada(env["temb"]).chunk(2, dim=1)
        return self.out(modulate(self.norm(h), shift, scale)), {}


class SmallDiT(nn.Module):
    """embed, `depth` transformer blocks, head; one carried tensor (the timestep embedding)."""

    def __init__(self, channels=4, size=16, patch=2, width=64, heads=4, depth=4):
        super().__init__()
        self.patch_dim = channels * patch * patch
        self.tokens = (size // patch) ** 2
        self.sequence = None  # the sequence-parallel context (set_sequence_parallel)
        names = ["embed"] + [f"block{i}" for i in range(depth)] + ["head"]
        self.block_names = names
        self.block_kinds = ["patch_embed+time_mlp"] + ["dit_block"] * depth + ["final_layer"]
        owner = _Owner(self)
        self.blocks = nn.ModuleList([Embed(self.patch_dim, self.tokens, width, owner)]
                                    + [Block(width, heads, owner) for _ in range(depth)]
                                    + [Head(width, self.patch_dim)])
        self.skips = []
        self.carried = [{"name": "temb", "producer": "embed", "needs_gradient": True}]
        self.block_sequence, self.block_flops = self._shapes(width, heads, depth)

    def _shapes(self, width, heads, depth):
        """Each block's `sequence` and forward FLOPs per sample, by formula (docs/formats.md):
        linear 2 x in x out per token, the attention core 4 x tokens^2 x width."""
        L, P, D = self.tokens, self.patch_dim, width
        token_wise = {"tokens": L, "heads": 0, "head_dim": 0, "attention_flops_per_sample": 0}
        core = 4 * L * L * D
        block = 2 * L * (3 * D * D + D * D + 8 * D * D) + core + 2 * D * 6 * D
        shapes = ([token_wise]
                  + [{"tokens": L, "heads": heads, "head_dim": D // heads,
                      "attention_flops_per_sample": core}] * depth + [token_wise])
        flops = [2 * L * P * D + 2 * 2 * D * D] + [block] * depth + [2 * L * D * P + 4 * D * D]
        return shapes, flops

    # --- sequence parallelism ------------------------------------------------------------

    def set_sequence_parallel(self, ctx):
        """`ctx` (index, degree, ulysses, attention) or None; the heads must split over the
        Ulysses degree, the tokens over the whole degree."""
        for block in self.blocks:
            attn = getattr(block, "attn", None)
            if ctx is not None and attn is not None and attn.heads % ctx.ulysses:
                raise ValueError(f"Ulysses degree {ctx.ulysses} does not divide the "
                                 f"{attn.heads} heads")
        if ctx is not None and self.tokens % ctx.degree:
            raise ValueError(f"sequence degree {ctx.degree} does not divide the "
                             f"{self.tokens} tokens")
        self.sequence = ctx

    def shard_batch(self, batch, index, degree):
        """This rank's share of a batch: tokens index x L/degree on of x and target."""
        local = self.tokens // degree
        part = slice(index * local, (index + 1) * local)
        return {k: (v[:, part] if k in ("x", "target") else v) for k, v in batch.items()}

    # --- data and loss -------------------------------------------------------------------

    def make_batch(self, n, seed, dtype=None, device="cpu"):
        """Noisy patchified latents x [n, tokens, patch_dim], timesteps t, target noise."""
        dtype = dtype or next(self.parameters()).dtype
        gen = torch.Generator().manual_seed(seed)
        shape = (n, self.tokens, self.patch_dim)
        x = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
        target = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
        t = torch.randint(0, 1000, (n,), generator=gen)
        return {"x": x.to(device), "t": t.to(device), "target": target.to(device)}

    def first_input(self, batch):
        return batch["x"]

    def loss_sum(self, out, batch):
        """Sum over samples of each sample's mean squared error over its (local) tokens."""
        return ((out - batch["target"]) ** 2).flatten(1).mean(dim=1).sum()

    def forward(self, batch):
        env = dict(batch)
        h = self.first_input(batch)
        for block in self.blocks:
            h, produced = block(h, env)
            env.update(produced)
        return h


class _Owner:
    """The model as its blocks see it (its `sequence` context), without registering the
    model as a submodule of its own blocks."""

    def __init__(self, model):
        self._model = model

    @property
    def sequence(self):
        return self._model.sequence


def build(seed=0, dtype=torch.float32):
    """The model pulse-profile measured (profiles/models/small-dit-cpu.json): 64 tokens
    (16x16 latents of 4 channels, patch 2), width 64, 4 heads, 4 blocks."""
    torch.manual_seed(seed)
    return SmallDiT().to(dtype)


def build_test(seed=0, dtype=torch.float64):
    """Same blocks at 16 tokens (8x8 latents), width 32: the runtime's correctness tests."""
    torch.manual_seed(seed)
    return SmallDiT(size=8, width=32).to(dtype)
