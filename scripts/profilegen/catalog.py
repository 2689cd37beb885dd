"""The model profiles this repository ships, and their pulse.model/v1 JSON form."""

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from . import anchors, calibrate, frozen, hostfloor, specs, timing
from .flux import FLUX1_DEV, build_flux
from .hunyuan import HUNYUAN_DIT_G2, build_hunyuan
from .layers import Architecture
from .unet import SD2_UNET, SDXL_UNET, build_unet
from .svd import SVD_XT_UNET, build_svd
from .uvit import UVIT_H2, UVIT_L2, build_uvit
from .video import (HUNYUAN_VIDEO_T2, OPEN_SORA_2, WAN21_T2V_14B, build_video_mmdit, build_wan,
                    video_tokens)

GENERATOR = "scripts/gen_profiles.py"
REFERENCE_NOTES = ("models_hw.md: pulse-plan shared reference (architecture figures, FLOP "
                   "formulas, saved-activation counts, efficiency defaults, hardware numbers)")
DEVICE_REFERENCES = [
    "NVIDIA Tesla V100 SXM2 datasheet: 125 TFLOPS fp16 tensor, 900 GB/s HBM2",
    "Huawei Ascend 910, Hot Chips 31 (2019): 256 TFLOPS fp16 cube, 32 GB HBM2",
]
DIFFUSERS_UNET = ("https://github.com/huggingface/diffusers/blob/main/src/diffusers/models/"
                  "unets/unet_2d_condition.py (with unet_2d_blocks.py, resnet.py, "
                  "transformers/transformer_2d.py, attention.py)")
HUNYUAN_CODE = ("https://github.com/Tencent/HunyuanDiT/blob/main/hydit/modules/models.py "
                "(with attn_layers.py, poolers.py, embedders.py)")


def r6(x: float) -> float:
    """Six significant digits: stable, diff-friendly numbers."""
    return float(f"{x:.6g}")


@dataclass
class ModelSpec:
    name: str
    description: str
    build: Callable[[], Architecture]
    microbatch_sizes: List[int]
    references: List[str]
    assumptions: List[str]
    anchored: bool = False  # a public measurement of this model sets its times (anchors.py)
    folder: str = ""  # under profiles/models ("video/": not in the corpus of every model)
    # The frozen encoders its training step runs (frozen.py), the profile's `frozen` list.
    frozen: Optional[Callable[[], List["frozen.FrozenComponent"]]] = None


def _sd2_spec(px: int, repo: str) -> ModelSpec:
    side = px // 8
    return ModelSpec(
        name=f"sd2-unet-{px}",
        description=(f"Stable Diffusion 2 UNet (diffusers UNet2DConditionModel) at {px} px "
                     f"(latent 4x{side}x{side}), one layer per diffusers block."),
        build=lambda: build_unet(SD2_UNET, side),
        microbatch_sizes=[1, 2, 4, 8, 16, 32],
        references=[f"https://huggingface.co/{repo}/blob/main/unet/config.json",
                    DIFFUSERS_UNET, REFERENCE_NOTES + ", section 1"],
        assumptions=[
            "One layer per ResnetBlock2D, Transformer2DModel (named attn), Downsample2D and "
            "Upsample2D; conv_out is conv_norm_out + SiLU + conv_out.",
            "time_embedding's output_bytes_per_sample is the latent that passes by it.",
            "Carried: temb (1280 fp16) from time_embedding, trained, so its gradient returns; "
            "text_context (77 x 1024 fp16, OpenCLIP-H) comes with the batch from the frozen "
            "text encoder, no gradient.",
            "The VAE encoder and the text encoder are frozen: `frozen` lists them, and the "
            "planner places their forwards (cached offline, before the step, or in the "
            "pipeline's bubbles).",
        ],
        anchored=True,
        frozen=lambda: frozen.sd2_frozen(px, repo),
    )


def _sdxl_spec() -> ModelSpec:
    return ModelSpec(
        name="sdxl-unet-1024",
        description=("SDXL base UNet at 1024 px (latent 4x128x128), one layer per diffusers "
                     "block; each Transformer2DModel (1, 2 or 10 transformer layers) is one "
                     "layer."),
        build=lambda: build_unet(SDXL_UNET, 128),
        microbatch_sizes=[1, 2, 4, 8],
        references=["https://huggingface.co/stabilityai/stable-diffusion-xl-base-1.0/blob/main/"
                    "unet/config.json", DIFFUSERS_UNET, REFERENCE_NOTES + ", section 2"],
        assumptions=[
            "add_embedding (text_time: pooled text 1280 + 6 x 256 size/crop ids) is part of "
            "the time_embedding layer.",
            "time_embedding's output_bytes_per_sample is the latent that passes by it.",
            "Carried: temb (1280 fp16) from time_embedding, with gradient; text_context "
            "(77 x 2048 fp16, CLIP-L + OpenCLIP-bigG) with the batch, no gradient.",
            "The VAE encoder and both text encoders are frozen: `frozen` lists them.",
        ],
        frozen=frozen.sdxl_frozen,
    )


