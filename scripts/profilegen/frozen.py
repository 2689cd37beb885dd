"""Frozen components: the VAE encoder and text encoders a diffusion training step runs
forward-only before the denoiser (the model profile's `frozen` list, docs/frozen.md).

Each component is described block by block with the same accounting as the denoisers
(layers.Acc: parameters, FLOPs by class, elementwise bytes, kernels) and timed by the same
time model (catalog._times: timing.py on V100 and 910A, hostfloor.py on the host-floor
devices); its forward time at microbatch b is the sum of its blocks' forward times. Nothing
here is measured: parameter counts and shapes come from the published configurations cited
in each component's `source`.

Memory of a forward without gradients: weights resident in fp16/bf16 (2 bytes per
parameter, no gradient, no optimizer state) and, per sample, a transient working set of
FROZEN_WORKING_SET x the largest activation tensor of one sample (a block's input kept for
its residual add, the normalised copy, the activation's output and the convolution's or
GEMM's output live at once); nothing is kept for a backward.
"""

from dataclasses import dataclass
from typing import Callable, Dict, List

from .layers import EMBEDDING, Acc, Layer, fp16_bytes

# Live tensors of one sample at the widest point of a forward without gradients (above).
FROZEN_WORKING_SET = 4

CLIP_TOKENS = 77


@dataclass
class FrozenComponent:
    name: str
    kind: str                 # "vae_encoder", "text_encoder" or "image_encoder"
    blocks: List[Layer]
    largest_tensor_bytes: int  # per sample, the widest activation of its forward
    output_bytes: int          # per sample, what the denoiser's step reads of it
    source: str

    @property
    def params(self) -> int:
        return sum(b.params for b in self.blocks)

    @property
    def forward_flops(self) -> int:
        return sum(b.forward_flops for b in self.blocks)


# ---- text transformers ----------------------------------------------------------------

@dataclass(frozen=True)
class TextConfig:
    width: int
    layers: int
    heads: int
    ff: int          # feed-forward width
    vocab: int
    tokens: int
    gated: bool      # T5 v1.1 / mT5: gated-GELU FFN (wi_0, wi_1, wo), no biases, RMSNorm
    positions: bool  # learned absolute position table (CLIP, BERT); T5 has relative buckets


def _text_embed(cfg: TextConfig) -> Layer:
    acc = Acc("embed", "embedding")
    acc.param(cfg.vocab * cfg.width)
    if cfg.positions:
        acc.param(cfg.tokens * cfg.width)
    acc.pointwise(2, "token lookup, position add")
    return acc.done(fp16_bytes(cfg.tokens, cfg.width))


def _text_block(i: int, cfg: TextConfig) -> Layer:
    """Pre- or post-LN encoder block: self-attention over the tokens, then the FFN."""
    acc = Acc(f"block{i}", "transformer")
    d, t, bias = cfg.width, cfg.tokens, not cfg.gated
    norm = acc.rms_norm if cfg.gated else acc.norm
    norm(d)
    for _ in range(3):  # q, k, v
        acc.linear(d, d, t, bias=bias)
    acc.attention(t, t, d)
    acc.linear(d, d, t, bias=bias)  # out
    norm(d)
    for _ in range(2 if cfg.gated else 1):  # wi_0 and wi_1 (gated) or fc1
        acc.linear(d, cfg.ff, t, bias=bias)
    acc.linear(cfg.ff, d, t, bias=bias)  # wo / fc2
    acc.pointwise(4 if cfg.gated else 3, "GELU, gate product, two residual adds")
    acc.save(4 * d * t + (2 if cfg.gated else 1) * cfg.ff * t)  # what its ops read
    return acc.done(fp16_bytes(t, d))


def _text_head(cfg: TextConfig, projection: int) -> Layer:
    acc = Acc("final", "embedding")
    (acc.rms_norm if cfg.gated else acc.norm)(cfg.width)
    if projection:
        acc.linear(cfg.width, projection, 1, bias=False, cls=EMBEDDING)  # pooled projection
    return acc.done(fp16_bytes(cfg.tokens, cfg.width))


