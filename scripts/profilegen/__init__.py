"""Analytic profile generator for pulse-plan.

Model profiles are derived from each architecture's published configuration (parameter
counts, forward FLOPs and activation bytes by formula) and a device time model; cluster
profiles from vendor topology and link figures. Nothing here is measured by the generator;
the measurements it fits to are cited where they are used. The figures
and their sources are in /work/shared/reference/models_hw.md (cited as "models_hw.md").

Modules:
  layers    the Layer record and the accounting helpers every architecture uses
  unet      Stable Diffusion 2 and SDXL UNets (diffusers UNet2DConditionModel)
  uvit      U-ViT (baofff/U-ViT libs/uvit.py)
  hunyuan   Hunyuan-DiT (Tencent/HunyuanDiT hydit/modules/models.py)
  flux      Flux.1 (diffusers FluxTransformer2DModel)
  datasheets  the one table of device figures (peaks, bandwidth, stack, aliases, sources)
  specs     the device spec object written into cluster and model profiles
  timing    the device time model and its constants (V100, 910A; the device side of the rest)
  anchors   the V100 and 910A public measurements and their fit
  hostfloor the time model of H100, H200, A100 and 910B: device side under a host floor
  measurements  every measurement those devices are fitted to (add new points here)
  calibrate the fits of those devices and what each profile says about them
  floorreport   their tables in docs/profiles.md
  catalog   which model profiles exist, with provenance, and their JSON form
  clusters  the cluster profiles
  summary   the markdown tables in docs/profiles.md
"""
