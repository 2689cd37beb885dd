"""A small latent diffusion step with frozen encoders, in the block-list protocol.

Images go through a small VAE-like encoder (a few convolutions, 3 x H x W -> 4 x H/2 x W/2
latents) and token ids through a small text encoder (an embedding with positions, one
pre-LayerNorm self-attention layer and an MLP -> one vector per token). Both are frozen: their
weights never get a gradient or optimizer state, and they run forward only. The denoiser is
examples/small_unet.py's UNet (loaded by path), whose first block also projects the mean of
the text embeddings into the timestep embedding, so the text conditions every later block.
The denoiser's input is the latents noised at timestep t (cosine schedule), its target the
noise (epsilon prediction).

Beside the block-list protocol (examples/small_unet.py documents it), the model lists its
frozen components in `model.frozen`: `{name, kind, module, input, output}`: the batch field
the module reads and the field its output is put under. pulse-run runs them where the plan's
`frozen` section places them (docs/torch.md, "Frozen encoders"). `make_batch` returns the raw
fields (`image`, `tokens`, `noise`, `t`); `first_input` and the first block read the encoded
ones (`latents`, `text`) and fail without them, so an encode left out is an error, not a
silent re-encode. `forward(batch)` (the one-process reference) encodes what the batch lacks.

`make_batch(n, seed, height=, width=)` draws images of any size divisible by 8 (the UNet
halves the latents twice): the resolution buckets of a `plan --buckets` plan.
`cached_data` is a `--data` hook for plans made with `--frozen cached`: it encodes every
sample once, up front, and yields batches that carry `latents` and `text`.
"""

import importlib.util
import math
import os

import torch
from torch import nn
import torch.nn.functional as F


def _load_small_unet():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "small_unet.py")
    spec = importlib.util.spec_from_file_location("small_frozen_small_unet", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


unet = _load_small_unet()

IMAGE_CHANNELS = 3
LATENT_CHANNELS = 4
VOCAB = 64
TOKENS = 6


class VaeEncoder(nn.Module):
    """conv 3x3 - SiLU - stride-2 conv - SiLU - conv 3x3 - 1x1 to the latent mean (the
    shape of an AutoencoderKL encoder's path, scaled down to one downsampling)."""

    def __init__(self, width=16):
        super().__init__()
        self.conv_in = nn.Conv2d(IMAGE_CHANNELS, width, 3, padding=1)
        self.down = nn.Conv2d(width, width, 3, stride=2, padding=1)
        self.conv = nn.Conv2d(width, width, 3, padding=1)
        self.to_latent = nn.Conv2d(width, LATENT_CHANNELS, 1)

    def forward(self, image):
        h = F.silu(self.conv_in(image))
        h = F.silu(self.down(h))
        h = F.silu(self.conv(h))
        return self.to_latent(h)


class TextEncoder(nn.Module):
    """Token and position embeddings, one pre-LN single-head self-attention layer and an MLP,
    a final LayerNorm: token ids (n, T) -> embeddings (n, T, dim)."""

    def __init__(self, dim=32):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, dim)
        self.positions = nn.Parameter(torch.randn(TOKENS, dim) * 0.02)
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.norm_out = nn.LayerNorm(dim)

    def forward(self, tokens):
        x = self.tokens(tokens) + self.positions[: tokens.shape[1]]
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), dim=-1)
        x = x + self.proj(weights @ v)
        x = x + self.mlp(self.norm2(x))
        return self.norm_out(x)


class TextEmbed(unet.Embed):
    """The UNet's conv_in and timestep MLP, plus the mean text embedding projected into the
    timestep embedding (the carried tensor every later block reads)."""

    def __init__(self, in_ch, ch, temb_dim, text_dim):
        super().__init__(in_ch, ch, temb_dim)
        self.text_proj = nn.Linear(text_dim, temb_dim)

    def forward(self, h, env):
        h, produced = super().forward(h, env)
        produced["temb"] = produced["temb"] + self.text_proj(env["text"].mean(dim=1))
        return h, produced


