"""Video diffusion transformers at block level: Wan 2.1 T2V 14B, HunyuanVideo 13B and
Open-Sora 2.0 11B, each at a training shape of its authors.

The sequence: a clip of F frames at H x W pixels is encoded by the (frozen) causal video VAE
with stride (4, 8, 8), so (F - 1) / 4 + 1 latent frames of H/8 x W/8; the transformer's patch
(1, 2, 2) gives (F - 1) / 4 + 1 times H/16 times W/16 video tokens. Attention's cost grows
with the square of that sequence: the core of self (or joint) attention over L tokens of
width C is 4 * L * L * C FLOPs per sample (QK^T and PV, layers.py), so at ~76k-119k tokens
it is most of a block's FLOPs.

Each block-level layer that works on the sequence states it in `sequence` (what pulse-plan's
sequence-parallel cost model reads, include/pulse/cost/sequence_parallel.hpp): the tokens
the layer's sequence has (what a sequence-parallel layout splits), the heads and head width
of its attention over them (0 heads: a token-wise layer, no attention), and the attention
core's forward FLOPs per sample.

Open-Sora 2.0 and HunyuanVideo use the Flux layout (flux.py: double-stream blocks, then
single-stream ones, joint attention over video and text tokens); Wan 2.1 is its own:
self-attention over the video tokens, cross-attention to the text, a GELU FFN.
"""

from typing import Dict

from .flux import _dim, build_mmdit
from .layers import EMBEDDING, Acc, Architecture, Carried, Layer, fp16_bytes
from .unet import SINUSOID_KERNELS

# Wan-Video/Wan2.1 wan/configs/wan_t2v_14B.py and shared_config.py (text_len 512, umT5-XXL
# states of 4096); wan/modules/model.py (WanModel, WanAttentionBlock, Head).
WAN21_T2V_14B = {
    "dim": 5120, "ffn_dim": 13824, "freq_dim": 256, "num_heads": 40, "num_layers": 40,
    "in_dim": 16, "out_dim": 16, "patch_size": (1, 2, 2), "text_len": 512, "text_dim": 4096,
    "vae_stride": (4, 8, 8),
}

# Tencent/HunyuanVideo hyvideo/modules/models.py, HUNYUAN_VIDEO_CONFIG["HYVideo-T/2-cfgdistill"]
# (20 double, 40 single blocks, hidden 3072, 24 heads, mlp ratio 4, guidance embedding),
# in/out 16 latent channels, patch (1, 2, 2); text_len 256 LLaVA-Llama states of 4096,
# CLIP-L pooled 768 (hyvideo/constants.py, config.py).
HUNYUAN_VIDEO_T2 = {
    "patch_size": 1, "in_channels": 64, "num_layers": 20, "num_single_layers": 40,
    "attention_head_dim": 128, "num_attention_heads": 24, "joint_attention_dim": 4096,
    "pooled_projection_dim": 768, "guidance_embeds": True, "text_tokens": 256,
    "timestep_proj_dim": 256, "mlp_ratio": 4,
}

# hpcaitech/Open-Sora configs/diffusion/train/image.py (model type "flux": in_channels 64,
# vec_in_dim 768, context_in_dim 4096, hidden 3072, mlp_ratio 4, 24 heads, depth 19,
# depth_single_blocks 38, guidance_embed False; t5 max_length 512).
OPEN_SORA_2 = {
    "patch_size": 1, "in_channels": 64, "num_layers": 19, "num_single_layers": 38,
    "attention_head_dim": 128, "num_attention_heads": 24, "joint_attention_dim": 4096,
    "pooled_projection_dim": 768, "guidance_embeds": False, "text_tokens": 512,
    "timestep_proj_dim": 256, "mlp_ratio": 4,
}


def latent_frames(frames: int, temporal_stride: int = 4) -> int:
    """The causal VAE keeps the first frame and compresses the rest by the stride."""
    assert (frames - 1) % temporal_stride == 0, frames
    return (frames - 1) // temporal_stride + 1


