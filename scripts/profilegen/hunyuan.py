"""Hunyuan-DiT (Tencent/HunyuanDiT hydit/modules/models.py, v1.0 layout) at block level.

Layers: cond_embedding (t_embedder, attention pooler over the mT5 states, image-size
and style conditions, extra_embedder -> c), text_embedding (mlp_t5 on the mT5 states,
concatenated with the CLIP states, learned padding -> 333 x 1024 text states),
x_embedder (patchify), block0..block{depth-1}, final_layer.

Long skips (models_hw.md section 3): blocks with layer > depth // 2 pop a skip; blocks
with layer < depth // 2 - 1 push their output; so block j takes block depth-1-j for
j = depth//2 + 1 .. depth-1, and the two middle blocks neither push nor pop.
"""

from .layers import (EMBEDDING, Acc, Architecture, Carried, Layer, Skip, fp16_bytes)
from .unet import SINUSOID_KERNELS

# HUNYUAN_DIT_CONFIG['DiT-g/2'] plus the text and condition settings of hydit/config.py.
HUNYUAN_DIT_G2 = {
    "depth": 40, "hidden_size": 1408, "patch_size": 2, "num_heads": 16, "mlp_ratio": 4.3637,
    "in_channels": 4, "learn_sigma": True,
    "text_states_dim": 1024, "text_len": 77,          # CLIP (Chinese) states
    "text_states_dim_t5": 2048, "text_len_t5": 256,   # mT5 states
    "pooler_out_dim": 1024, "pooler_heads": 8,
    "size_cond_dim": 6 * 256,                          # image_meta_size, sinusoidal
    "frequency_embedding_size": 256,
}


def _text_tokens(cfg) -> int:
    return cfg["text_len"] + cfg["text_len_t5"]


def _mlp_hidden(cfg) -> int:
    return int(cfg["hidden_size"] * cfg["mlp_ratio"])  # 6144 for DiT-g/2


def cond_embedding(cfg, latent_side: int) -> Layer:
    """c = t_embedder(t) + extra_embedder(cat[pooler(t5), size ids, style])."""
    acc = Acc("cond_embedding", "embedding")
    d, f = cfg["hidden_size"], cfg["frequency_embedding_size"]
    e, n_t5, out = cfg["text_states_dim_t5"], cfg["text_len_t5"], cfg["pooler_out_dim"]
    acc.linear(f, d, 1, cls=EMBEDDING)   # t_embedder.mlp
    acc.linear(d, d, 1, cls=EMBEDDING)
    acc.param((n_t5 + 1) * e)            # pooler positional_embedding
    acc.linear(e, e, 1, cls=EMBEDDING)   # pooler q_proj on the mean token
    acc.linear(e, e, n_t5 + 1)           # pooler k_proj
    acc.linear(e, e, n_t5 + 1)           # pooler v_proj
    acc.attention(1, n_t5 + 1, e)
    acc.linear(e, out, 1, cls=EMBEDDING)  # pooler c_proj
    acc.param(d)                         # style_embedder (one learned style)
    extra_in = out + cfg["size_cond_dim"] + d
    acc.linear(extra_in, 4 * d, 1, cls=EMBEDDING)  # extra_embedder
    acc.linear(4 * d, d, 1, cls=EMBEDDING)
    # Sinusoids of t and of the six size ids, SiLU in three MLPs, the pooler's mean,
    # cat, pos-embed add and head copies, the style lookup, the condition concatenation
    # and the final sum.
    acc.pointwise(2 * SINUSOID_KERNELS + 3 + 4 + 1 + 2, "conditions")
    # Pooler: its (n+1) x e input and k, v; the MLP inputs are per-sample vectors.
    acc.save(3 * (n_t5 + 1) * e + f + 2 * d + extra_in + 8 * d)
    # The layers after this one still need the latent and both raw text-state tensors.
    return acc.done(fp16_bytes(cfg["in_channels"], latent_side, latent_side)
                    + fp16_bytes(cfg["text_len"], cfg["text_states_dim"])
                    + fp16_bytes(n_t5, e))


def text_embedding(cfg, latent_side: int) -> Layer:
    """mlp_t5 (2048 -> 8192 -> 1024, SiLU) and the learned text_embedding_padding."""
    acc = Acc("text_embedding", "embedding")
    e, n_t5, t = cfg["text_states_dim_t5"], cfg["text_len_t5"], cfg["text_states_dim"]
    acc.linear(e, 4 * e, n_t5)
    acc.linear(4 * e, t, n_t5)
    acc.param(_text_tokens(cfg) * t)
    acc.pointwise(4, "SiLU, cat with CLIP, padding mask where")
    acc.save(n_t5 * (e + 2 * 4 * e))  # fc1 input, SiLU input, fc2 input
    # The text states leave as a carried tensor; the main path is the latent.
    return acc.done(fp16_bytes(cfg["in_channels"], latent_side, latent_side))


