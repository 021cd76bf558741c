"""Two-level U-Net (Ronneberger et al. 2015) with concatenated skip connections."""

import torch
from torch import nn


def double_conv(in_channels: int, out_channels: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
        nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
    )


class UNetSkip(nn.Module):
    """Segmentation U-Net with two levels.

    Max-pool downsampling, nearest 2x upsampling, and encoder features
    concatenated onto the upsampled decoder features at each level.
    """

    def __init__(self, in_channels: int = 3, num_classes: int = 2):
        super().__init__()
        self.encoder1 = double_conv(in_channels, 8)
        self.encoder2 = double_conv(8, 16)
        self.bottleneck = double_conv(16, 32)
        self.downsample = nn.MaxPool2d(2)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        self.decoder2 = double_conv(32 + 16, 16)
        self.decoder1 = double_conv(16 + 8, 8)
        self.head = nn.Conv2d(8, num_classes, kernel_size=1)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        skip1 = self.encoder1(image)
        skip2 = self.encoder2(self.downsample(skip1))
        bottom = self.bottleneck(self.downsample(skip2))
        up2 = self.decoder2(torch.cat([self.upsample(bottom), skip2], dim=1))
        up1 = self.decoder1(torch.cat([self.upsample(up2), skip1], dim=1))
        return self.head(up1)


def build_unet_skip() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = UNetSkip().eval()
    return model, (torch.randn(1, 3, 32, 32),)