def _uvit_spec(size: str, cfg, config_file: str) -> ModelSpec:
    return ModelSpec(
        name=f"uvit-{size.lower()}2-256",
        description=(f"U-ViT-{size}/2 on ImageNet 256 px latents (4x32x32, 258 tokens), "
                     "one layer per transformer block."),
        build=lambda: build_uvit(cfg),
        microbatch_sizes=[1, 2, 4, 8, 16, 32],
        references=["https://github.com/baofff/U-ViT/blob/main/libs/uvit.py",
                    f"https://github.com/baofff/U-ViT/blob/main/configs/{config_file}",
                    "Bao et al., All are Worth Words: A ViT Backbone for Diffusion Models, "
                    "arXiv 2209.12152", REFERENCE_NOTES + ", section 4"],
        assumptions=[
            "Time and class label are tokens of the sequence, so nothing is carried.",
            "out{i} concatenates the output of in{n-1-i} and applies skip_linear (2D -> D).",
            "The published configs set use_checkpoint=True; this profile assumes no "
            "activation checkpointing (the planner may add it).",
            "The VAE encoder is frozen (`frozen`); class labels need no text encoder.",
        ],
        frozen=frozen.uvit_frozen,
    )


def _hunyuan_spec(px: int, sizes: List[int]) -> ModelSpec:
    side = px // 8
    return ModelSpec(
        name=f"hunyuan-dit-g2-{px}",
        description=(f"Hunyuan-DiT-g/2 at {px} px ({(side // 2) ** 2} tokens), 40 blocks plus "
                     "embedders and final layer as their own layers."),
        build=lambda: build_hunyuan(HUNYUAN_DIT_G2, side),
        microbatch_sizes=sizes,
        references=[HUNYUAN_CODE, "Li et al., Hunyuan-DiT, arXiv 2405.08748",
                    REFERENCE_NOTES + ", section 3"],
        assumptions=[
            "HunyuanDiT v1.0 layout: image-size and style conditions on (extra_embedder "
            "input 1024 + 6 x 256 + 1408), qk-norm, learn_sigma (8 output channels).",
            "block j (j = 21..39) concatenates the output of block 39-j, then skip_norm and "
            "skip_linear; blocks 19 and 20 neither push nor pop.",
            "Carried: cond (1408 fp16) from cond_embedding and text_states (333 x 1024 fp16) "
            "from text_embedding; both come from trained layers, so both have gradients.",
            "cond_embedding's output_bytes_per_sample is the latent plus the raw CLIP "
            "(77 x 1024) and mT5 (256 x 2048) states that text_embedding still needs; the RoPE "
            "tables are parameter-free and recomputed on every stage.",
            "The VAE encoder and both text encoders (CLIP, mT5) are frozen: `frozen` lists "
            "them.",
        ],
        frozen=lambda: frozen.hunyuan_frozen(px),
    )


def _flux_spec() -> ModelSpec:
    return ModelSpec(
        name="flux1-dev-1024",
        description=("Flux.1-dev transformer at 1024 px (4096 image + 512 text tokens): 19 "
                     "double-stream and 38 single-stream blocks plus embedders and head."),
        build=lambda: build_flux(FLUX1_DEV, 128),
        microbatch_sizes=[1, 2, 4],
        references=["https://huggingface.co/black-forest-labs/FLUX.1-dev/blob/main/transformer/"
                    "config.json", "https://github.com/huggingface/diffusers/blob/main/src/"
                    "diffusers/models/transformers/transformer_flux.py",
                    REFERENCE_NOTES + ", section 5"],
        assumptions=[
            "No long skips. The main path through the double blocks is the image and the text "
            "stream together (4608 x 3072 fp16), which the single blocks carry as one sequence.",
            "Carried: temb (3072 fp16) from time_text_embed (timestep, guidance and pooled CLIP "
            "MLPs), with gradient. The T5 states enter the main path at context_embedder, so "
            "they are not carried; the RoPE tables are parameter-free and recomputed per stage.",
            "The guidance embedder is included (FLUX.1-dev is guidance-distilled).",
            "The VAE encoder and both text encoders (CLIP-L, T5-XXL) are frozen: `frozen` "
            "lists them.",
        ],
        frozen=frozen.flux_frozen,
    )


