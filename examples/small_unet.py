"""A small but real diffusion UNet written as an ordered list of named blocks.

The shape follows diffusers' UNet2DModel (conv_in, resnet blocks with a timestep embedding,
downsample/upsample, a mid block with self-attention, decoder resnets that concatenate the
encoder outputs popped in LIFO order, then norm/SiLU/conv_out), scaled down to a few million
parameters so that a training step on one CPU core takes well under a second.

The block-list protocol (what scripts/profile_torch.py and examples/torch_runtime/ rely on,
docs/torch.md describes it):

- ``model.blocks`` (``nn.ModuleList``) and ``model.block_names``/``model.block_kinds``: the
  blocks in execution order. Block ``i`` is called as ``h, produced = block(h, env)``: ``h``
  is the main-path tensor (block 0 gets ``model.first_input(batch)``), ``env`` a dict holding
  the batch fields, the carried tensors made so far and the skip tensors this block consumes
  (keyed by skip name); ``produced`` maps carried-tensor names to tensors the block makes.
- ``model.skips``: ``{name, producer, consumer}``; the skip tensor is the producer's output.
- ``model.carried``: ``{name, producer, needs_gradient}``; tensors every later block may read.
- ``model.make_batch(n, seed)``, ``model.loss_sum(out, batch)`` (sum over samples of the
  per-sample loss) and ``model.forward(batch)`` (all blocks in order: the one-device reference).
"""

import math

import torch
from torch import nn
import torch.nn.functional as F

GROUPS = 8  # GroupNorm groups; every channel count below is a multiple of it.


class _FastBatchOne(torch.autograd.Function):
    """A batch-1 convolution on oneDNN: the forward through torch.mkldnn_convolution, the
    backward as the first sample of a batch of two (the second all zeros), which PyTorch
    sends to oneDNN too. Saves only the real input, as nn.Conv2d does."""

    @staticmethod
    def forward(ctx, x, weight, bias, conv):
        ctx.conv = conv
        ctx.save_for_backward(x, weight, bias)
        return torch.mkldnn_convolution(x, weight, bias, conv.padding, conv.stride,
                                        conv.dilation, conv.groups)

    @staticmethod
    def backward(ctx, grad):
        x, weight, bias = ctx.saved_tensors
        conv = ctx.conv
        mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1],
                bias is not None and ctx.needs_input_grad[2]]
        grad_x, grad_w, grad_b = torch.ops.aten.convolution_backward(
            torch.cat([grad, torch.zeros_like(grad)]), torch.cat([x, torch.zeros_like(x)]),
            weight, None if bias is None else [bias.shape[0]], conv.stride, conv.padding,
            conv.dilation, False, [0, 0], conv.groups, mask)
        return (None if grad_x is None else grad_x[:1]), grad_w, grad_b, None


class Conv2d(nn.Conv2d):
    """nn.Conv2d that never takes PyTorch's slow batch-1 CPU path.

    PyTorch (1.13, Debian's python3-torch) sends a float32 CPU convolution to oneDNN only if
    the batch is above 1 or the input has more than 20480 elements; below that it uses its
    unvectorised fallback. Measured here on one thread, 32 channels at 24x24, 3x3: forward
    1.97 ms at batch 1 against 0.12 ms at batch 2, backward 4.1 against 0.25 ms, which made
    every block of this model 2-17x slower per sample at microbatch 1 than at 2, in the
    profile and in the runtime alike. Such a convolution goes to oneDNN here as well
    (_FastBatchOne); the numbers agree with nn.Conv2d's to float32 rounding."""

    def _slow_at_batch_one(self, x):
        return (x.device.type == "cpu" and x.dtype == torch.float32 and x.shape[0] == 1
                and x.numel() <= 20480 and self.groups == 1 and self.padding_mode == "zeros"
                and not isinstance(self.padding, str) and torch.backends.mkldnn.is_available()
                and (self.kernel_size != (1, 1) or self.stride != (1, 1)))

    def forward(self, x):
        if self._slow_at_batch_one(x):
            return _FastBatchOne.apply(x, self.weight, self.bias, self)
        return super().forward(x)


class GroupNorm(nn.GroupNorm):
    """GroupNorm computed in float32 when its input is float16 or bfloat16 (as
    guided-diffusion's GroupNorm32 does), its weight and bias too: under autocast the
    convolutions hand it low-precision activations beside float32 weights, in pure bf16 the
    weights are bf16 as well, and PyTorch's CPU group_norm takes neither mix ("mixed dtype
    (CPU): expect parameter to have scalar type of Float"); normalising in float32 is the
    numerically safe choice anyway."""

    def forward(self, x):
        if x.dtype in (torch.float16, torch.bfloat16):
            weight = None if self.weight is None else self.weight.float()
            bias = None if self.bias is None else self.bias.float()
            return F.group_norm(x.float(), self.num_groups, weight, bias,
                                self.eps).to(x.dtype)
        return super().forward(x)


