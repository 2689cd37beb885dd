"""A diffusion UNet written the usual way: an nn.Module whose forward pushes every encoder
output on a list and pops them in the decoder, concatenating each with the decoder's input.
Nothing here knows about pipelines; pulse-run and pulse-profile split it into layers with the
torch.fx front end (python/pulse_runtime/fx_split.py, docs/torch.md):

    pulse-profile --model examples/fx_unet.py:build --sizes 1,2 -o /tmp/fx-unet.json
    pulse-run --plan plan.json --model examples/fx_unet.py:build

The training glue the front end needs is the two functions at the end: make_batch (the
forward's arguments by name, plus the target) and loss_sum.
"""

import math

import torch
from torch import nn
import torch.nn.functional as F


def timestep_features(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64,
                                                    device=t.device) / half)
    args = t.to(torch.float64)[:, None] * freqs[None, :]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1)


class TimestepEmbedding(nn.Module):
    """Timesteps -> embedding. The sinusoidal features are computed here, inside a layer
    module (not traced by torch.fx), on the timesteps' device."""

    def __init__(self, dim, out):
        super().__init__()
        self.dim = dim
        self.linear_1 = nn.Linear(dim, out)
        self.linear_2 = nn.Linear(out, out)

    def forward(self, t):
        features = timestep_features(t, self.dim).to(self.linear_1.weight.dtype)
        return self.linear_2(F.silu(self.linear_1(features)))


class ResBlock(nn.Module):
    def __init__(self, in_ch, out_ch, temb_dim, groups=8):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_ch)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1)
        self.temb_proj = nn.Linear(temb_dim, out_ch)
        self.norm2 = nn.GroupNorm(groups, out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1)
        self.shortcut = nn.Conv2d(in_ch, out_ch, 1) if in_ch != out_ch else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.shortcut(x) + h


class Downsample(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, stride=2, padding=1)

    def forward(self, x, temb):
        return self.conv(x)


class UpBlock(nn.Module):
    """A resnet on [h, skip], then optionally a 2x nearest-neighbour upsample and a conv."""

    def __init__(self, in_ch, out_ch, temb_dim, upsample):
        super().__init__()
        self.res = ResBlock(in_ch, out_ch, temb_dim)
        self.up_conv = nn.Conv2d(out_ch, out_ch, 3, padding=1) if upsample else None

    def forward(self, x, temb):
        h = self.res(x, temb)
        if self.up_conv is not None:
            h = self.up_conv(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        return h


class UNet(nn.Module):
    def __init__(self, in_ch=4, channels=(16, 32, 64)):
        super().__init__()
        c0, c1, c2 = channels
        temb = 4 * c0
        self.time_embedding = TimestepEmbedding(c0, temb)
        self.conv_in = nn.Conv2d(in_ch, c0, 3, padding=1)
        self.down_blocks = nn.ModuleList([
            ResBlock(c0, c0, temb), Downsample(c0),
            ResBlock(c0, c1, temb), Downsample(c1),
            ResBlock(c1, c2, temb)])
        self.mid_block = ResBlock(c2, c2, temb)
        # (channels in, skip channels, out, upsample): pops the pushed outputs in reverse.
        spec = [(c2, c2, c2, False), (c2, c1, c2, True), (c2, c1, c1, False),
                (c1, c0, c1, True), (c1, c0, c0, False), (c0, c0, c0, False)]
        self.up_blocks = nn.ModuleList([UpBlock(i + s, o, temb, up) for i, s, o, up in spec])
        self.norm_out = nn.GroupNorm(8, c0)
        self.conv_out = nn.Conv2d(c0, in_ch, 3, padding=1)

    def forward(self, x, t):
        temb = self.time_embedding(t)
        h = self.conv_in(x)
        pushed = [h]
        for block in self.down_blocks:
            h = block(h, temb)
            pushed.append(h)
        h = self.mid_block(h, temb)
        for block in self.up_blocks:
            h = block(torch.cat([h, pushed.pop()], dim=1), temb)
        return self.conv_out(F.silu(self.norm_out(h)))


def build(seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return UNet().to(dtype)


def make_batch(n, seed, dtype=None, device="cpu", size=8):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((n, 4, size, size), generator=gen, dtype=torch.float64)
    target = torch.randn((n, 4, size, size), generator=gen, dtype=torch.float64)
    t = torch.randint(0, 1000, (n,), generator=gen)
    dtype = dtype or torch.float32
    return {"x": x.to(dtype).to(device), "t": t.to(device), "target": target.to(dtype).to(device)}


def loss_sum(out, batch):
    return ((out - batch["target"]) ** 2).flatten(1).mean(dim=1).sum()
