"""Dense conv1d block: every layer reads the concatenation of all earlier feature maps (DenseNet connectivity in 1-D)."""

import torch
from torch import nn


class DenseConv1dBlock(nn.Module):
    """A DenseNet-style block over a sequence, as used in audio and sEMG encoders.

    Each layer is conv1d-BN-ReLU on the channel concatenation of the block's
    input and every earlier layer's output (growth rate channels each); the
    block returns the concatenation of all of them, then a 1x1 conv1d
    transition halves the channels.
    """

    def __init__(self, in_channels: int = 16, growth: int = 12, layers: int = 4, kernel_size: int = 3):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Sequential(
                nn.Conv1d(in_channels + i * growth, growth, kernel_size, padding=kernel_size // 2, bias=False),
                nn.BatchNorm1d(growth),
                nn.ReLU(),
            )
            for i in range(layers)
        )
        total = in_channels + layers * growth
        self.transition = nn.Conv1d(total, total // 2, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, dim=1)))
        return self.transition(torch.cat(features, dim=1))


def build_dense_conv1d() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = DenseConv1dBlock().eval()
    return model, (torch.randn(1, 16, 64),)