def text_encoder(name: str, cfg: TextConfig, output_bytes: int, source: str,
                 projection: int = 0) -> FrozenComponent:
    blocks = ([_text_embed(cfg)] + [_text_block(i, cfg) for i in range(cfg.layers)]
              + [_text_head(cfg, projection)])
    widest = max(cfg.width, 2 * cfg.ff if cfg.gated else cfg.ff)
    return FrozenComponent(name, "text_encoder", blocks, fp16_bytes(cfg.tokens, widest),
                           output_bytes, source)


# HF transformers configs (config.json of each checkpoint's text encoder folder).
CLIP_L = TextConfig(768, 12, 12, 3072, 49408, CLIP_TOKENS, False, True)
OPENCLIP_H_SD2 = TextConfig(1024, 23, 16, 4096, 49408, CLIP_TOKENS, False, True)
OPENCLIP_BIGG = TextConfig(1280, 32, 20, 5120, 49408, CLIP_TOKENS, False, True)
T5_XXL_512 = TextConfig(4096, 24, 64, 10240, 32128, 512, True, False)
MT5_XL_256 = TextConfig(2048, 24, 32, 5120, 250112, 256, True, False)
HUNYUAN_CLIP = TextConfig(1024, 24, 16, 4096, 47020, CLIP_TOKENS, False, True)


# ---- VAE encoder ----------------------------------------------------------------------

VAE_CHANNELS = (128, 256, 512, 512)  # block_out_channels, layers_per_block 2


def _vae_resnet(acc: Acc, c_in: int, c_out: int, hw: int) -> None:
    acc.group_norm(c_in)
    acc.conv(c_in, c_out, 3, hw)
    acc.group_norm(c_out)
    acc.conv(c_out, c_out, 3, hw)
    if c_in != c_out:
        acc.conv(c_in, c_out, 1, hw)
    acc.pointwise(3, "2 SiLU, residual add")
    acc.save(3 * (c_in + c_out) * hw)


def vae_encoder(name: str, height: int, width: int, latent_channels: int, quant_conv: bool,
                frames: int, source: str) -> FrozenComponent:
    """diffusers Encoder (AutoencoderKL): conv_in, four down blocks of two ResnetBlocks (a
    stride-2 conv between levels), mid block (resnet, one-head attention, resnet),
    GN + SiLU + conv_out to 2 x latent channels (mean and log-variance). One sample is
    `frames` images (a video clip encoded frame by frame)."""
    blocks, c_prev, h, w = [], 3, height, width
    acc = Acc("conv_in", "conv")
    acc.conv(3, VAE_CHANNELS[0], 3, h * w)
    acc.save(3 * h * w)
    blocks.append(acc.done(fp16_bytes(VAE_CHANNELS[0], h, w)))
    c_prev = VAE_CHANNELS[0]
    for level, c in enumerate(VAE_CHANNELS):
        for j in range(2):
            acc = Acc(f"down{level}.resnet{j}", "resnet")
            _vae_resnet(acc, c_prev, c, h * w)
            blocks.append(acc.done(fp16_bytes(c, h, w)))
            c_prev = c
        if level < len(VAE_CHANNELS) - 1:
            acc = Acc(f"down{level}.downsample", "downsample")
            acc.pointwise(1, "asymmetric pad")
            acc.save(c * h * w)
            h, w = h // 2, w // 2
            acc.conv(c, c, 3, h * w)
            blocks.append(acc.done(fp16_bytes(c, h, w)))
    c = VAE_CHANNELS[-1]
    acc = Acc("mid", "resnet")
    _vae_resnet(acc, c, c, h * w)
    acc.group_norm(c)
    for _ in range(4):  # to_q, to_k, to_v, to_out
        acc.linear(c, c, h * w)
    acc.attention(h * w, h * w, c)
    acc.save(4 * c * h * w)
    _vae_resnet(acc, c, c, h * w)
    acc.group_norm(c)
    acc.conv(c, 2 * latent_channels, 3, h * w)  # conv_out (after conv_norm_out and SiLU)
    if quant_conv:
        acc.conv(2 * latent_channels, 2 * latent_channels, 1, h * w)
    acc.pointwise(2, "SiLU, residual add")
    blocks.append(acc.done(fp16_bytes(2 * latent_channels, h, w)))
    if frames > 1:
        blocks = [_times_frames(b, frames) for b in blocks]
    # A clip's frames are encoded one after another (as SVD's pipeline chunks them), so the
    # working set is one frame's.
    largest = fp16_bytes(VAE_CHANNELS[0], height, width)
    output = fp16_bytes(latent_channels, h, w) * frames  # the sampled latent the step reads
    return FrozenComponent(name, "vae_encoder", blocks, largest, output, source)


