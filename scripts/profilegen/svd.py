"""Stable Video Diffusion's spatio-temporal UNet (diffusers UNetSpatioTemporalConditionModel)
at block granularity.

The block sequence, channels and skip stack are the SD UNet's (unet.UNetBuilder); every
block also mixes over time. One sample is one clip of F frames; the spatial layers see the
F frames as a batch. Following diffusers' unet_spatio_temporal_condition.py,
unet_3d_blocks.py, resnet.py (SpatioTemporalResBlock, TemporalResnetBlock, AlphaBlender),
transformers/transformer_temporal.py (TransformerSpatioTemporalModel) and attention.py
(BasicTransformerBlock, TemporalBasicTransformerBlock):

- resnet: a ResnetBlock2D on every frame, then a TemporalResnetBlock (two (3,1,1) Conv3d
  over time, each frame's temb projected), blended with a learned factor (1 parameter).
- attn: GroupNorm + proj_in, a BasicTransformerBlock over each frame's tokens
  (cross-attending to the one CLIP image token), a TemporalBasicTransformerBlock over each
  position's F frames (GEGLU ff_in, self-attention over frames, cross-attention to the
  first frame's image token, GEGLU ff), a frame-position embedding MLP, a learned blend
  and proj_out.
- time_embedding: TimestepEmbedding(320 -> 1280) and add_embedding (768 -> 1280) on the
  three added time ids (fps, motion bucket, noise augmentation; 3 x 256 sinusoids), once
  per clip; diffusers repeats the result for every frame.
"""

from .layers import (CONV, EMBEDDING, KERNELS, SMALL_SPATIAL, SMALL_SPATIAL_MAX_POSITIONS,
                     Acc, Architecture, Carried, Layer, fp16_bytes)
from .unet import RESNET_POINTWISE, SINUSOID_KERNELS, UNetBuilder

# HF stabilityai/stable-video-diffusion-img2vid-xt unet/config.json (equal to the
# defaults of diffusers' UNetSpatioTemporalConditionModel): 25 frames; sample_size 96 is
# the model's nominal size, the card's resolution is 576 x 1024 (latent 72 x 128).
SVD_XT_UNET = {
    "block_out_channels": (320, 640, 1280, 1280),
    "layers_per_block": 2,
    "down_block_types": ("CrossAttnDownBlockSpatioTemporal",) * 3
                        + ("DownBlockSpatioTemporal",),
    "up_block_types": ("UpBlockSpatioTemporal",) + ("CrossAttnUpBlockSpatioTemporal",) * 3,
    "transformer_layers_per_block": (1, 1, 1, 1),
    "num_attention_heads": (5, 10, 20, 20),
    "cross_attention_dim": 1024,      # one CLIP ViT-H image embedding
    "context_tokens": 1,
    "in_channels": 8,                 # noisy latent + the conditioning frame's latent
    "out_channels": 4,
    "addition_time_embed_dim": 256,
    "projection_class_embeddings_input_dim": 768,  # 3 added time ids x 256
    "num_frames": 25,
}


def _conv_class(positions_per_frame: int) -> str:
    # The same rule as the 2D UNet: by the spatial map, frames being a batch.
    return SMALL_SPATIAL if positions_per_frame <= SMALL_SPATIAL_MAX_POSITIONS else CONV


def _geglu_ff(acc: Acc, c_in: int, c_out: int, tokens: int) -> None:
    """diffusers FeedForward with GEGLU: proj to 2 x 4c (value and gate), out 4c -> c_out."""
    acc.linear(c_in, 8 * c_in, tokens)
    acc.linear(4 * c_in, c_out, tokens)
    acc.pointwise(2, "GEGLU's GELU and gate")


def _attention(acc: Acc, c: int, tokens: int, ctx_dim: int, ctx_rows: int,
               core_q: int, core_k: int, core_groups: int) -> None:
    """Attention with q from `tokens` rows, k and v from `ctx_rows` rows of width ctx_dim
    (bias-free projections), out with bias, and a core of core_groups x (core_q x core_k)."""
    acc.linear(c, c, tokens, bias=False)
    acc.linear(ctx_dim, c, ctx_rows, bias=False)
    acc.linear(ctx_dim, c, ctx_rows, bias=False)
    acc.linear(c, c, tokens)
    acc.attention(core_q, core_k, c, groups=core_groups)
    acc.pointwise(2, "rescale div, residual add")