DIFFUSERS_SVD = ("https://github.com/huggingface/diffusers/blob/"
                 "0697725befb38a1a6aa39bc88ce8cb39c80931dc/src/diffusers/models/unets/"
                 "unet_spatio_temporal_condition.py (with unet_3d_blocks.py, resnet.py, "
                 "transformers/transformer_temporal.py, attention.py)")


def _svd_spec() -> ModelSpec:
    frames = SVD_XT_UNET["num_frames"]
    return ModelSpec(
        name="svd-xt-unet-576x1024",
        description=(f"Stable Video Diffusion XT spatio-temporal UNet (diffusers "
                     f"UNetSpatioTemporalConditionModel), {frames} frames at 576x1024 (latent "
                     f"8x72x128 per frame); one sample is one clip; one layer per diffusers "
                     "block."),
        build=lambda: build_svd(SVD_XT_UNET, 72, 128),
        microbatch_sizes=[1, 2, 4],
        references=["https://huggingface.co/stabilityai/stable-video-diffusion-img2vid-xt/"
                    "blob/main/unet/config.json",
                    "https://huggingface.co/stabilityai/stable-video-diffusion-img2vid-xt "
                    "(model card: 25 frames at 576x1024)",
                    DIFFUSERS_SVD,
                    "Blattmann et al., Stable Video Diffusion, arXiv 2311.15127",
                    "Parameter count 1,524,623,082: Gosselin et al., Ctrl-Crash, arXiv "
                    "2506.00227v2, Table G.6 (the SVD UNet it fine-tunes)"],
        assumptions=[
            "One layer per SpatioTemporalResBlock (named resnet), TransformerSpatioTemporalModel "
            "(named attn), Downsample2D and Upsample2D; conv_out is conv_norm_out + SiLU + "
            "conv_out. Skips as in the SD UNet, each tensor carrying all frames.",
            "Spatial layers see the frames as a batch; FLOP classes by the per-frame map "
            "(small_spatial at 16x16 = 256 positions or fewer, e.g. the 9x16 level).",
            "A (3,1,1) temporal convolution costs 2*3*Cin*Cout per position and frame; "
            "temporal attention is over the 25 frames of each position.",
            "time_embedding's output_bytes_per_sample is the clip's 8-channel input (noisy "
            "latents and the conditioning frame's latent) that passes by it.",
            "Carried: temb (1280 fp16, once per clip) from time_embedding, trained, so its "
            "gradient returns; image_context (1 x 1024 fp16, the frozen CLIP image "
            "embedding) with the batch, no gradient. image_only_indicator (zeros) is left "
            "out.",
            "The VAE and CLIP image encoder are frozen: `frozen` lists them.",
            "Saved activations: the per-op rule of the 2D UNet applied to every frame, plus "
            "the temporal blocks (ResnetBlock 3*(2*C)*HW per frame, TemporalBasicTransformer"
            "Block 42*C per token beyond the spatial block's 28*C) and the blends' two "
            "inputs; no activation checkpointing, which published SVD fine-tuning scripts "
            "usually enable (the planner does not add it).",
        ],
        frozen=frozen.svd_frozen,
    )


VIDEO_FOLDER = "video/"
VIDEO_SEQUENCE = (
    "Sequence: VAE stride (4, 8, 8) (the first frame kept: (F - 1) / 4 + 1 latent frames of "
    "H/8 x W/8) and patch (1, 2, 2), so (F - 1) / 4 + 1 x H/16 x W/16 video tokens. Attention "
    "is counted as its core, 4 * Lq * Lk * C forward FLOPs per sample (flash attention: no "
    "L x L matrix is kept), so its cost grows with the square of the sequence; each block's "
    "`sequence` states the tokens, heads, head width and that core's FLOPs, which the "
    "sequence-parallel cost model (Ulysses, ring) reads.")
VIDEO_FROZEN = (
    "The VAE and the text encoders are frozen and left out (latents and text states "
    "precomputed, as Open-Sora's stage2_cache.py caches them); a frozen-encoder placement "
    "would need their profiles as components, which this profile does not have.")
VIDEO_METHOD = (
    "Derived analytically, not measured: parameters, FLOPs and saved activations by formula "
    "from the published configuration, times by the time model below; no measurement of this "
    "model anchors them.")