def _times_frames(block: Layer, frames: int) -> Layer:
    """A per-image block run on every frame of a clip (one sample = one clip)."""
    block.flops = {c: f * frames for c, f in block.flops.items()}
    block.saved_elems *= frames
    block.out_bytes *= frames
    return block


# ---- image encoder (SVD's conditioning frame) --------------------------------------------

def clip_vision_h(name: str, source: str) -> FrozenComponent:
    """OpenCLIP ViT-H/14 vision tower at 224 px: 16 x 16 patches + class token."""
    cfg = TextConfig(1280, 32, 16, 5120, 0, 257, False, True)
    acc = Acc("patch_embed", "embedding")
    acc.conv(3, cfg.width, 14, 256, cls=EMBEDDING, bias=False)
    acc.param(cfg.tokens * cfg.width + cfg.width)  # positions, class token
    acc.norm(cfg.width)
    acc.save(3 * 224 * 224)
    blocks = [acc.done(fp16_bytes(cfg.tokens, cfg.width))]
    blocks += [_text_block(i, cfg) for i in range(cfg.layers)]
    blocks.append(_text_head(cfg, 1024))
    return FrozenComponent(name, "image_encoder", blocks, fp16_bytes(cfg.tokens, cfg.ff),
                           fp16_bytes(1, 1024), source)


# ---- what each shipped model runs --------------------------------------------------------

SD_VAE = ("diffusers AutoencoderKL encoder (block_out_channels 128, 256, 512, 512; "
          "layers_per_block 2; mid attention)")


