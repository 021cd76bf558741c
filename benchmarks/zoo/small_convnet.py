"""A plain small CNN classifier: two conv-BN-ReLU-maxpool stages and a linear head."""

import torch
from torch import nn


class SmallConvNet(nn.Module):
    """LeNet-style image classifier with batch norm, the 'hello world' of TinyML."""

    def __init__(self, in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.pool(self.features(image))
        return self.classifier(torch.flatten(features, 1))


def build_small_convnet() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    return model, (torch.randn(1, 3, 32, 32),)
