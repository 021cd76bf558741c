"""MobileNetV1-0.25 for visual wake words (MLPerf Tiny VWW reference, shrunk)."""

import torch
from torch import nn


def conv_bn_relu(
    in_channels: int, out_channels: int, kernel_size: int, stride: int, groups: int = 1
) -> nn.Sequential:
    return nn.Sequential(
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
        nn.ReLU6(),
    )


def depthwise_separable(
    in_channels: int, out_channels: int, stride: int
) -> nn.Sequential:
    return nn.Sequential(
        conv_bn_relu(in_channels, in_channels, 3, stride, groups=in_channels),
        conv_bn_relu(in_channels, out_channels, 1, 1),
    )


class MobileNetV1Vww(nn.Module):
    """MobileNetV1-0.25 (Howard et al. 2017): the first six stages at quarter width.

    The VWW reference runs at 96x96; this version takes 32x32 images and stops
    at 64 channels to stay small, keeping the ReLU6 activations and the
    person / no-person head.
    """

    def __init__(self, num_classes: int = 2):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn_relu(3, 8, 3, stride=2),
            depthwise_separable(8, 16, stride=1),
            depthwise_separable(16, 32, stride=2),
            depthwise_separable(32, 32, stride=1),
            depthwise_separable(32, 64, stride=2),
            depthwise_separable(64, 64, stride=1),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(64, num_classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.pool(self.features(image))
        return self.classifier(torch.flatten(features, 1))


def build_mobilenet_v1_vww() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = MobileNetV1Vww().eval()
    return model, (torch.randn(1, 3, 32, 32),)


def build_mobilenet_v1_vww_96() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The same network at the VWW reference resolution: a 3-channel 96x96 image at the graph input,
    whose NCHW -> NHWC transpose is memory-bound when its innermost dimension is 3."""
    torch.manual_seed(0)
    model = MobileNetV1Vww().eval()
    return model, (torch.randn(1, 3, 96, 96),)