def x_embedder(cfg, latent_side: int) -> Layer:
    acc = Acc("x_embedder", "embedding")
    d, p, c = cfg["hidden_size"], cfg["patch_size"], cfg["in_channels"]
    tokens = (latent_side // p) ** 2
    acc.conv(c, d, p, tokens, cls=EMBEDDING)
    acc.pointwise(1, "flatten + transpose copy")
    acc.save(c * latent_side * latent_side)
    return acc.done(fp16_bytes(tokens, d))


def block(name: str, cfg, tokens: int, skip: bool) -> Layer:
    """HunYuanDiTBlock: [skip_norm + skip_linear], self-attn, cross-attn, FFN."""
    acc = Acc(name, "transformer")
    d, h = cfg["hidden_size"], _mlp_hidden(cfg)
    head_dim = d // cfg["num_heads"]
    n_txt, t = _text_tokens(cfg), cfg["text_states_dim"]
    if skip:
        acc.pointwise(1, "torch.cat([x, skip])")
        acc.norm(2 * d)                 # skip_norm
        acc.linear(2 * d, d, tokens)    # skip_linear
        acc.save(4 * d * tokens)        # skip_norm input (the cat) and output
    acc.norm(d)                                 # norm1
    acc.linear(d, d, 1, cls=EMBEDDING)          # default_modulation(c) -> shift
    acc.linear(d, 3 * d, tokens)                # attn1 Wqkv
    acc.norm(head_dim)                          # attn1 q_norm, k_norm
    acc.norm(head_dim)
    acc.attention(tokens, tokens, d)
    acc.linear(d, d, tokens)                    # attn1 out_proj
    acc.norm(d)                                 # norm3
    acc.linear(d, d, tokens)                    # attn2 q_proj
    acc.linear(t, 2 * d, n_txt)                 # attn2 kv_proj on the text states
    acc.norm(head_dim)                          # attn2 q_norm, k_norm
    acc.norm(head_dim)
    acc.attention(tokens, n_txt, d)
    acc.linear(d, d, tokens)                    # attn2 out_proj
    acc.norm(d)                                 # norm2
    acc.linear(d, h, tokens)                    # mlp fc1
    acc.linear(h, d, tokens)                    # mlp fc2
    # FP32_Layernorm casts in and out (3 norms); SiLU(c) and the shift add; RoPE on q and
    # k of the self-attention and on q of the cross-attention (float cast, two products,
    # rotate, sum, cast: 6 each); three residual adds; GELU.
    acc.pointwise(6 + 2 + 3 * 6 + 3 + 1, "casts, modulation, RoPE, residuals, GELU")
    # Self-attention: norm1 input, Wqkv input, q and k before qk-norm, q, k, v, output: 8.
    # Cross-attention: norm3 input, q_proj input, q before norm, q, output: 5 (+ k, v and
    # k before norm on the text tokens). FFN: norm2 input, fc1 input, GELU in, fc2 in.
    acc.save(13 * d * tokens + 3 * d * n_txt + 2 * d * tokens + 2 * h * tokens)
    return acc.done(fp16_bytes(tokens, d))


def final_layer(cfg, latent_side: int) -> Layer:
    """FinalLayer: LayerNorm (no affine) modulated by adaLN(c), Linear D -> p*p*out."""
    acc = Acc("final_layer", "head")
    d, p = cfg["hidden_size"], cfg["patch_size"]
    out_c = cfg["in_channels"] * (2 if cfg["learn_sigma"] else 1)
    tokens = (latent_side // p) ** 2
    acc.linear(d, 2 * d, 1, cls=EMBEDDING)      # adaLN_modulation
    acc.linear(d, p * p * out_c, tokens, cls=EMBEDDING)
    acc.norm(d, affine=False)
    acc.pointwise(1 + 3 + 1, "SiLU, modulate, unpatchify copy")
    acc.save(2 * d * tokens)  # norm input, modulated (linear) input
    return acc.done(fp16_bytes(out_c, latent_side, latent_side))


def build_hunyuan(cfg, latent_side: int) -> Architecture:
    depth, d = cfg["depth"], cfg["hidden_size"]
    tokens = (latent_side // cfg["patch_size"]) ** 2
    layers = [cond_embedding(cfg, latent_side), text_embedding(cfg, latent_side),
              x_embedder(cfg, latent_side)]
    layers += [block(f"block{i}", cfg, tokens, skip=i > depth // 2) for i in range(depth)]
    layers.append(final_layer(cfg, latent_side))
    skip_bytes = fp16_bytes(tokens, d)
    skips = [Skip(f"block{depth - 1 - j}", f"block{j}", skip_bytes)
             for j in range(depth - 1, depth // 2, -1)]
    carried = [
        # c conditions every block (shift) and the final layer; learned, so it has a gradient.
        Carried("cond", "cond_embedding", fp16_bytes(d), True),
        # The 333 x 1024 text states feed every cross-attention; mlp_t5 and the padding
        # are trained, so their gradient returns to text_embedding.
        Carried("text_states", "text_embedding",
                fp16_bytes(_text_tokens(cfg), cfg["text_states_dim"]), True),
    ]
    return Architecture(layers, skips, carried)
