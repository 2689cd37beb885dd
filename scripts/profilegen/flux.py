"""Flux.1 (diffusers FluxTransformer2DModel) at block level.

Layers: time_text_embed (timestep, guidance and pooled-CLIP MLPs -> temb),
context_embedder (T5 states -> text tokens), x_embedder (packed latent -> image tokens),
double0..double{n-1} (two streams, joint attention), single0..single{m-1} (one fused
stream), norm_out (AdaLayerNormContinuous + proj_out on the image tokens).

The main path through the double blocks is the image AND the text stream (both are
updated by every block), 4096 + 512 tokens at 1024 px; the single blocks carry the same
concatenated sequence. No long skips. temb is carried (every block's AdaLN uses it).
The RoPE tables are parameter-free functions of the token ids; every stage recomputes
them, so they are not carried.
"""

from .layers import (EMBEDDING, Acc, Architecture, Carried, Layer, fp16_bytes)
from .unet import SINUSOID_KERNELS

# diffusers FluxTransformer2DModel defaults = black-forest-labs/FLUX.1-dev
# transformer/config.json (models_hw.md section 5).
FLUX1_DEV = {
    "patch_size": 1, "in_channels": 64, "num_layers": 19, "num_single_layers": 38,
    "attention_head_dim": 128, "num_attention_heads": 24, "joint_attention_dim": 4096,
    "pooled_projection_dim": 768, "guidance_embeds": True, "text_tokens": 512,
    "timestep_proj_dim": 256, "mlp_ratio": 4,
}


def _dim(cfg) -> int:
    return cfg["attention_head_dim"] * cfg["num_attention_heads"]  # 3072