def _video_spec(name: str, what: str, build, frames: int, height: int, width: int,
                references: List[str], assumptions: List[str]) -> ModelSpec:
    tokens = video_tokens(frames, height, width)
    return ModelSpec(
        name=name,
        description=(f"{what} at {frames} frames of {height}x{width} ({tokens} video tokens); "
                     "one layer per block plus embedders and head."),
        build=lambda: build(frames, height, width),
        microbatch_sizes=[1, 2],
        references=references + [REFERENCE_NOTES],
        assumptions=[VIDEO_METHOD, VIDEO_SEQUENCE] + assumptions + [VIDEO_FROZEN],
        folder=VIDEO_FOLDER,
    )


def _video_specs() -> List[ModelSpec]:
    return [
        _video_spec(
            "wan2.1-t2v-14b-81x720x1280", "Wan 2.1 T2V 14B transformer",
            lambda f, h, w: build_wan(WAN21_T2V_14B, f, h, w), 81, 720, 1280,
            ["https://github.com/Wan-Video/Wan2.1/blob/main/wan/configs/wan_t2v_14B.py "
             "(dim 5120, ffn_dim 13824, 40 heads, 40 layers, patch (1, 2, 2), vae_stride "
             "(4, 8, 8)) and shared_config.py (text_len 512)",
             "https://github.com/Wan-Video/Wan2.1/blob/main/wan/modules/model.py (WanModel, "
             "WanAttentionBlock, Head)",
             "Wan Team, Wan: Open and Advanced Large-Scale Video Generative Models, arXiv "
             "2503.20314 (81 frames at 720p; FSDP + 2-D context parallelism, Ulysses x ring)"],
            ["Training shape: 81 frames at 720x1280, Wan 2.1's 720p clip (21 x 45 x 80 tokens).",
             "Carried: time_embeddings (e and e0, 7 x 5120 fp16) from time_embedding and "
             "context (512 x 5120 fp16) from text_embedding, both trained, so both have "
             "gradients; the RoPE tables are parameter-free and recomputed per stage.",
             "Cross-attention's keys and values are the 512 text tokens: a sequence-parallel "
             "layout splits the video tokens only, so it moves nothing."]),
        _video_spec(
            "hunyuanvideo-t2v-13b-129x720x1280", "HunyuanVideo T2V 13B transformer",
            lambda f, h, w: build_video_mmdit(HUNYUAN_VIDEO_T2, f, h, w), 129, 720, 1280,
            ["https://github.com/Tencent/HunyuanVideo/blob/main/hyvideo/modules/models.py "
             "(HUNYUAN_VIDEO_CONFIG HYVideo-T/2-cfgdistill: 20 double, 40 single blocks, "
             "hidden 3072, 24 heads, mlp ratio 4, rope [16, 56, 56], guidance embedding)",
             "Kong et al., HunyuanVideo: A Systematic Framework For Large Video Generative "
             "Models, arXiv 2412.03603 (129 frames at 720p; 884 causal VAE, 16 channels)"],
            ["Training shape: 129 frames at 720x1280 (33 x 45 x 80 tokens), 256 text tokens.",
             "The Flux layout (flux.py's blocks): img_in as one GEMM of 64 -> 3072 per token "
             "(16 channels x patch 1 x 2 x 2); txt_in's two-block SingleTokenRefiner over the "
             "256 text tokens is counted as its input projection only (its blocks are left "
             "out: under 1% of the FLOPs at this sequence).",
             "Carried: temb (3072 fp16) from time_text_embed, with gradient."]),
        _video_spec(
            "open-sora-2.0-11b-129x768x768", "Open-Sora 2.0 11B MMDiT",
            lambda f, h, w: build_video_mmdit(OPEN_SORA_2, f, h, w), 129, 768, 768,
            ["https://github.com/hpcaitech/Open-Sora/blob/main/configs/diffusion/train/"
             "image.py (model type flux: in_channels 64, hidden 3072, 24 heads, depth 19, "
             "depth_single_blocks 38, guidance_embed False; t5 max_length 512; hunyuan_vae "
             "16 latent channels)",
             "https://github.com/hpcaitech/Open-Sora/blob/main/configs/diffusion/train/"
             "stage2.py (768px buckets up to 129 frames; sp_size 4 ring attention, ZeRO-2)",
             "Peng et al., Open-Sora 2.0: Training a Commercial-Level Video Generation Model "
             "in $200k, arXiv 2503.09642"],
            ["Training shape: stage 2's longest 768px bucket, 129 frames, taken as 768x768 "
             "(33 x 48 x 48 tokens), 512 text tokens.",
             "The Flux layout (flux.py's blocks) without the guidance embedder.",
             "Carried: temb (3072 fp16) from time_text_embed, with gradient."]),
    ]


