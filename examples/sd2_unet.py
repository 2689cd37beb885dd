"""The Stable Diffusion 2 UNet written as an ordered list of named blocks.

The architecture of diffusers' UNet2DConditionModel with the stable-diffusion-2 configuration
(block_out_channels 320/640/1280/1280, two layers per block, cross-attention on the first
three levels, attention head dim 64, linear projections in and out of the transformers, text
context 77 x 1024 from OpenCLIP-H, GEGLU feed-forward, GroupNorm with 32 groups): 865,910,724
parameters, one block per ResnetBlock2D, Transformer2DModel (``attn``), Downsample2D and
Upsample2D, as profiles/models/sd2-unet-512.json lists them (47 blocks, 12 skips, carried
``temb`` and ``text_context``). Written from the published configuration in plain PyTorch, not
copied from diffusers; it is a workload for timing and planning, loaded with random weights.

The block-list protocol is the one examples/small_unet.py documents (docs/torch.md). Every
tensor the model makes itself (the timestep table included) is built on the device of its
input, so the model runs wherever ``.to(device)`` puts it.

Factories: ``build`` (512 px, latent 4x64x64), ``build_768`` (768 px, latent 4x96x96) and
``build_tiny`` (the same 47 blocks at a tenth of the width and 64 px, for CPU tests) take
``seed`` and ``dtype`` as the profiler and the runtime call them; ``make`` takes any image
size, width, dtype and device.
"""

import math

import torch
from torch import nn
import torch.nn.functional as F

GROUPS = 32           # GroupNorm groups everywhere
FULL_CHANNELS = (320, 640, 1280, 1280)
CROSS_ATTENTION = (True, True, True, False)  # per level: CrossAttn{Down,Up}Block2D or not
LAYERS_PER_BLOCK = 2
CONTEXT_TOKENS = 77   # OpenCLIP-H text encoder output length
FULL_CONTEXT_DIM = 1024
FULL_HEAD_DIM = 64


class Config:
    """Channel widths, attention heads and input sizes of one model instance.

    ``width`` scales every channel count (kept a multiple of the 32 GroupNorm groups) and the
    text-context width; the head dim is the largest power of two up to 64 x width that divides
    every channel count, so width 1 is SD2 itself (heads 5/10/20/20 of 64)."""

    def __init__(self, image_size=512, width=1.0):
        if image_size % 64:
            raise ValueError(f"image size {image_size}: expected a multiple of 64 px")
        self.latent = image_size // 8
        self.channels = tuple(max(GROUPS, GROUPS * round(c * width / GROUPS))
                              for c in FULL_CHANNELS)
        head = 8
        while head * 2 <= max(8, FULL_HEAD_DIM * width) and \
                all(c % (head * 2) == 0 for c in self.channels):
            head *= 2
        self.head_dim = head
        self.context_dim = max(8, 8 * round(FULL_CONTEXT_DIM * width / 8))
        self.temb_dim = 4 * self.channels[0]
        self.in_channels = 4