def timestep_features(t, dim):
    """Sinusoidal timestep features, as in DDPM / diffusers' get_timestep_embedding."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64,
                                                    device=t.device) / half)
    args = t.to(torch.float64)[:, None] * freqs[None, :]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1)


class ResBlock(nn.Module):
    """GroupNorm-SiLU-conv twice, the timestep embedding added in between (diffusers'
    ResnetBlock2D); a 1x1 shortcut when the channel count changes."""

    def __init__(self, in_ch, out_ch, temb_dim):
        super().__init__()
        self.norm1 = GroupNorm(GROUPS, in_ch)
        self.conv1 = Conv2d(in_ch, out_ch, 3, padding=1)
        self.temb_proj = nn.Linear(temb_dim, out_ch)
        self.norm2 = GroupNorm(GROUPS, out_ch)
        self.conv2 = Conv2d(out_ch, out_ch, 3, padding=1)
        self.shortcut = Conv2d(in_ch, out_ch, 1) if in_ch != out_ch else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.shortcut(x) + h


class Attention(nn.Module):
    """Single-head self-attention over the pixels with a residual connection."""

    def __init__(self, ch):
        super().__init__()
        self.norm = GroupNorm(GROUPS, ch)
        self.qkv = Conv2d(ch, 3 * ch, 1)
        self.proj = Conv2d(ch, ch, 1)

    def forward(self, x):
        b, c, hgt, wid = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, c, hgt * wid).unbind(1)
        weights = torch.softmax(q.transpose(1, 2) @ k / math.sqrt(c), dim=-1)
        out = (v @ weights.transpose(1, 2)).reshape(b, c, hgt, wid)
        return x + self.proj(out)


class Embed(nn.Module):
    """conv_in plus the timestep MLP; the embedding is a carried tensor for later blocks."""

    def __init__(self, in_ch, ch, temb_dim):
        super().__init__()
        self.conv_in = Conv2d(in_ch, ch, 3, padding=1)
        self.feat_dim = ch
        self.mlp = nn.Sequential(nn.Linear(ch, temb_dim), nn.SiLU(), nn.Linear(temb_dim, temb_dim))

    def forward(self, h, env):
        feats = timestep_features(env["t"], self.feat_dim).to(h.dtype)
        return self.conv_in(h), {"temb": self.mlp(feats)}


class Down(nn.Module):
    """Encoder resnet (optionally with attention)."""

    def __init__(self, in_ch, out_ch, temb_dim, attention=False):
        super().__init__()
        self.res = ResBlock(in_ch, out_ch, temb_dim)
        self.attn = Attention(out_ch) if attention else None

    def forward(self, h, env):
        h = self.res(h, env["temb"])
        return (self.attn(h) if self.attn is not None else h), {}


class Downsample(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv = Conv2d(ch, ch, 3, stride=2, padding=1)

    def forward(self, h, env):
        return self.conv(h), {}


class Up(nn.Module):
    """Decoder resnet on [h, popped skip] (channel concat), optional attention, optional
    nearest-neighbour 2x upsample followed by a conv (diffusers' Upsample2D)."""

    def __init__(self, in_ch, skip_ch, out_ch, temb_dim, skip, attention=False, upsample=False):
        super().__init__()
        self.skip = skip
        self.res = ResBlock(in_ch + skip_ch, out_ch, temb_dim)
        self.attn = Attention(out_ch) if attention else None
        self.up_conv = Conv2d(out_ch, out_ch, 3, padding=1) if upsample else None

    def forward(self, h, env):
        h = self.res(torch.cat([h, env[self.skip]], dim=1), env["temb"])
        if self.attn is not None:
            h = self.attn(h)
        if self.up_conv is not None:
            h = self.up_conv(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        return h, {}


class Mid(nn.Module):
    def __init__(self, ch, temb_dim, attention):
        super().__init__()
        self.res = ResBlock(ch, ch, temb_dim)
        self.attn = Attention(ch) if attention else None

    def forward(self, h, env):
        h = self.res(h, env["temb"])
        return (self.attn(h) if self.attn is not None else h), {}


class Head(nn.Module):
    def __init__(self, ch, out_ch):
        super().__init__()
        self.norm = GroupNorm(GROUPS, ch)
        self.conv_out = Conv2d(ch, out_ch, 3, padding=1)

    def forward(self, h, env):
        return self.conv_out(F.silu(self.norm(h))), {}


class SmallUNet(nn.Module):
    """15 blocks, 6 nested skips (LIFO), one carried tensor (the timestep embedding)."""

    def __init__(self, in_ch=4, size=24, channels=(32, 64, 128)):
        super().__init__()
        c0, c1, c2 = channels
        temb = 4 * c0
        self.in_ch, self.size = in_ch, size
        spec = []  # (name, kind, module, pushes a skip?)

        def add(name, kind, module, push=False):
            spec.append((name, kind, module, push))

        add("embed", "conv_in+time_mlp", Embed(in_ch, c0, temb), push=True)
        add("down0_res", "resnet", Down(c0, c0, temb), push=True)
        add("down0_down", "downsample", Downsample(c0), push=True)
        add("down1_res", "resnet+attention", Down(c0, c1, temb, attention=True), push=True)
        add("down1_down", "downsample", Downsample(c1), push=True)
        add("down2_res", "resnet", Down(c1, c2, temb), push=True)
        add("mid_res_attn", "resnet+attention", Mid(c2, temb, attention=True))
        add("mid_res", "resnet", Mid(c2, temb, attention=False))
        # Decoder: (name, in channels, out channels, skip channels, attention, upsample).
        decoder = [
            ("up2_res0", c2, c2, c2, False, False),
            ("up2_res1", c2, c2, c1, False, True),
            ("up1_res0", c2, c1, c1, True, False),
            ("up1_res1", c1, c1, c0, False, True),
            ("up0_res0", c1, c0, c0, False, False),
            ("up0_res1", c0, c0, c0, False, False),
        ]
        pushed = [name for name, _, _, push in spec if push]
        self.skips = []
        for name, cin, cout, cskip, attn, up in decoder:
            producer = pushed.pop()  # LIFO: the most recent unconsumed encoder output
            skip = f"{producer}->{name}"
            self.skips.append({"name": skip, "producer": producer, "consumer": name})
            kind = "resnet+concat" + ("+attention" if attn else "") + ("+upsample" if up else "")
            add(name, kind, Up(cin, cskip, cout, temb, skip, attention=attn, upsample=up))
        add("head", "norm+conv_out", Head(c0, in_ch))
        self.block_names = [s[0] for s in spec]
        self.block_kinds = [s[1] for s in spec]
        self.blocks = nn.ModuleList([s[2] for s in spec])
        self.carried = [{"name": "temb", "producer": "embed", "needs_gradient": True}]

    # --- data and loss -------------------------------------------------------------------

    def make_batch(self, n, seed, dtype=None, device="cpu"):
        """A deterministic denoising batch: noisy latents x, timesteps t, target noise."""
        dtype = dtype or next(self.parameters()).dtype
        gen = torch.Generator().manual_seed(seed)
        shape = (n, self.in_ch, self.size, self.size)
        x = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
        target = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
        t = torch.randint(0, 1000, (n,), generator=gen)
        return {"x": x.to(device), "t": t.to(device), "target": target.to(device)}

    @staticmethod
    def slice_batch(batch, start, stop):
        return {k: v[start:stop] for k, v in batch.items()}

    def first_input(self, batch):
        return batch["x"]

    def loss_sum(self, out, batch):
        """Sum over samples of each sample's mean squared error (divide by the global
        batch to get the usual mean; summing microbatch losses then gives the same value)."""
        return ((out - batch["target"]) ** 2).flatten(1).mean(dim=1).sum()

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


def build(seed=0, dtype=torch.float32):
    """The model the profiler and the runtime load (``examples/small_unet.py:build``):
    4x24x24 latents, channels 32/64/128, 2.57M parameters."""
    torch.manual_seed(seed)
    return SmallUNet().to(dtype)


def build_test(seed=0, dtype=torch.float64):
    """The same 15 blocks and 6 skips at 8x8 latents and channels 16/32/64 (0.65M
    parameters): the runtime's correctness tests run it in float64, where the full size
    would take seconds per step on one core (no oneDNN kernels for float64)."""
    torch.manual_seed(seed)
    return SmallUNet(size=8, channels=(16, 32, 64)).to(dtype)


if __name__ == "__main__":
    import time

    torch.set_num_threads(1)
    model = build()
    batch = model.make_batch(8, seed=1)
    print("blocks", len(model.blocks), "skips", len(model.skips),
          "params", sum(p.numel() for p in model.parameters()))
    for i in range(3):
        start = time.perf_counter()
        loss = model.loss_sum(model(batch), batch) / 8
        loss.backward()
        print(f"step {i}: loss {loss.item():.6f}, {time.perf_counter() - start:.3f} s (batch 8)")