def _hf(repo: str, folder: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/{folder}/config.json"


def sd2_frozen(px: int, repo: str) -> List[FrozenComponent]:
    return [
        vae_encoder("vae_encoder", px, px, 4, True, 1,
                    f"{SD_VAE}, latent 4 channels, quant_conv: {_hf(repo, 'vae')}"),
        text_encoder("text_encoder", OPENCLIP_H_SD2, fp16_bytes(CLIP_TOKENS, 1024),
                     "OpenCLIP ViT-H/14 text tower as SD2 runs it (CLIPTextModel, 23 layers: "
                     "the penultimate layer's states), width 1024, 16 heads, ff 4096: "
                     f"{_hf(repo, 'text_encoder')}"),
    ]


SDXL = "stabilityai/stable-diffusion-xl-base-1.0"


def sdxl_frozen() -> List[FrozenComponent]:
    return [
        vae_encoder("vae_encoder", 1024, 1024, 4, True, 1,
                    f"{SD_VAE}, latent 4 channels, quant_conv: {_hf(SDXL, 'vae')}"),
        text_encoder("text_encoder", CLIP_L, fp16_bytes(CLIP_TOKENS, 768),
                     "CLIP ViT-L/14 text tower (CLIPTextModel, 12 layers, width 768, 12 heads, "
                     f"ff 3072): {_hf(SDXL, 'text_encoder')}"),
        text_encoder("text_encoder_2", OPENCLIP_BIGG, fp16_bytes(CLIP_TOKENS + 1, 1280),
                     "OpenCLIP ViT-bigG/14 text tower (CLIPTextModelWithProjection, 32 layers, "
                     f"width 1280, 20 heads, ff 5120, projection 1280): "
                     f"{_hf(SDXL, 'text_encoder_2')}", projection=1280),
    ]


FLUX = "black-forest-labs/FLUX.1-dev"


def flux_frozen() -> List[FrozenComponent]:
    return [
        vae_encoder("vae_encoder", 1024, 1024, 16, False, 1,
                    f"{SD_VAE}, latent 16 channels, no quant_conv: {_hf(FLUX, 'vae')}"),
        text_encoder("text_encoder", CLIP_L, fp16_bytes(1, 768),
                     "CLIP ViT-L/14 text tower (pooled output only): "
                     f"{_hf(FLUX, 'text_encoder')}"),
        text_encoder("text_encoder_2", T5_XXL_512, fp16_bytes(512, 4096),
                     "T5 v1.1 XXL encoder (T5EncoderModel: 24 layers, d_model 4096, 64 heads of "
                     "64, gated-GELU ff 10240, vocab 32128), 512 tokens (max_sequence_length of "
                     f"FLUX.1-dev): {_hf(FLUX, 'text_encoder_2')}"),
    ]


def hunyuan_frozen(px: int) -> List[FrozenComponent]:
    repo = "Tencent-Hunyuan/HunyuanDiT"
    return [
        vae_encoder("vae_encoder", px, px, 4, True, 1,
                    f"{SD_VAE}: sdxl-vae-fp16-fix, latent 4 channels "
                    f"(https://huggingface.co/{repo}/tree/main/t2i/sdxl-vae-fp16-fix)"),
        text_encoder("text_encoder", HUNYUAN_CLIP, fp16_bytes(CLIP_TOKENS, 1024),
                     "bilingual CLIP text tower (BertModel: 24 layers, hidden 1024, 16 heads, "
                     f"ff 4096, vocab 47020), 77 tokens (https://huggingface.co/{repo}/tree/"
                     "main/t2i/clip_text_encoder; Li et al., arXiv 2405.08748)"),
        text_encoder("text_encoder_2", MT5_XL_256, fp16_bytes(256, 2048),
                     "mT5-XL encoder (24 layers, d_model 2048, 32 heads of 64, gated-GELU ff "
                     f"5120, vocab 250112), 256 tokens (https://huggingface.co/{repo}/tree/main/"
                     "t2i/mt5; https://huggingface.co/google/mt5-xl/blob/main/config.json)"),
    ]


def uvit_frozen() -> List[FrozenComponent]:
    return [vae_encoder("vae_encoder", 256, 256, 4, True, 1,
                        f"{SD_VAE}: the Stable Diffusion autoencoder U-ViT trains on "
                        "(baofff/U-ViT README, ImageNet 256 latents 4x32x32)")]


def svd_frozen() -> List[FrozenComponent]:
    repo = "stabilityai/stable-video-diffusion-img2vid-xt"
    return [
        vae_encoder("vae_encoder", 576, 1024, 4, True, 25,
                    f"{SD_VAE} on each of the clip's 25 frames at 576x1024 "
                    f"(AutoencoderKLTemporalDecoder's encoder is the 2D one): {_hf(repo, 'vae')}"),
        clip_vision_h("image_encoder",
                      "OpenCLIP ViT-H/14 vision tower on the conditioning frame at 224 px (32 "
                      "layers, width 1280, 16 heads, ff 5120, projection 1024): "
                      f"{_hf(repo, 'image_encoder')}"),
    ]


def component_json(comp: FrozenComponent, sizes: List[int],
                   times: Callable[[Layer, List[int]], Dict], r6) -> Dict:
    """The profile's `frozen[]` entry: forward seconds per microbatch size per device (the
    sum of its blocks'), weights, the working set and the output per sample."""
    forward: Dict[str, List[float]] = {}
    for block in comp.blocks:
        for device, ts in times(block, sizes)["forward_s"].items():
            acc = forward.setdefault(device, [0.0] * len(sizes))
            for i, t in enumerate(ts):
                acc[i] += t
    return {
        "name": comp.name,
        "kind": comp.kind,
        "params": comp.params,
        "weight_bytes": 2 * comp.params,
        "forward_s": {d: [r6(t) for t in ts] for d, ts in forward.items()},
        "activation_bytes_per_sample": FROZEN_WORKING_SET * comp.largest_tensor_bytes,
        "output_bytes_per_sample": comp.output_bytes,
        "forward_flops_per_sample": comp.forward_flops,
        "source": comp.source,
    }


def assumptions() -> List[str]:
    return [
        "Frozen components (`frozen`): derived analytically, not measured: parameters and "
        "FLOPs by formula from each component's published configuration (its `source`), "
        "block by block with the denoiser's accounting, and forward times by the same time "
        "model as the layers (the sum of its blocks' forward times at each microbatch size); "
        "weight_bytes = 2 x params (fp16/bf16, no gradient, no optimizer state); "
        f"activation_bytes_per_sample = {FROZEN_WORKING_SET} x the widest activation of one "
        "sample (transient: a forward without gradients keeps nothing); "
        "output_bytes_per_sample = what the step reads (the sampled latent, the text states "
        "it attends to, pooled vectors), fp16.",
    ]