def alpha_bar(t):
    """Cosine schedule (Nichol and Dhariwal, arXiv 2102.09672) at integer steps of 1000."""
    s = 0.008
    return torch.cos((t.to(torch.float64) / 1000 + s) / (1 + s) * math.pi / 2) ** 2


class SmallFrozen(unet.SmallUNet):
    """SmallUNet on 4-channel latents, its first block conditioned on the text, with a VAE
    encoder and a text encoder in front (model.frozen)."""

    def __init__(self, size=16, channels=(16, 32, 64), text_dim=32):
        super().__init__(in_ch=LATENT_CHANNELS, size=size // 2, channels=channels)
        c0 = channels[0]
        self.blocks[0] = TextEmbed(LATENT_CHANNELS, c0, 4 * c0, text_dim)
        self.image_size = size
        self.vae = VaeEncoder()
        self.text_encoder = TextEncoder(text_dim)
        for module in (self.vae, self.text_encoder):
            module.requires_grad_(False)
        self.frozen = [
            {"name": "vae", "kind": "vae_encoder", "module": self.vae, "input": "image",
             "output": "latents"},
            {"name": "text", "kind": "text_encoder", "module": self.text_encoder,
             "input": "tokens", "output": "text"},
        ]

    def make_batch(self, n, seed, dtype=None, device="cpu", height=None, width=None):
        """Raw samples: images (height x width, default the model's size), token ids, the
        noise the denoiser must predict and timesteps."""
        dtype = dtype or next(self.parameters()).dtype
        height, width = height or self.image_size, width or self.image_size
        gen = torch.Generator().manual_seed(seed)
        image = torch.randn((n, IMAGE_CHANNELS, height, width), generator=gen,
                            dtype=torch.float64).to(dtype)
        tokens = torch.randint(0, VOCAB, (n, TOKENS), generator=gen)
        noise = torch.randn((n, LATENT_CHANNELS, height // 2, width // 2), generator=gen,
                            dtype=torch.float64).to(dtype)
        t = torch.randint(0, 1000, (n,), generator=gen)
        return {k: v.to(device) for k, v in
                {"image": image, "tokens": tokens, "noise": noise, "t": t}.items()}

    def first_input(self, batch):
        """The latents noised at t; KeyError when the batch was not encoded."""
        a = alpha_bar(batch["t"]).to(batch["latents"].dtype)[:, None, None, None]
        return a.sqrt() * batch["latents"] + (1 - a).sqrt() * batch["noise"]

    def loss_sum(self, out, batch):
        return ((out - batch["noise"]) ** 2).flatten(1).mean(dim=1).sum()

    def encode(self, batch):
        """The batch with every frozen output it lacks added (forward only, no gradient)."""
        batch = dict(batch)
        with torch.no_grad():
            for c in self.frozen:
                if c["output"] not in batch:
                    batch[c["output"]] = c["module"](batch[c["input"]])
        return batch

    def forward(self, batch):
        return super().forward(self.encode(batch))


def build(seed=0, dtype=torch.float32):
    """16 x 16 images (8 x 8 latents), UNet channels 16/32/64."""
    torch.manual_seed(seed)
    return SmallFrozen().to(dtype)


def build_test(seed=0, dtype=torch.float64):
    """The model the runtime's tests train in float64 (the same as build's, in float64)."""
    return build(seed, dtype)


def cached_data(global_batch, seed, device, model, iterations=2):
    """A `--data` hook for `--frozen cached` plans: every sample the run will see is encoded
    once, before the first batch is yielded (an offline cache in miniature); each batch then
    carries `latents` and `text` beside the raw fields. The samples are make_batch's, as the
    runtime would draw them (seed + 1 + i)."""
    batches = [model.make_batch(global_batch, seed=seed + 1 + i, device=device)
               for i in range(iterations)]
    encoded = [model.encode(b) for b in batches]
    yield from encoded