def video_tokens(frames: int, height: int, width: int) -> int:
    """Tokens of a clip: VAE stride (4, 8, 8), then patch (1, 2, 2)."""
    assert height % 16 == 0 and width % 16 == 0, (height, width)
    return latent_frames(frames) * (height // 16) * (width // 16)


def _sequence(tokens: int, heads: int, head_dim: int, attention_flops: int) -> Dict:
    return {"tokens": tokens, "heads": heads, "head_dim": head_dim,
            "attention_flops_per_sample": attention_flops}


def _self_attention_flops(tokens: int, width: int) -> int:
    return 4 * tokens * tokens * width


def annotate_mmdit(arch: Architecture, cfg, n_img: int) -> Architecture:
    """The sequence of each Flux-layout layer: the blocks attend over video + text tokens
    jointly (both streams split along the sequence); x_embedder and norm_out are token-wise
    over the video tokens; the embedders of one vector per sample and of the text are not
    split."""
    heads, head_dim = cfg["num_attention_heads"], cfg["attention_head_dim"]
    joint = n_img + cfg["text_tokens"]
    for layer in arch.layers:
        if layer.name.startswith(("double", "single")):
            layer.sequence = _sequence(joint, heads, head_dim,
                                       _self_attention_flops(joint, _dim(cfg)))
        elif layer.name in ("x_embedder", "norm_out"):
            layer.sequence = _sequence(n_img, 0, 0, 0)
    return arch


def build_video_mmdit(cfg, frames: int, height: int, width: int) -> Architecture:
    n_img = video_tokens(frames, height, width)
    return annotate_mmdit(build_mmdit(cfg, n_img), cfg, n_img)


# --- Wan 2.1 -----------------------------------------------------------------------------

def _latent_bytes(cfg, n_img: int) -> int:
    """The 16-channel latent of a clip: 4 latent values per token (patch 1 x 2 x 2)."""
    return fp16_bytes(n_img * 4, cfg["in_dim"])


def wan_time_embedding(cfg, n_img: int) -> Layer:
    """time_embedding (Linear freq->dim, SiLU, Linear) and time_projection (SiLU, Linear
    dim -> 6 dim): e and e0, one vector each per sample."""
    acc = Acc("time_embedding", "embedding")
    d, f = cfg["dim"], cfg["freq_dim"]
    acc.linear(f, d, 1, cls=EMBEDDING)
    acc.linear(d, d, 1, cls=EMBEDDING)
    acc.linear(d, 6 * d, 1, cls=EMBEDDING)
    acc.pointwise(SINUSOID_KERNELS + 1 + 2 + 1, "sinusoid, cast, two SiLUs, unflatten copy")
    acc.save(f + 3 * d)
    # The latent and the raw umT5 states pass by to the next layers.
    return acc.done(_latent_bytes(cfg, n_img) + fp16_bytes(cfg["text_len"], cfg["text_dim"]))


def wan_text_embedding(cfg, n_img: int) -> Layer:
    acc = Acc("text_embedding", "embedding")
    d, n_txt = cfg["dim"], cfg["text_len"]
    acc.linear(cfg["text_dim"], d, n_txt)
    acc.linear(d, d, n_txt)
    acc.pointwise(1, "GELU (tanh)")
    acc.save(n_txt * (cfg["text_dim"] + 2 * d))
    return acc.done(_latent_bytes(cfg, n_img))


def wan_patch_embedding(cfg, n_img: int) -> Layer:
    """Conv3d with kernel = stride = (1, 2, 2): one GEMM of 4 * in_dim -> dim per token."""
    acc = Acc("patch_embedding", "embedding")
    d, k = cfg["dim"], 4 * cfg["in_dim"]
    acc.linear(k, d, n_img, cls=EMBEDDING)
    acc.pointwise(2, "flatten and transpose copies")
    acc.save(n_img * k)
    return acc.done(fp16_bytes(n_img, d))


def wan_block(name: str, cfg, n_img: int) -> Layer:
    """WanAttentionBlock: modulation (6 x dim parameter + e0), self-attention (q, k, v, o
    with RMS qk-norm over dim, RoPE), cross-attention to the text (LayerNorm norm3 with
    affine, q from the video, k and v from the 512 text tokens, RMS qk-norm), GELU FFN."""
    acc = Acc(name, "transformer")
    d, ffn, n_txt = cfg["dim"], cfg["ffn_dim"], cfg["text_len"]
    acc.param(6 * d)  # modulation
    acc.norm(d, affine=False)  # norm1
    for _ in range(4):  # self_attn q, k, v, o
        acc.linear(d, d, n_img)
    acc.rms_norm(d)
    acc.rms_norm(d)
    acc.attention(n_img, n_img, d)
    acc.norm(d)  # norm3 (cross_attn_norm: affine)
    acc.linear(d, d, n_img)  # cross_attn q
    acc.linear(d, d, n_txt)  # cross_attn k, v on the text
    acc.linear(d, d, n_txt)
    acc.linear(d, d, n_img)  # cross_attn o
    acc.rms_norm(d)
    acc.rms_norm(d)
    acc.attention(n_img, n_txt, d)
    acc.norm(d, affine=False)  # norm2
    acc.linear(d, ffn, n_img)
    acc.linear(ffn, d, n_img)
    # modulation add and chunk, modulate twice (2 each), RoPE on q and k (6 each), gates
    # and residual adds (2 + 2 + 1), GELU.
    acc.pointwise(2 + 4 + 12 + 5 + 1, "modulation, RoPE, gates, residuals, GELU")
    # Per video token: norm1 input, modulated (qkv input), q and k before RMSNorm, q, k, v,
    # attention output (o input), norm3 input, normed (cross q input), cross q before and
    # after RMSNorm, cross attention output (o input), norm2 input, modulated (fc1 input),
    # GELU input and fc2 input (ffn each), the block output; per text token: the context,
    # cross k before RMSNorm, k and v.
    acc.save((1 + 1 + 2 + 3 + 1 + 1 + 1 + 2 + 1 + 1 + 1 + 1) * d * n_img
             + 2 * ffn * n_img + 4 * d * n_txt)
    return acc.done(fp16_bytes(n_img, d))


def wan_head(cfg, n_img: int) -> Layer:
    """Head: LayerNorm (no affine), modulation (2 x dim + e), Linear dim -> 4 * out_dim."""
    acc = Acc("head", "head")
    d, out = cfg["dim"], 4 * cfg["out_dim"]
    acc.param(2 * d)
    acc.norm(d, affine=False)
    acc.linear(d, out, n_img, cls=EMBEDDING)
    acc.pointwise(2 + 2 + 1, "modulation, modulate, unpatchify copy")
    acc.save(2 * d * n_img)
    return acc.done(fp16_bytes(n_img, out))


def build_wan(cfg, frames: int, height: int, width: int) -> Architecture:
    n_img = video_tokens(frames, height, width)
    d, heads = cfg["dim"], cfg["num_heads"]
    layers = [wan_time_embedding(cfg, n_img), wan_text_embedding(cfg, n_img),
              wan_patch_embedding(cfg, n_img)]
    layers += [wan_block(f"block{i}", cfg, n_img) for i in range(cfg["num_layers"])]
    layers.append(wan_head(cfg, n_img))
    for layer in layers:
        if layer.name.startswith("block"):
            layer.sequence = _sequence(n_img, heads, d // heads, _self_attention_flops(n_img, d))
        elif layer.name in ("patch_embedding", "head"):
            layer.sequence = _sequence(n_img, 0, 0, 0)
    carried = [Carried("time_embeddings", "time_embedding", fp16_bytes(7 * d), True),
               Carried("context", "text_embedding", fp16_bytes(cfg["text_len"], d), True)]
    return Architecture(layers, skips=[], carried=carried)