class SVDBlocks:
    """The spatio-temporal blocks for unet.UNetBuilder; a grid is (height, width)."""

    def __init__(self, frames: int):
        self.frames = frames

    def time_embedding(self, cfg, grid) -> Layer:
        acc = Acc("time_embedding", "embedding")
        c0, temb = cfg["block_out_channels"][0], 4 * cfg["block_out_channels"][0]
        for d_in in (c0, cfg["projection_class_embeddings_input_dim"]):
            acc.linear(d_in, temb, 1, cls=EMBEDDING)
            acc.linear(temb, temb, 1, cls=EMBEDDING)
            acc.save(d_in + 2 * temb)
            acc.pointwise(SINUSOID_KERNELS + 2, "sinusoids, cast, SiLU")
        acc.pointwise(2, "sum of the two embeddings, repeat per frame")
        # The clip's latents (noisy and conditioning frame) pass by this layer.
        return acc.done(fp16_bytes(cfg["in_channels"], *grid, self.frames))

    def conv_in(self, cfg, grid) -> Layer:
        acc = Acc("conv_in", "conv")
        hw, f = grid[0] * grid[1], self.frames
        acc.conv(cfg["in_channels"], cfg["block_out_channels"][0], 3, hw * f,
                 cls=_conv_class(hw))
        acc.save(cfg["in_channels"] * hw * f)
        return acc.done(fp16_bytes(cfg["block_out_channels"][0], hw, f))

    def conv_out(self, cfg, grid) -> Layer:
        acc = Acc("conv_out", "head")
        c0, hw, f = cfg["block_out_channels"][0], grid[0] * grid[1], self.frames
        acc.group_norm(c0)
        acc.pointwise(1, "SiLU")
        acc.conv(c0, cfg["out_channels"], 3, hw * f, cls=_conv_class(hw))
        acc.save(3 * c0 * hw * f)
        return acc.done(fp16_bytes(cfg["out_channels"], hw, f))

    def resnet(self, name, c_in, c_out, grid, temb) -> Layer:
        """SpatioTemporalResBlock: ResnetBlock2D per frame, TemporalResnetBlock, blend."""
        acc = Acc(name, "resnet")
        hw, f = grid[0] * grid[1], self.frames
        cls = _conv_class(hw)
        # spatial: GN, SiLU, conv3x3, +time_emb_proj (per frame), GN, SiLU, conv3x3, shortcut
        acc.group_norm(c_in)
        acc.conv(c_in, c_out, 3, hw * f, cls=cls)
        acc.linear(temb, c_out, f, cls=EMBEDDING)
        acc.group_norm(c_out)
        acc.conv(c_out, c_out, 3, hw * f, cls=cls)
        if c_in != c_out:
            acc.conv(c_in, c_out, 1, hw * f, cls=cls)
        acc.pointwise(RESNET_POINTWISE, "3 SiLU, temb add, residual add, output scale")
        # temporal: GN, Conv3d (3,1,1), +time_emb_proj, GN, Conv3d (3,1,1); a (3,1,1)
        # kernel is three taps over frames, a third of a 3x3's work per position.
        for _ in range(2):
            acc.group_norm(c_out)
        acc.layer.params += 2 * (3 * c_out * c_out + c_out)
        acc.flop(cls, 2 * 2 * 3 * c_out * c_out * hw * f)
        acc.pointwise(2 * (KERNELS["conv"] + KERNELS["conv_bias"]), "the two Conv3d")
        acc.linear(temb, c_out, f, cls=EMBEDDING)
        acc.param(1)  # AlphaBlender mix_factor
        # Temporal: 3 SiLU, temb add, residual add; two (B F) <-> (B C F) layout copies;
        # the blend: sigmoid, 1 - alpha, two products and their sum.
        acc.pointwise(5 + 2 + 5, "temporal pointwise, layout copies, blend")
        # models_hw.md 0: a ResnetBlock keeps ~3*(Cin+Cout)*HW; the temporal one
        # 3*(2*Cout)*HW; the blend keeps both of its inputs.
        acc.save((3 * (c_in + c_out) + 6 * c_out + 2 * c_out) * hw * f)
        return acc.done(fp16_bytes(c_out, hw, f))

    def transformer(self, name, c, grid, depth, cfg) -> Layer:
        """TransformerSpatioTemporalModel with `depth` spatial and temporal block pairs."""
        acc = Acc(name, "transformer")
        hw, f = grid[0] * grid[1], self.frames
        tokens, ctx_dim, ctx = hw * f, cfg["cross_attention_dim"], cfg["context_tokens"]
        acc.group_norm(c)
        acc.pointwise(1, "NCHW -> (B, HW, C) copy")
        acc.linear(c, c, tokens)                          # proj_in
        for _ in range(depth):
            # BasicTransformerBlock on each frame: norm1-3, self-attention over the frame's
            # hw tokens, cross-attention to its image token, GEGLU ff.
            for _ in range(3):
                acc.norm(c)
            _attention(acc, c, tokens, c, tokens, hw, hw, f)
            _attention(acc, c, tokens, ctx_dim, ctx * f, hw, ctx, f)
            _geglu_ff(acc, c, c, tokens)
            acc.pointwise(1, "ff residual add")
            # TemporalBasicTransformerBlock on each position: norm_in + GEGLU ff_in,
            # norm1-3, self-attention over the F frames, cross-attention to the first
            # frame's image token (broadcast: k and v computed for every position), ff.
            for _ in range(4):
                acc.norm(c)
            _geglu_ff(acc, c, c, tokens)
            _attention(acc, c, tokens, c, tokens, f, f, hw)
            _attention(acc, c, tokens, ctx_dim, ctx * hw, f, ctx, hw)
            _geglu_ff(acc, c, c, tokens)
            acc.pointwise(4, "ff_in and ff residual adds, frames <-> positions copies")
            # models_hw.md 0: BasicTransformerBlock ~ 28*C*L + 2*C*ctx; the temporal block
            # adds ff_in (14*C per token: norm, proj, GEGLU halves, out) and its ctx k, v.
            acc.save(28 * c * tokens + 2 * c * ctx * f + 42 * c * tokens + 2 * c * ctx * hw)
        # time_pos_embed: TimestepEmbedding(C -> 4C -> C) on the F frame indices.
        acc.linear(c, 4 * c, f, cls=EMBEDDING)
        acc.linear(4 * c, c, f, cls=EMBEDDING)
        acc.pointwise(SINUSOID_KERNELS + 3, "frame sinusoids, cast, SiLU, add to tokens")
        acc.param(1)                                      # AlphaBlender mix_factor
        acc.linear(c, c, tokens)                          # proj_out
        acc.pointwise(5 + 2, "blend; (B, HW, C) -> NCHW copy, residual add")
        acc.save((3 + 2) * c * tokens)  # GroupNorm, proj_in, proj_out inputs; blend inputs
        return acc.done(fp16_bytes(c, hw, f))

    def downsample(self, name, c, grid) -> Layer:
        acc = Acc(name, "downsample")
        hw_in, f = grid[0] * grid[1], self.frames
        hw = (grid[0] // 2) * (grid[1] // 2)
        acc.conv(c, c, 3, hw * f, cls=_conv_class(hw))
        acc.save(c * hw_in * f)
        return acc.done(fp16_bytes(c, hw, f))

    def upsample(self, name, c, grid) -> Layer:
        acc = Acc(name, "upsample")
        hw_in, f = grid[0] * grid[1], self.frames
        hw = 4 * hw_in
        acc.pointwise(3, "cast, interpolate, cast")
        acc.conv(c, c, 3, hw * f, cls=_conv_class(hw))
        acc.save((c * hw_in + c * hw) * f)
        return acc.done(fp16_bytes(c, hw, f))

    def skip_bytes(self, c, grid) -> int:
        return fp16_bytes(c, *grid, self.frames)

    def carried(self, cfg, temb) -> list:
        return [
            # One embedding per clip (diffusers repeats it per frame inside every block).
            Carried("temb", "time_embedding", fp16_bytes(temb), True),
            # The frozen CLIP image encoder's embedding of the conditioning frame, with the
            # batch; every cross-attention reads it (the temporal ones the first frame's).
            Carried("image_context", None,
                    fp16_bytes(cfg["context_tokens"], cfg["cross_attention_dim"]), False),
        ]


def build_svd(cfg, height: int, width: int) -> Architecture:
    """The spatio-temporal UNet for clips of cfg["num_frames"] latents of height x width."""
    return UNetBuilder(cfg, (height, width), SVDBlocks(cfg["num_frames"])).build()
