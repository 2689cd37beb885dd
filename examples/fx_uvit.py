"""A U-ViT-style diffusion transformer (Bao et al., "All are Worth Words"): patch tokens plus a
time token, transformer blocks whose outputs the first half pushes on a list and the second
half pops as long skips (a linear layer on [x, skip]), then a linear head and unpatchify.
Written as an ordinary nn.Module; the torch.fx front end splits it (docs/torch.md):

    pulse-profile --model examples/fx_uvit.py:build --sizes 1,2 -o /tmp/fx-uvit.json
"""

import math

import torch
from torch import nn
import torch.nn.functional as F


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64,
                                                    device=t.device) / half)
    args = t.to(torch.float64)[:, None] * freqs[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


class TimeEmbed(nn.Module):
    """Timesteps -> time token. The sinusoidal features are computed here, inside a layer
    module (not traced by torch.fx), on the timesteps' device."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, t):
        features = timestep_embedding(t, self.dim).to(self.fc1.weight.dtype)
        return self.fc2(F.silu(self.fc1(features)))


class PatchEmbed(nn.Module):
    def __init__(self, patch, in_ch, dim):
        super().__init__()
        self.proj = nn.Conv2d(in_ch, dim, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Block(nn.Module):
    """Pre-norm attention and MLP; with `skip`, first a linear layer on [x, skip]."""

    def __init__(self, dim, heads, skip=False):
        super().__init__()
        self.skip_linear = nn.Linear(2 * dim, dim) if skip else None
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.heads = heads

    def forward(self, x, skip=None):
        if self.skip_linear is not None:
            x = self.skip_linear(torch.cat([x, skip], dim=-1))
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class UViT(nn.Module):
    def __init__(self, size=8, patch=2, in_ch=4, dim=32, depth=7, heads=2):
        super().__init__()
        self.patch, self.in_ch, self.dim = patch, in_ch, dim
        self.time_embed = TimeEmbed(dim)
        self.patch_embed = PatchEmbed(patch, in_ch, dim)
        self.pos_embed = nn.Parameter(torch.randn(1, 1 + (size // patch) ** 2, dim) * 0.02)
        self.in_blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth // 2)])
        self.mid_block = Block(dim, heads)
        self.out_blocks = nn.ModuleList([Block(dim, heads, skip=True)
                                         for _ in range(depth // 2)])
        self.norm = nn.LayerNorm(dim)
        self.decoder_pred = nn.Linear(dim, patch * patch * in_ch)

    def forward(self, x, t):
        # Indexed, not unpacked: torch.fx cannot iterate the traced shape (docs/torch.md).
        b, height, width = x.shape[0], x.shape[2], x.shape[3]
        time_token = self.time_embed(t).unsqueeze(1)
        x = self.patch_embed(x)
        x = torch.cat([time_token, x], dim=1) + self.pos_embed
        skips = []
        for block in self.in_blocks:
            x = block(x)
            skips.append(x)
        x = self.mid_block(x)
        for block in self.out_blocks:
            x = block(x, skips.pop())
        x = self.decoder_pred(self.norm(x))[:, 1:, :]
        p, c = self.patch, self.in_ch
        x = x.reshape(b, height // p, width // p, p, p, c)
        return x.permute(0, 5, 1, 3, 2, 4).reshape(b, c, height, width)


def build(seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return UViT().to(dtype)


def make_batch(n, seed, dtype=None, device="cpu", size=8):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((n, 4, size, size), generator=gen, dtype=torch.float64)
    target = torch.randn((n, 4, size, size), generator=gen, dtype=torch.float64)
    t = torch.randint(0, 1000, (n,), generator=gen)
    dtype = dtype or torch.float32
    return {"x": x.to(dtype).to(device), "t": t.to(device), "target": target.to(dtype).to(device)}


def loss_sum(out, batch):
    return ((out - batch["target"]) ** 2).flatten(1).mean(dim=1).sum()
