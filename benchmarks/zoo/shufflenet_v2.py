"""ShuffleNet-v2 (Ma et al. 2018) units: channel split, concat, channel shuffle."""

import torch
from torch import nn


def channel_shuffle(features: torch.Tensor, groups: int) -> torch.Tensor:
    """Interleave channel groups via reshape -> transpose -> reshape."""
    batch, channels, height, width = features.shape
    grouped = features.reshape(batch, groups, channels // groups, height, width)
    return grouped.transpose(1, 2).reshape(batch, channels, height, width)


def conv_bn(
    in_channels: int,
    out_channels: int,
    kernel_size: int,
    stride: int = 1,
    groups: int = 1,
    relu: bool = True,
) -> nn.Sequential:
    layers = [
        nn.Conv2d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=kernel_size // 2,
            groups=groups,
            bias=False,
        ),
        nn.BatchNorm2d(out_channels),
    ]
    if relu:
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def branch(in_channels: int, out_channels: int, stride: int) -> nn.Sequential:
    """The 1x1 -> depthwise 3x3 -> 1x1 branch shared by both unit types."""
    return nn.Sequential(
        conv_bn(in_channels, out_channels, 1),
        conv_bn(
            out_channels,
            out_channels,
            3,
            stride=stride,
            groups=out_channels,
            relu=False,
        ),
        conv_bn(out_channels, out_channels, 1),
    )


class BasicUnit(nn.Module):
    """Stride-1 unit: split channels in half, transform one half, concat, shuffle."""

    def __init__(self, channels: int):
        super().__init__()
        self.branch = branch(channels // 2, channels // 2, stride=1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        shortcut, residual = features.chunk(2, dim=1)
        merged = torch.cat([shortcut, self.branch(residual)], dim=1)
        return channel_shuffle(merged, groups=2)


class DownsampleUnit(nn.Module):
    """Stride-2 unit: two strided branches on the full input, concat, shuffle."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        half = out_channels // 2
        self.left = nn.Sequential(
            conv_bn(
                in_channels, in_channels, 3, stride=2, groups=in_channels, relu=False
            ),
            conv_bn(in_channels, half, 1),
        )
        self.right = branch(in_channels, half, stride=2)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        merged = torch.cat([self.left(features), self.right(features)], dim=1)
        return channel_shuffle(merged, groups=2)


class ShuffleNetV2(nn.Module):
    """Tiny ShuffleNet-v2: stem conv, a downsample unit and a basic unit, head."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.stem = conv_bn(3, 16, 3, stride=2)
        self.stage = nn.Sequential(DownsampleUnit(16, 32), BasicUnit(32))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.pool(self.stage(self.stem(image)))
        return self.classifier(torch.flatten(features, 1))


def build_shufflenet_v2() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = ShuffleNetV2().eval()
    return model, (torch.randn(1, 3, 32, 32),)
