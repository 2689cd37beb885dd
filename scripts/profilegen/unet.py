"""Stable Diffusion UNets (diffusers UNet2DConditionModel) at block granularity.

Layers follow the forward pass of diffusers' unet_2d_condition.py: time embedding,
conv_in, each down block's resnets / transformers / downsampler, the mid block, each up
block's resnets / transformers / upsampler, then conv_norm_out + conv_out (one layer,
called conv_out). Skip mechanics (models_hw.md section 1): conv_in's output and every
down resnet(+transformer) and downsampler output is pushed; every up resnet pops the
latest and concatenates it on the channel axis.
"""

from .layers import (EMBEDDING, Acc, Architecture, Carried, Layer, Skip, fp16_bytes)

# HF stabilityai/stable-diffusion-2-1 and -2-1-base unet/config.json (models_hw.md 1).
# sample_size is 64 for the 512 px "base" model and 96 for the 768 px model.
SD2_UNET = {
    "block_out_channels": (320, 640, 1280, 1280),
    "layers_per_block": 2,
    "down_block_types": ("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
    "up_block_types": ("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
    "transformer_layers_per_block": (1, 1, 1, 1),
    "cross_attention_dim": 1024,  # OpenCLIP-H text states
    "text_tokens": 77,
    "in_channels": 4,
    "out_channels": 4,
    "addition_embed_input_dim": None,
}

# HF stabilityai/stable-diffusion-xl-base-1.0 unet/config.json (models_hw.md 2):
# addition_embed_type text_time, projection_class_embeddings_input_dim 2816
# (1280 pooled text + 6 x 256 size/crop ids), sample_size 128 (1024 px).
SDXL_UNET = {
    "block_out_channels": (320, 640, 1280),
    "layers_per_block": 2,
    "down_block_types": ("DownBlock2D",) + ("CrossAttnDownBlock2D",) * 2,
    "up_block_types": ("CrossAttnUpBlock2D",) * 2 + ("UpBlock2D",),
    "transformer_layers_per_block": (1, 2, 10),
    "cross_attention_dim": 2048,  # CLIP-L 768 + OpenCLIP-bigG 1280, concatenated
    "text_tokens": 77,
    "in_channels": 4,
    "out_channels": 4,
    "addition_embed_input_dim": 2816,
}


# Pointwise kernels of eager forwards (diffusers blocks in bf16), counted op by op.
SINUSOID_KERNELS = 8       # get_timestep_embedding: arange, exp, scale, mul, sin, cos, 2 cat
RESNET_POINTWISE = 6       # ResnetBlock2D: 3 SiLU, temb add, residual add, output scale
BASIC_BLOCK_POINTWISE = 7  # BasicTransformerBlock: 2 rescale divs, 3 adds, GELU, gate mul


def _temb_dim(cfg) -> int:
    # diffusers: time_embed_dim = block_out_channels[0] * 4
    return cfg["block_out_channels"][0] * 4


def time_embedding(cfg, side: int) -> Layer:
    """TimestepEmbedding (plus SDXL's add_embedding): MLPs on one vector per sample."""
    acc = Acc("time_embedding", "embedding")
    c0, temb = cfg["block_out_channels"][0], _temb_dim(cfg)
    inputs = [c0]
    if cfg["addition_embed_input_dim"]:
        inputs.append(cfg["addition_embed_input_dim"])
    for d_in in inputs:
        acc.linear(d_in, temb, 1, cls=EMBEDDING)
        acc.linear(temb, temb, 1, cls=EMBEDDING)
        acc.save(d_in + 2 * temb)  # linear_1 input, SiLU input, linear_2 input
        # get_timestep_embedding, the cast to the model dtype, the SiLU between the two
        # linears, the timestep expand.
        acc.pointwise(SINUSOID_KERNELS + 3, "sinusoid, cast, SiLU, expand")
    # The noisy latent passes by this layer: it is what a stage cut here would send.
    return acc.done(fp16_bytes(cfg["in_channels"], side, side))


def resnet(name: str, c_in: int, c_out: int, side: int, temb: int) -> Layer:
    """ResnetBlock2D: GN, SiLU, conv3x3, +time_emb_proj, GN, SiLU, conv3x3, shortcut."""
    acc = Acc(name, "resnet")
    hw = side * side
    acc.group_norm(c_in)
    acc.conv(c_in, c_out, 3, hw)
    acc.linear(temb, c_out, 1, cls=EMBEDDING)
    acc.group_norm(c_out)
    acc.conv(c_out, c_out, 3, hw)
    if c_in != c_out:
        acc.conv(c_in, c_out, 1, hw)  # conv_shortcut
    acc.pointwise(RESNET_POINTWISE, "3 SiLU, temb add, residual add, output scale")
    acc.save(3 * (c_in + c_out) * hw)  # models_hw.md 0: ResnetBlock ~ 3*(Cin+Cout)*HW
    return acc.done(fp16_bytes(c_out, side, side))


def transformer2d(name: str, c: int, side: int, depth: int, cfg) -> Layer:
    """Transformer2DModel with use_linear_projection: GN, proj_in, depth x
    BasicTransformerBlock (self-attn, cross-attn, GEGLU FFN), proj_out."""
    acc = Acc(name, "transformer")
    tokens, ctx_dim, ctx_len = side * side, cfg["cross_attention_dim"], cfg["text_tokens"]
    acc.group_norm(c)
    acc.pointwise(1, "NCHW -> (B, HW, C) copy")
    acc.linear(c, c, tokens)  # proj_in
    for _ in range(depth):
        for _ in range(3):  # norm1, norm2, norm3
            acc.norm(c)
        for _ in range(3):  # attn1 to_q, to_k, to_v (attention_bias false)
            acc.linear(c, c, tokens, bias=False)
        acc.linear(c, c, tokens)  # attn1 to_out
        acc.attention(tokens, tokens, c)
        acc.linear(c, c, tokens, bias=False)  # attn2 to_q
        for _ in range(2):  # attn2 to_k, to_v on the text states
            acc.linear(ctx_dim, c, ctx_len, bias=False)
        acc.linear(c, c, tokens)  # attn2 to_out
        acc.attention(tokens, ctx_len, c)
        acc.linear(c, 8 * c, tokens)  # GEGLU proj (value and gate, 4c each)
        acc.linear(4 * c, c, tokens)  # ff out
        acc.pointwise(BASIC_BLOCK_POINTWISE, "2 rescale divs, 3 residual adds, GELU, gate")
        # models_hw.md 0: BasicTransformerBlock ~ 28*C*L + 2*C*77 (k, v of the context)
        acc.save(28 * c * tokens + 2 * c * ctx_len)
    acc.linear(c, c, tokens)  # proj_out
    acc.pointwise(2, "(B, HW, C) -> NCHW copy, residual add")
    acc.save(3 * c * tokens)  # GroupNorm, proj_in and proj_out inputs
    return acc.done(fp16_bytes(c, side, side))


def downsample(name: str, c: int, side_in: int) -> Layer:
    """Downsample2D: conv3x3 stride 2."""
    acc = Acc(name, "downsample")
    side = side_in // 2
    acc.conv(c, c, 3, side * side)
    acc.save(c * side_in * side_in)
    return acc.done(fp16_bytes(c, side, side))


def upsample(name: str, c: int, side_in: int) -> Layer:
    """Upsample2D: nearest x2, then conv3x3 at the output resolution."""
    acc = Acc(name, "upsample")
    side = 2 * side_in
    # diffusers Upsample2D casts bf16 to fp32 for the nearest interpolation and back.
    acc.pointwise(3, "cast, interpolate, cast")
    acc.conv(c, c, 3, side * side)
    acc.save(c * side_in * side_in + c * side * side)  # input and interpolated map
    return acc.done(fp16_bytes(c, side, side))


def conv_in(cfg, side: int) -> Layer:
    acc = Acc("conv_in", "conv")
    c_in, c0 = cfg["in_channels"], cfg["block_out_channels"][0]
    acc.conv(c_in, c0, 3, side * side)
    acc.save(c_in * side * side)
    return acc.done(fp16_bytes(c0, side, side))


def conv_out(cfg, side: int) -> Layer:
    """conv_norm_out (GroupNorm) + SiLU + conv_out, one layer."""
    acc = Acc("conv_out", "head")
    c0, c_out = cfg["block_out_channels"][0], cfg["out_channels"]
    acc.group_norm(c0)
    acc.pointwise(1, "SiLU")
    acc.conv(c0, c_out, 3, side * side)
    acc.save(3 * c0 * side * side)  # GN input, SiLU input, conv input
    return acc.done(fp16_bytes(c_out, side, side))


class SDBlocks:
    """The UNet2DConditionModel blocks for the builder; a grid is (height, width) of the
    latent at that level, square here."""

    @staticmethod
    def _side(grid) -> int:
        assert grid[0] == grid[1], grid
        return grid[0]

    def time_embedding(self, cfg, grid) -> Layer:
        return time_embedding(cfg, self._side(grid))

    def conv_in(self, cfg, grid) -> Layer:
        return conv_in(cfg, self._side(grid))

    def conv_out(self, cfg, grid) -> Layer:
        return conv_out(cfg, self._side(grid))

    def resnet(self, name, c_in, c_out, grid, temb) -> Layer:
        return resnet(name, c_in, c_out, self._side(grid), temb)

    def transformer(self, name, c, grid, depth, cfg) -> Layer:
        return transformer2d(name, c, self._side(grid), depth, cfg)

    def downsample(self, name, c, grid) -> Layer:
        return downsample(name, c, self._side(grid))

    def upsample(self, name, c, grid) -> Layer:
        return upsample(name, c, self._side(grid))

    def skip_bytes(self, c, grid) -> int:
        return fp16_bytes(c, *grid)

    def carried(self, cfg, temb) -> list:
        return [
            # temb feeds every resnet's time_emb_proj; it is learned, so its gradient returns.
            Carried("temb", "time_embedding", fp16_bytes(temb), True),
            # Frozen text-encoder states come with the batch and feed every cross-attention.
            Carried("text_context", None,
                    fp16_bytes(cfg["text_tokens"], cfg["cross_attention_dim"]), False),
        ]


class UNetBuilder:
    """Walks the blocks in forward order, keeping diffusers' skip stack (the same for the
    2D UNet and the spatio-temporal one, whose blocks differ)."""

    def __init__(self, cfg, grid, blocks):
        self.cfg = cfg
        self.grid = tuple(grid)
        self.blocks = blocks
        self.temb = _temb_dim(cfg)
        self.layers = []
        self.skips = []
        self.stack = []  # (producer layer, channels, grid), pushed in forward order

    def add(self, layer: Layer, push: bool = False, channels: int = 0) -> None:
        self.layers.append(layer)
        if push:
            self.stack.append((layer.name, channels, self.grid))

    def down_block(self, i: int) -> None:
        cfg, boc, b = self.cfg, self.cfg["block_out_channels"], self.blocks
        c_in, c_out = boc[max(i - 1, 0)], boc[i]
        has_attn = cfg["down_block_types"][i].startswith("CrossAttn")
        depth = cfg["transformer_layers_per_block"][i]
        for j in range(cfg["layers_per_block"]):
            res = b.resnet(f"down{i}.resnet{j}", c_in if j == 0 else c_out, c_out, self.grid,
                           self.temb)
            self.add(res, push=not has_attn, channels=c_out)
            if has_attn:
                attn = b.transformer(f"down{i}.attn{j}", c_out, self.grid, depth, cfg)
                self.add(attn, push=True, channels=c_out)
        if i < len(boc) - 1:
            layer = b.downsample(f"down{i}.downsample", c_out, self.grid)
            self.grid = (self.grid[0] // 2, self.grid[1] // 2)
            self.add(layer, push=True, channels=c_out)

    def mid_block(self) -> None:
        c, b = self.cfg["block_out_channels"][-1], self.blocks
        depth = self.cfg["transformer_layers_per_block"][-1]
        self.add(b.resnet("mid.resnet0", c, c, self.grid, self.temb))
        self.add(b.transformer("mid.attn0", c, self.grid, depth, self.cfg))
        self.add(b.resnet("mid.resnet1", c, c, self.grid, self.temb))

    def up_block(self, i: int) -> None:
        cfg, b = self.cfg, self.blocks
        rev = tuple(reversed(cfg["block_out_channels"]))
        c_out, c_prev = rev[i], rev[max(i - 1, 0)]
        c_in = rev[min(i + 1, len(rev) - 1)]
        has_attn = cfg["up_block_types"][i].startswith("CrossAttn")
        depth = tuple(reversed(cfg["transformer_layers_per_block"]))[i]
        n = cfg["layers_per_block"] + 1
        for j in range(n):
            name = f"up{i}.resnet{j}"
            producer, skip_c, skip_grid = self.stack.pop()
            # diffusers: res_skip_channels = in_channels if last else out_channels
            assert skip_c == (c_in if j == n - 1 else c_out) and skip_grid == self.grid, name
            self.skips.append(Skip(producer, name, b.skip_bytes(skip_c, skip_grid)))
            main_c = c_prev if j == 0 else c_out
            res = b.resnet(name, main_c + skip_c, c_out, self.grid, self.temb)
            res.kernels += 1  # torch.cat([hidden, skip], dim=1) before the resnet
            self.add(res)
            if has_attn:
                self.add(b.transformer(f"up{i}.attn{j}", c_out, self.grid, depth, cfg))
        if i < len(rev) - 1:
            layer = b.upsample(f"up{i}.upsample", c_out, self.grid)
            self.grid = (2 * self.grid[0], 2 * self.grid[1])
            self.add(layer)

    def build(self) -> Architecture:
        cfg, grid0, b = self.cfg, self.grid, self.blocks
        self.add(b.time_embedding(cfg, grid0))
        self.add(b.conv_in(cfg, grid0), push=True, channels=cfg["block_out_channels"][0])
        for i in range(len(cfg["block_out_channels"])):
            self.down_block(i)
        self.mid_block()
        for i in range(len(cfg["block_out_channels"])):
            self.up_block(i)
        assert not self.stack and self.grid == grid0
        self.add(b.conv_out(cfg, grid0))
        return Architecture(self.layers, self.skips, b.carried(cfg, self.temb))


def build_unet(cfg, sample_size: int) -> Architecture:
    """The UNet at latent side sample_size (image side / 8)."""
    return UNetBuilder(cfg, (sample_size, sample_size), SDBlocks()).build()
