"""DS-CNN keyword spotting (MLPerf Tiny KWS reference, shrunk)."""

import torch
from torch import nn


class DepthwiseSeparableBlock(nn.Module):
    """Depthwise 3x3 conv-BN-ReLU followed by pointwise conv-BN-ReLU."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1):
        super().__init__()
        self.depthwise = nn.Sequential(
            nn.Conv2d(
                in_channels,
                in_channels,
                kernel_size=3,
                stride=stride,
                padding=1,
                groups=in_channels,
                bias=False,
            ),
            nn.BatchNorm2d(in_channels),
            nn.ReLU(),
        )
        self.pointwise = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.pointwise(self.depthwise(features))


class DsCnnKws(nn.Module):
    """DS-CNN (Zhang et al. 2017) on a 49x10 MFCC map, 12 keyword classes.

    Same layout as the MLPerf Tiny reference (10x4 strided stem, four
    depthwise-separable blocks, average pool, linear), with 32 instead of
    64 channels.
    """

    def __init__(self, channels: int = 32, num_keywords: int = 12):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(
                1, channels, kernel_size=(10, 4), stride=2, padding=(5, 1), bias=False
            ),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
        )
        self.blocks = nn.Sequential(
            *(DepthwiseSeparableBlock(channels, channels) for _ in range(4))
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(channels, num_keywords)

    def forward(self, mfcc: torch.Tensor) -> torch.Tensor:
        features = self.pool(self.blocks(self.stem(mfcc)))
        return self.classifier(torch.flatten(features, 1))


def build_ds_cnn_kws() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = DsCnnKws().eval()
    return model, (torch.randn(1, 1, 49, 10),)