def timestep_features(t, dim):
    """Sinusoidal timestep features, cosines first (diffusers' Timesteps with
    flip_sin_to_cos=True, freq_shift=0), computed in float32 on t's device."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, dtype=torch.float32, device=t.device)
                      * (-math.log(10000.0) / half))
    args = t.to(torch.float32)[:, None] * freqs[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


def attention(q, k, v, heads):
    """Multi-head attention on (batch, tokens, heads x head_dim) tensors: PyTorch's fused
    kernel where it exists (2.0 and later), the plain softmax(QK^T / sqrt(d)) V otherwise."""
    b, n, inner = q.shape
    d = inner // heads
    q, k, v = (x.reshape(b, x.shape[1], heads, d).transpose(1, 2) for x in (q, k, v))
    if hasattr(F, "scaled_dot_product_attention"):
        out = F.scaled_dot_product_attention(q, k, v)
    else:
        out = torch.softmax(q @ k.transpose(-1, -2) * d ** -0.5, dim=-1) @ v
    return out.transpose(1, 2).reshape(b, n, inner)


class Attention(nn.Module):
    """diffusers' Attention: bias-free q/k/v projections, an output projection with bias;
    self-attention without context, cross-attention on the text context with it."""

    def __init__(self, dim, heads, context_dim=None, **fk):
        super().__init__()
        kv_dim = context_dim or dim
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False, **fk)
        self.to_k = nn.Linear(kv_dim, dim, bias=False, **fk)
        self.to_v = nn.Linear(kv_dim, dim, bias=False, **fk)
        self.to_out = nn.Linear(dim, dim, **fk)

    def forward(self, x, context=None):
        kv = x if context is None else context
        return self.to_out(attention(self.to_q(x), self.to_k(kv), self.to_v(kv), self.heads))


class FeedForward(nn.Module):
    """GEGLU: a projection to 2 x 4C, one half gating the other through GELU, back to C."""

    def __init__(self, dim, **fk):
        super().__init__()
        self.proj = nn.Linear(dim, 8 * dim, **fk)
        self.out = nn.Linear(4 * dim, dim, **fk)

    def forward(self, x):
        h, gate = self.proj(x).chunk(2, dim=-1)
        return self.out(h * F.gelu(gate))


class TransformerBlock(nn.Module):
    """BasicTransformerBlock: self-attention, cross-attention, feed-forward, each pre-norm
    (LayerNorm) with a residual."""

    def __init__(self, dim, heads, context_dim, **fk):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, **fk)
        self.attn1 = Attention(dim, heads, **fk)
        self.norm2 = nn.LayerNorm(dim, **fk)
        self.attn2 = Attention(dim, heads, context_dim, **fk)
        self.norm3 = nn.LayerNorm(dim, **fk)
        self.ff = FeedForward(dim, **fk)

    def forward(self, x, context):
        x = x + self.attn1(self.norm1(x))
        x = x + self.attn2(self.norm2(x), context)
        return x + self.ff(self.norm3(x))


class Transformer(nn.Module):
    """Transformer2DModel with linear projections (use_linear_projection): GroupNorm, pixels
    to tokens, proj_in, one transformer block, proj_out, back to pixels, residual."""

    def __init__(self, ch, cfg, **fk):
        super().__init__()
        self.norm = nn.GroupNorm(GROUPS, ch, eps=1e-6, **fk)
        self.proj_in = nn.Linear(ch, ch, **fk)
        self.block = TransformerBlock(ch, ch // cfg.head_dim, cfg.context_dim, **fk)
        self.proj_out = nn.Linear(ch, ch, **fk)

    def forward(self, h, env):
        b, c, hgt, wid = h.shape
        x = self.norm(h).permute(0, 2, 3, 1).reshape(b, hgt * wid, c)
        x = self.proj_out(self.block(self.proj_in(x), env["text_context"]))
        return h + x.reshape(b, hgt, wid, c).permute(0, 3, 1, 2), {}


class Resnet(nn.Module):
    """ResnetBlock2D: GroupNorm-SiLU-conv, the projected timestep embedding added, GroupNorm-
    SiLU-conv, plus the input (through a 1x1 conv when the width changes). A decoder resnet
    first concatenates the skip tensor it pops (``skip``: its name in env)."""

    def __init__(self, in_ch, out_ch, temb_dim, skip=None, skip_ch=0, **fk):
        super().__init__()
        self.skip = skip
        cin = in_ch + skip_ch
        self.norm1 = nn.GroupNorm(GROUPS, cin, **fk)
        self.conv1 = nn.Conv2d(cin, out_ch, 3, padding=1, **fk)
        self.time_emb_proj = nn.Linear(temb_dim, out_ch, **fk)
        self.norm2 = nn.GroupNorm(GROUPS, out_ch, **fk)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, **fk)
        self.conv_shortcut = nn.Conv2d(cin, out_ch, 1, **fk) if cin != out_ch else None

    def forward(self, h, env):
        if self.skip is not None:
            h = torch.cat([h, env[self.skip]], dim=1)
        x = self.conv1(F.silu(self.norm1(h)))
        x = x + self.time_emb_proj(F.silu(env["temb"]))[:, :, None, None]
        x = self.conv2(F.silu(self.norm2(x)))
        return (h if self.conv_shortcut is None else self.conv_shortcut(h)) + x, {}


class TimeEmbedding(nn.Module):
    """The timestep MLP (320 -> 1280 -> 1280); the latent passes by unchanged and the
    embedding becomes the carried tensor ``temb``."""

    def __init__(self, freq_dim, temb_dim, **fk):
        super().__init__()
        self.freq_dim = freq_dim
        self.linear_1 = nn.Linear(freq_dim, temb_dim, **fk)
        self.linear_2 = nn.Linear(temb_dim, temb_dim, **fk)

    def forward(self, h, env):
        feats = timestep_features(env["t"], self.freq_dim).to(self.linear_1.weight.dtype)
        return h, {"temb": self.linear_2(F.silu(self.linear_1(feats)))}


class Conv(nn.Module):
    """A 3x3 convolution as a block: conv_in, Downsample2D (stride 2) or, after a nearest-
    neighbour 2x upsampling, Upsample2D."""

    def __init__(self, in_ch, out_ch, stride=1, upsample=False, **fk):
        super().__init__()
        self.upsample = upsample
        self.conv = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, **fk)

    def forward(self, h, env):
        if self.upsample:
            h = F.interpolate(h, scale_factor=2.0, mode="nearest")
        return self.conv(h), {}


class ConvOut(nn.Module):
    """conv_norm_out + SiLU + conv_out."""

    def __init__(self, ch, out_ch, **fk):
        super().__init__()
        self.norm = nn.GroupNorm(GROUPS, ch, **fk)
        self.conv = nn.Conv2d(ch, out_ch, 3, padding=1, **fk)

    def forward(self, h, env):
        return self.conv(F.silu(self.norm(h))), {}


class SD2UNet(nn.Module):
    """47 blocks, 12 nested skips (LIFO), carried ``temb`` (made by the first block, trained)
    and ``text_context`` (with the batch, from the frozen text encoder, no gradient)."""

    def __init__(self, cfg, dtype=None, device=None):
        super().__init__()
        fk = {"dtype": dtype, "device": device}
        self.cfg = cfg
        spec = []      # (name, kind, module)
        pushed = []    # (block name, channels): encoder outputs the decoder pops, LIFO
        self.skips = []
        c = cfg.channels

        def add(name, kind, module, push_ch=None):
            spec.append((name, kind, module))
            if push_ch is not None:
                pushed.append((name, push_ch))

        add("time_embedding", "embedding", TimeEmbedding(c[0], cfg.temb_dim, **fk))
        add("conv_in", "conv", Conv(cfg.in_channels, c[0], **fk), push_ch=c[0])
        ch = c[0]
        for level, out in enumerate(c):
            for j in range(LAYERS_PER_BLOCK):
                attn = CROSS_ATTENTION[level]
                add(f"down{level}.resnet{j}", "resnet", Resnet(ch, out, cfg.temb_dim, **fk),
                    push_ch=None if attn else out)
                ch = out
                if attn:
                    add(f"down{level}.attn{j}", "transformer", Transformer(ch, cfg, **fk),
                        push_ch=ch)
            if level + 1 < len(c):
                add(f"down{level}.downsample", "downsample", Conv(ch, ch, stride=2, **fk),
                    push_ch=ch)
        add("mid.resnet0", "resnet", Resnet(ch, ch, cfg.temb_dim, **fk))
        add("mid.attn0", "transformer", Transformer(ch, cfg, **fk))
        add("mid.resnet1", "resnet", Resnet(ch, ch, cfg.temb_dim, **fk))
        for up in range(len(c)):
            level = len(c) - 1 - up
            out, attn = c[level], CROSS_ATTENTION[level]
            for j in range(LAYERS_PER_BLOCK + 1):
                name = f"up{up}.resnet{j}"
                producer, skip_ch = pushed.pop()
                skip = f"{producer}->{name}"
                self.skips.append({"name": skip, "producer": producer, "consumer": name})
                add(name, "resnet", Resnet(ch, out, cfg.temb_dim, skip, skip_ch, **fk))
                ch = out
                if attn:
                    add(f"up{up}.attn{j}", "transformer", Transformer(ch, cfg, **fk))
            if level > 0:
                add(f"up{up}.upsample", "upsample", Conv(ch, ch, upsample=True, **fk))
        add("conv_out", "head", ConvOut(ch, cfg.in_channels, **fk))
        self.block_names = [s[0] for s in spec]
        self.block_kinds = [s[1] for s in spec]
        self.blocks = nn.ModuleList([s[2] for s in spec])
        self.carried = [{"name": "temb", "producer": "time_embedding", "needs_gradient": True},
                        {"name": "text_context", "producer": None, "needs_gradient": False}]

    # --- data and loss -------------------------------------------------------------------

    def make_batch(self, n, seed, dtype=None, device="cpu"):
        """A deterministic denoising batch: noisy latents x, timesteps t, a text context
        standing in for the frozen text encoder's output, target noise. Drawn on the CPU
        (one generator, the same numbers on every device), then moved."""
        dtype = dtype or next(self.parameters()).dtype
        cfg = self.cfg
        gen = torch.Generator().manual_seed(seed)
        shape = (n, cfg.in_channels, cfg.latent, cfg.latent)
        x = torch.randn(shape, generator=gen)
        target = torch.randn(shape, generator=gen)
        context = torch.randn((n, CONTEXT_TOKENS, cfg.context_dim), generator=gen)
        t = torch.randint(0, 1000, (n,), generator=gen)
        return {"x": x.to(device=device, dtype=dtype), "t": t.to(device),
                "text_context": context.to(device=device, dtype=dtype),
                "target": target.to(device=device, dtype=dtype)}

    def first_input(self, batch):
        return batch["x"]

    def loss_sum(self, out, batch):
        """Sum over samples of each sample's mean squared error, accumulated in float32."""
        diff = out.float() - batch["target"].float()
        return (diff ** 2).flatten(1).mean(dim=1).sum()

    # --- the single-device reference ---------------------------------------------------

    def forward(self, batch):
        env = dict(batch)
        h = self.first_input(batch)
        producers = {s["producer"]: s["name"] for s in self.skips}
        for name, block in zip(self.block_names, self.blocks):
            h, produced = block(h, env)
            env.update(produced)
            if name in producers:
                env[producers[name]] = h
        return h


