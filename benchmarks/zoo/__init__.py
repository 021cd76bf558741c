"""Model zoo of small int8-quantizable networks that Ethos-U users deploy.

Every model lowers fully (no CPU fallback) for ethos-u55-128 and
ethos-u85-256; `python -m benchmarks.zoo._check_delegation` verifies this.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from benchmarks.zoo.attention_permute import build_attention_permute
from benchmarks.zoo.band_split_frontend import build_band_split_frontend
from benchmarks.zoo.bandwise_mlp import build_bandwise_mlp
from benchmarks.zoo.conformer_block import build_conformer_block
from benchmarks.zoo.dense_conv1d import build_dense_conv1d
from benchmarks.zoo.ds_cnn_kws import build_ds_cnn_kws
from benchmarks.zoo.emg_conv1d_stem import build_emg_conv1d_stem
from benchmarks.zoo.emg_fusion import build_emg_fusion
from benchmarks.zoo.emg_global_pool import build_emg_global_pool
from benchmarks.zoo.emg_gru_gesture import build_emg_gru_gesture
from benchmarks.zoo.emg_recurrent_decoder import build_emg_recurrent_decoder
from benchmarks.zoo.fc_autoencoder import build_fc_autoencoder
from benchmarks.zoo.library_models import (
    build_transformer_decoder_layer,
    build_tv_efficientnet_b0,
    build_tv_mnasnet,
    build_tv_mobilenet_v2,
    build_tv_regnet_x_400mf,
    build_tv_squeezenet,
)
from benchmarks.zoo.mobilenet_v1_vww import build_mobilenet_v1_vww, build_mobilenet_v1_vww_96
from benchmarks.zoo.mobilevit_attention import build_mobilevit_attention
from benchmarks.zoo.resnet8 import build_resnet8
from benchmarks.zoo.shufflenet_v2 import build_shufflenet_v2
from benchmarks.zoo.small_convnet import build_small_convnet
from benchmarks.zoo.tds_conv1d import build_tds_conv1d
from benchmarks.zoo.unet_skip import build_unet_skip

Builder = Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    description: str
    builder: Builder = field(repr=False, compare=False)

    def build(self) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        """Return the model in eval mode and its seeded example inputs."""
        return self.builder()

    @property
    def spec(self) -> str:
        """The builder spec `eqsat bench` takes: `module:function`."""
        return f"{self.builder.__module__}:{self.builder.__name__}"


_SPECS = (
    ModelSpec(
        "emg-conv1d-stem",
        "emg",
        "Strided conv1d-BN-ReLU stem over 8-channel sEMG, pooled gesture head",
        build_emg_conv1d_stem,
    ),
    ModelSpec(
        "tds-conv1d",
        "emg",
        "emg2qwerty-style time-depth-separable conv and FC blocks with layer norm",
        build_tds_conv1d,
    ),
    ModelSpec(
        "emg-branch-fusion",
        "emg",
        "EMG and IMU conv1d branches concatenated along channels, then fused",
        build_emg_fusion,
    ),
    ModelSpec(
        "conformer-block",
        "emg",
        "Conformer-style layer: fused-qkv MHSA with head permutes, GLU conv module",
        build_conformer_block,
    ),
    ModelSpec(
        "emg-recurrent-decoder",
        "emg",
        "Strided conv1d EMG encoder, gated recurrent cell unrolled over 4 steps",
        build_emg_recurrent_decoder,
    ),
    ModelSpec(
        "emg-gru-gesture",
        "emg",
        "Two-layer GRU (explicit gates) unrolled over 8 frames, hoisted input projections sliced per step, layer norm",
        build_emg_gru_gesture,
    ),
    ModelSpec(
        "bandwise-mlp",
        "emg",
        "Per-band MLPs over 16 electrode bands, circular band shift as slice + cat, layer norm",
        build_bandwise_mlp,
    ),
    ModelSpec(
        "band-split-frontend",
        "emg",
        "Band-split spectrogram front end: 5-D band views, neighbour bands concatenated by shifts, band selection by slicing",
        build_band_split_frontend,
    ),
    ModelSpec(
        "emg-global-pool",
        "emg",
        "Conv1d sEMG encoder, global max and average pooling over time with amax/mean (innermost reductions)",
        build_emg_global_pool,
    ),
    ModelSpec(
        "dense-conv1d",
        "emg",
        "DenseNet-style conv1d block: each conv1d reads the concat of all earlier feature maps, 1x1 transition",
        build_dense_conv1d,
    ),
    ModelSpec(
        "ds-cnn-kws",
        "mlperf-tiny",
        "DS-CNN keyword spotting on 49x10 MFCCs, 32 channels",
        build_ds_cnn_kws,
    ),
    ModelSpec(
        "mobilenet-v1-025-vww",
        "mlperf-tiny",
        "MobileNetV1-0.25 visual wake words on 32x32 images",
        build_mobilenet_v1_vww,
    ),
    ModelSpec(
        "mobilenet-v1-025-vww-96",
        "mlperf-tiny",
        "MobileNetV1-0.25 visual wake words on 96x96 images (the reference resolution)",
        build_mobilenet_v1_vww_96,
    ),
    ModelSpec(
        "resnet8",
        "mlperf-tiny",
        "CIFAR-style ResNet-8 at half width (8/16/32 channels)",
        build_resnet8,
    ),
    ModelSpec(
        "fc-autoencoder",
        "mlperf-tiny",
        "Dense anomaly-detection autoencoder, 160 inputs, 8-d bottleneck",
        build_fc_autoencoder,
    ),
    ModelSpec(
        "shufflenet-v2",
        "layout",
        "ShuffleNet-v2 units: channel split, concat, reshape-transpose-reshape shuffle",
        build_shufflenet_v2,
    ),
    ModelSpec(
        "unet-skip",
        "layout",
        "Two-level U-Net with nearest upsampling and concatenated skips",
        build_unet_skip,
    ),
    ModelSpec(
        "mobilevit-patch-attention",
        "layout",
        "MobileViT block: unfold to patches, attention, fold back, fuse",
        build_mobilevit_attention,
    ),
    ModelSpec(
        "attention-permute",
        "layout",
        "Multi-head self-attention on a feature map via flatten/permute to tokens",
        build_attention_permute,
    ),
    ModelSpec(
        "small-convnet",
        "basic",
        "Plain two-stage conv-BN-ReLU-maxpool classifier",
        build_small_convnet,
    ),
)

LIBRARY_SPECS = (
    ModelSpec("tv-mobilenet-v2", "library", "torchvision MobileNetV2, width 0.35, 96x96, 2 classes", build_tv_mobilenet_v2),
    ModelSpec("tv-mnasnet", "library", "torchvision MNASNet 0.5, 96x96, 2 classes", build_tv_mnasnet),
    ModelSpec("tv-squeezenet", "library", "torchvision SqueezeNet 1.1, 64x64, 10 classes", build_tv_squeezenet),
    ModelSpec("tv-efficientnet-b0", "library", "torchvision EfficientNet-B0, 64x64, 10 classes", build_tv_efficientnet_b0),
    ModelSpec("tv-regnet-x-400mf", "library", "torchvision RegNetX-400MF, 64x64, 10 classes", build_tv_regnet_x_400mf),
    ModelSpec(
        "nn-transformer-decoder",
        "library",
        "torch.nn.TransformerDecoderLayer, d_model 64, 4 heads, 16 target and 24 memory tokens",
        build_transformer_decoder_layer,
    ),
)
"""Architectures as their libraries define them (benchmarks/zoo/library_models.py), with seeded random weights."""

ZOO: dict[str, ModelSpec] = {spec.name: spec for spec in (*_SPECS, *LIBRARY_SPECS)}


def get(name: str) -> ModelSpec:
    """Return the spec called `name`; a KeyError for an unknown name lists all names."""
    try:
        return ZOO[name]
    except KeyError:
        raise KeyError(
            f"unknown model {name!r}; known models: {', '.join(ZOO)}"
        ) from None
