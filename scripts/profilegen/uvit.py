"""U-ViT (baofff/U-ViT libs/uvit.py) at block granularity.

Tokens are [label token, time token, patches] with a learned pos_embed. depth // 2
in_blocks push their outputs, one mid_block, then depth // 2 out_blocks each doing
x = skip_linear(cat([x, skips.pop()])) (Linear 2D -> D, no norm), so out_blocks[i] takes
in_blocks[n-1-i]. Time and class travel inside the token sequence: nothing is carried.
"""

from .layers import (EMBEDDING, Acc, Architecture, Layer, Skip, fp16_bytes)
from .unet import SINUSOID_KERNELS

# configs/imagenet256_uvit.py (U-ViT-L/2) and configs/imagenet256_uvit_huge.py (U-ViT-H/2),
# models_hw.md section 4. z_shape (4, 32, 32): 256 px images through the SD VAE.
UVIT_L2 = {
    "img_size": 32, "patch_size": 2, "in_chans": 4, "embed_dim": 1024, "depth": 20,
    "num_heads": 16, "mlp_ratio": 4, "qkv_bias": False, "num_classes": 1001, "conv": True,
}
UVIT_H2 = {
    "img_size": 32, "patch_size": 2, "in_chans": 4, "embed_dim": 1152, "depth": 28,
    "num_heads": 16, "mlp_ratio": 4, "qkv_bias": False, "num_classes": 1001, "conv": False,
}


def _tokens(cfg) -> int:
    extras = 2 if cfg["num_classes"] > 0 else 1  # time token (+ label token)
    return extras + (cfg["img_size"] // cfg["patch_size"]) ** 2


def embed(cfg) -> Layer:
    """patch_embed (Conv2d kernel = stride = patch), label_emb, pos_embed."""
    acc = Acc("embed", "embedding")
    d, p, c = cfg["embed_dim"], cfg["patch_size"], cfg["in_chans"]
    patches = (cfg["img_size"] // p) ** 2
    acc.conv(c, d, p, patches, cls=EMBEDDING)
    if cfg["num_classes"] > 0:
        acc.param(cfg["num_classes"] * d)
    acc.param(_tokens(cfg) * d)  # pos_embed
    acc.save(c * cfg["img_size"] ** 2)  # patch conv input
    # timestep_embedding (8) and its cast, the label lookup, flatten + transpose copy of
    # the patches, the token concatenation, the pos_embed add.
    acc.pointwise(SINUSOID_KERNELS + 1 + 1 + 1 + 1 + 1, "time and label tokens, layout")
    return acc.done(fp16_bytes(_tokens(cfg), d))


def block(name: str, cfg, skip: bool) -> Layer:
    """Pre-LN block: [skip_linear(cat)], x + attn(norm1(x)), x + mlp(norm2(x))."""
    acc = Acc(name, "transformer")
    d, tokens = cfg["embed_dim"], _tokens(cfg)
    hidden = int(d * cfg["mlp_ratio"])
    if skip:
        acc.pointwise(1, "torch.cat([x, skip])")
        acc.linear(2 * d, d, tokens)
        acc.save(2 * d * tokens)  # the concatenation, skip_linear's input
    acc.norm(d)
    acc.linear(d, 3 * d, tokens, bias=cfg["qkv_bias"])
    acc.attention(tokens, tokens, d)
    acc.linear(d, d, tokens)  # proj
    acc.norm(d)
    acc.linear(d, hidden, tokens)  # fc1
    acc.linear(hidden, d, tokens)  # fc2
    acc.pointwise(3, "GELU, two residual adds")
    # Self-attention: norm1 input, qkv input, q, k, v, attention output (= proj input): 6.
    # MLP: norm2 input, fc1 input, GELU input, fc2 input: 2 + 2 * hidden / d.
    acc.save(6 * d * tokens + 2 * d * tokens + 2 * hidden * tokens)
    return acc.done(fp16_bytes(tokens, d))


def head(cfg) -> Layer:
    """norm, decoder_pred (D -> p*p*C per token), unpatchify, optional final 3x3 conv."""
    acc = Acc("head", "head")
    d, p, c, side = cfg["embed_dim"], cfg["patch_size"], cfg["in_chans"], cfg["img_size"]
    tokens = _tokens(cfg)
    acc.norm(d)
    acc.linear(d, p * p * c, tokens, cls=EMBEDDING)
    acc.pointwise(2, "drop the extra tokens, unpatchify copy")
    acc.save(2 * d * tokens)  # norm input, decoder_pred input
    if cfg["conv"]:
        acc.conv(c, c, 3, side * side, cls=EMBEDDING)
        acc.save(c * side * side)
    return acc.done(fp16_bytes(c, side, side))


def build_uvit(cfg) -> Architecture:
    n = cfg["depth"] // 2
    layers = [embed(cfg)]
    layers += [block(f"in{i}", cfg, skip=False) for i in range(n)]
    layers.append(block("mid", cfg, skip=False))
    layers += [block(f"out{i}", cfg, skip=True) for i in range(n)]
    layers.append(head(cfg))
    skip_bytes = fp16_bytes(_tokens(cfg), cfg["embed_dim"])
    skips = [Skip(f"in{n - 1 - i}", f"out{i}", skip_bytes) for i in range(n)]
    return Architecture(layers, skips, carried=[])