def _image_tokens(latent_side: int) -> int:
    # The 16-channel latent is packed 2x2 into 64 channels: (side / 2)^2 tokens.
    return (latent_side // 2) ** 2


def time_text_embed(cfg, n_img: int) -> Layer:
    """CombinedTimestepGuidanceTextProjEmbeddings: three two-layer MLPs, summed."""
    acc = Acc("time_text_embed", "embedding")
    d, f, pooled = _dim(cfg), cfg["timestep_proj_dim"], cfg["pooled_projection_dim"]
    inputs = [f, f, pooled] if cfg["guidance_embeds"] else [f, pooled]
    for d_in in inputs:
        acc.linear(d_in, d, 1, cls=EMBEDDING)
        acc.linear(d, d, 1, cls=EMBEDDING)
        acc.save(d_in + 2 * d)
        acc.pointwise(1, "SiLU")
    # Sinusoids of the timestep and the guidance, their casts, the two sums.
    acc.pointwise(2 * (SINUSOID_KERNELS + 1) + 2, "sinusoids, casts, sums")
    # The next layers need the packed latent and the raw T5 states.
    return acc.done(fp16_bytes(n_img, cfg["in_channels"])
                    + fp16_bytes(cfg["text_tokens"], cfg["joint_attention_dim"]))


def context_embedder(cfg, n_img: int) -> Layer:
    acc = Acc("context_embedder", "embedding")
    d, n_txt = _dim(cfg), cfg["text_tokens"]
    acc.linear(cfg["joint_attention_dim"], d, n_txt)
    acc.save(n_txt * cfg["joint_attention_dim"])
    return acc.done(fp16_bytes(n_img, cfg["in_channels"]) + fp16_bytes(n_txt, d))


def x_embedder(cfg, n_img: int) -> Layer:
    acc = Acc("x_embedder", "embedding")
    d = _dim(cfg)
    acc.linear(cfg["in_channels"], d, n_img, cls=EMBEDDING)
    acc.save(n_img * cfg["in_channels"])
    return acc.done(fp16_bytes(n_img + cfg["text_tokens"], d))


def _stream(acc: Acc, d: int, hidden: int, head_dim: int, tokens: int) -> None:
    """One stream of a double block: AdaLN-Zero, QKV (+RMS qk-norm), out, GELU MLP."""
    acc.linear(d, 6 * d, 1, cls=EMBEDDING)  # norm1(_context).linear on SiLU(temb)
    acc.norm(d, affine=False)  # norm1 and norm2 LayerNorms (no affine)
    acc.norm(d, affine=False)
    # SiLU(temb); x * (1 + scale) + shift twice (3 each); gate and residual add twice;
    # GELU.
    acc.pointwise(1 + 6 + 4 + 1, "modulation, gates, residuals, GELU")
    for _ in range(3):  # to_q/k/v or add_q/k/v_proj
        acc.linear(d, d, tokens)
    acc.rms_norm(head_dim)  # norm_q / norm_added_q
    acc.rms_norm(head_dim)  # norm_k / norm_added_k
    acc.linear(d, d, tokens)  # to_out[0] / to_add_out
    acc.linear(d, hidden, tokens)  # ff(_context) GELU(tanh) proj
    acc.linear(hidden, d, tokens)
    # norm1 input, modulated (QKV input), q and k before RMSNorm, q, k, v, attention
    # output (out-proj input), gated attention output; norm2 input, modulated (fc1
    # input), GELU input, fc2 input, gated MLP output.
    acc.save((8 + 1 + 2 + 2 * hidden // d + 1) * d * tokens)


def double_block(name: str, cfg, n_img: int) -> Layer:
    acc = Acc(name, "transformer")
    d, n_txt = _dim(cfg), cfg["text_tokens"]
    hidden = cfg["mlp_ratio"] * d
    _stream(acc, d, hidden, cfg["attention_head_dim"], n_img)
    _stream(acc, d, hidden, cfg["attention_head_dim"], n_txt)
    acc.attention(n_img + n_txt, n_img + n_txt, d)  # joint attention over both streams
    # q, k, v of the two streams concatenated; RoPE on q and k (6 each); the output split.
    acc.pointwise(3 + 12 + 2, "joint concatenation, RoPE, split")
    return acc.done(fp16_bytes(n_img + n_txt, d))


def single_block(name: str, cfg, n_img: int) -> Layer:
    """AdaLN-Zero-single, fused QKV + MLP-in, proj_out(cat[attn, gelu(mlp)])."""
    acc = Acc(name, "transformer")
    d, head_dim = _dim(cfg), cfg["attention_head_dim"]
    tokens = n_img + cfg["text_tokens"]
    hidden = cfg["mlp_ratio"] * d
    acc.linear(d, 3 * d, 1, cls=EMBEDDING)  # norm.linear
    acc.linear(d, hidden, tokens)  # proj_mlp
    for _ in range(3):  # attn to_q, to_k, to_v
        acc.linear(d, d, tokens)
    acc.rms_norm(head_dim)
    acc.rms_norm(head_dim)
    acc.attention(tokens, tokens, d)
    acc.linear(d + hidden, d, tokens)  # proj_out
    acc.norm(d, affine=False)
    # SiLU(temb), modulate (3), GELU, RoPE on q and k (12), cat, gate, residual add.
    acc.pointwise(1 + 3 + 1 + 12 + 1 + 1 + 1, "modulation, RoPE, cat, gate, residual")
    # norm input, modulated (QKV and MLP input), q and k before RMSNorm, q, k, v,
    # attention output, GELU input, the concatenation (proj_out input), gated output.
    acc.save((1 + 1 + 2 + 3 + 1 + hidden // d + (d + hidden) // d + 1) * d * tokens)
    return acc.done(fp16_bytes(tokens, d))


def norm_out(cfg, n_img: int) -> Layer:
    """AdaLayerNormContinuous on the image tokens (text tokens dropped), proj_out."""
    acc = Acc("norm_out", "head")
    d = _dim(cfg)
    out = cfg["patch_size"] ** 2 * cfg["in_channels"]
    acc.linear(d, 2 * d, 1, cls=EMBEDDING)
    acc.linear(d, out, n_img, cls=EMBEDDING)
    acc.norm(d, affine=False)
    acc.pointwise(1 + 2 + 1, "SiLU, modulate, image-token slice copy")
    acc.save(2 * d * n_img)  # norm input, proj_out input
    return acc.done(fp16_bytes(n_img, out))


def build_flux(cfg, latent_side: int) -> Architecture:
    """latent_side: the 16-channel VAE latent side (image side / 8)."""
    return build_mmdit(cfg, _image_tokens(latent_side))


def build_mmdit(cfg, n_img: int) -> Architecture:
    """The Flux layout over n_img image (or video) tokens: Open-Sora 2.0 and HunyuanVideo
    share it (video.py)."""
    layers = [time_text_embed(cfg, n_img), context_embedder(cfg, n_img), x_embedder(cfg, n_img)]
    layers += [double_block(f"double{i}", cfg, n_img) for i in range(cfg["num_layers"])]
    layers += [single_block(f"single{i}", cfg, n_img) for i in range(cfg["num_single_layers"])]
    layers.append(norm_out(cfg, n_img))
    carried = [Carried("temb", "time_text_embed", fp16_bytes(_dim(cfg)), True)]
    return Architecture(layers, skips=[], carried=carried)