def model_specs() -> List[ModelSpec]:
    return [
        _sd2_spec(512, "stabilityai/stable-diffusion-2-1-base"),
        _sd2_spec(768, "stabilityai/stable-diffusion-2-1"),
        _sdxl_spec(),
        _uvit_spec("L", UVIT_L2, "imagenet256_uvit.py"),
        _uvit_spec("H", UVIT_H2, "imagenet256_uvit_huge.py"),
        _hunyuan_spec(1024, [1, 2, 4, 8]),
        _hunyuan_spec(512, [1, 2, 4, 8, 16]),
        _flux_spec(),
        _svd_spec(),
    ] + _video_specs()


def device_types() -> List[str]:
    """V100 and 910A (timing.py) first, then the host-floor devices (hostfloor.py)."""
    return [d.name for d in timing.DEVICES] + list(calibrate.devices())


def _times(layer, sizes: List[int]) -> Dict[str, Dict[str, List[float]]]:
    times = timing.profile_times(layer, sizes)
    for name, dev in calibrate.devices().items():
        pairs = [hostfloor.layer_times(layer, dev, b) for b in sizes]
        times["forward_s"][name] = [f for f, _ in pairs]
        times["backward_s"][name] = [g for _, g in pairs]
    return times


def _layer_json(layer, sizes: List[int]) -> Dict:
    times = _times(layer, sizes)
    out = {
        "name": layer.name,
        "kind": layer.kind,
        "params": layer.params,
        "forward_s": {d: [r6(t) for t in ts] for d, ts in times["forward_s"].items()},
        "backward_s": {d: [r6(t) for t in ts] for d, ts in times["backward_s"].items()},
        "backward_weight_fraction": r6(timing.weight_fraction(layer, sizes)),
        "activation_bytes_per_sample": timing.activation_bytes(layer),
        "output_bytes_per_sample": layer.out_bytes,
        "forward_flops_per_sample": layer.forward_flops,
    }
    if layer.sequence is not None:
        out["sequence"] = dict(layer.sequence)
    return out


def model_profile(spec: ModelSpec) -> Dict:
    arch = spec.build()
    order = {layer.name: i for i, layer in enumerate(arch.layers)}
    skips = sorted(arch.skips, key=lambda s: (order[s.producer], order[s.consumer]))
    profile = {
        "schema": "pulse.model/v1",
        "name": spec.name,
        "description": spec.description,
        "provenance": {
            "method": "analytic",
            "source": ("Analytic, anchored to measurements: parameter counts, forward FLOPs, "
                       "activation bytes and kernel counts computed by formula from the "
                       "published configuration; times from each device's peak FLOPS and HBM "
                       "bandwidth times efficiencies fitted to Stable Diffusion UNet "
                       "measurements (public throughput; on H100/H200 our own bf16 eager "
                       "measurements), under a host/launch floor on H100, H200, A100 and "
                       "910B (regime, calibration and time-range lines below)."),
            "generator": GENERATOR,
            "references": (spec.references + DEVICE_REFERENCES + anchors.references()
                           + calibrate.references()),
            "assumptions": (spec.assumptions + calibrate.regime_lines() + timing.assumptions()
                            + anchors.calibration_lines() + calibrate.constants_lines()
                            + calibrate.point_lines() + anchors.range_lines(spec.anchored)
                            + calibrate.range_lines(spec.anchored)),
        },
        "dtype": "fp16",
        "timing": {"microbatch_sizes": list(spec.microbatch_sizes),
                   "device_types": device_types(),
                   "device_specs": {d: specs.spec_json(d) for d in device_types()}},
        "layers": [_layer_json(layer, spec.microbatch_sizes) for layer in arch.layers],
        "skips": [{"producer": s.producer, "consumer": s.consumer,
                   "bytes_per_sample": s.bytes_per_sample} for s in skips],
        "carried": [{"name": c.name, "producer": c.producer,
                     "bytes_per_sample": c.bytes_per_sample,
                     "needs_gradient": c.needs_gradient} for c in arch.carried],
    }
    if spec.frozen is not None:
        profile["provenance"]["assumptions"] += frozen.assumptions()
        profile["frozen"] = [frozen.component_json(c, spec.microbatch_sizes, _times, r6)
                             for c in spec.frozen()]
    return profile
