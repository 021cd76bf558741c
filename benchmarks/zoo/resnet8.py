"""ResNet-8 for CIFAR-10 (MLPerf Tiny image classification reference, half width)."""

import torch
from torch import nn


class ResidualBlock(nn.Module):
    """Basic two-conv residual block; a strided 1x1 conv shortcut when shapes change."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(
                in_channels, out_channels, 3, stride=stride, padding=1, bias=False
            ),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
        )
        if stride == 1 and in_channels == out_channels:
            self.shortcut = nn.Identity()
        else:
            self.shortcut = nn.Conv2d(in_channels, out_channels, 1, stride=stride)
        self.relu = nn.ReLU()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(features) + self.shortcut(features))


class ResNet8(nn.Module):
    """Stem conv plus three residual stacks (8/16/32 channels instead of 16/32/64)."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU()
        )
        self.stacks = nn.Sequential(
            ResidualBlock(8, 8, stride=1),
            ResidualBlock(8, 16, stride=2),
            ResidualBlock(16, 32, stride=2),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.pool(self.stacks(self.stem(image)))
        return self.classifier(torch.flatten(features, 1))


def build_resnet8() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = ResNet8().eval()
    return model, (torch.randn(1, 3, 32, 32),)