def make(image_size=512, width=1.0, dtype=torch.float32, device=None, seed=0):
    """The model at any image size (a multiple of 64 px) and width, its parameters created
    directly in ``dtype`` on ``device`` ("meta" counts parameters without allocating)."""
    torch.manual_seed(seed)
    return SD2UNet(Config(image_size, width), dtype=dtype, device=device)


def build(seed=0, dtype=torch.float32):
    """SD2 at 512 px (latent 4x64x64): what the profiler and the runtime load."""
    return make(512, 1.0, dtype, seed=seed)


def build_768(seed=0, dtype=torch.float32):
    """SD2 at 768 px (latent 4x96x96)."""
    return make(768, 1.0, dtype, seed=seed)


def build_tiny(seed=0, dtype=torch.float32):
    """The same 47 blocks and 12 skips at a tenth of the width (channels 32/64/128/128,
    head dim 8, context 77 x 104) and 64 px (latent 4x8x8): a CPU training step in
    milliseconds, for tests."""
    return make(64, 0.1, dtype, seed=seed)


if __name__ == "__main__":
    import sys
    import time

    size = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    width = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
    model = make(size, width)
    batch = model.make_batch(2, seed=1)
    print("blocks", len(model.blocks), "skips", len(model.skips),
          "params", sum(p.numel() for p in model.parameters()))
    for i in range(3):
        start = time.perf_counter()
        loss = model.loss_sum(model(batch), batch) / 2
        loss.backward()
        print(f"step {i}: loss {loss.item():.6f}, {time.perf_counter() - start:.3f} s (batch 2)")
