"""Time-depth-separable (TDS) convolution blocks over an EMG feature sequence."""

import torch
from torch import nn


class TdsConvBlock(nn.Module):
    """TDS convolution block (Hannun et al. 2019, as used in emg2qwerty).

    The feature axis is viewed as `channels x width`, a conv runs over time
    only (kernel `1 x k`), and the result is added back and layer-normed.
    Works on sequences laid out as (batch, time, features).
    """

    def __init__(self, channels: int, width: int, kernel_size: int):
        super().__init__()
        self.channels = channels
        self.width = width
        self.conv = nn.Conv2d(
            channels,
            channels,
            kernel_size=(1, kernel_size),
            padding=(0, kernel_size // 2),
        )
        self.relu = nn.ReLU()
        self.norm = nn.LayerNorm(channels * width)

    def forward(self, sequence: torch.Tensor) -> torch.Tensor:
        batch, time, features = sequence.shape
        grid = sequence.permute(0, 2, 1).reshape(batch, self.channels, self.width, time)
        grid = self.relu(self.conv(grid))
        convolved = grid.reshape(batch, features, time).permute(0, 2, 1)
        return self.norm(convolved + sequence)


class TdsFullyConnectedBlock(nn.Module):
    """TDS fully connected block: two linears with a residual and layer norm."""

    def __init__(self, features: int):
        super().__init__()
        self.fc = nn.Sequential(
            nn.Linear(features, features), nn.ReLU(), nn.Linear(features, features)
        )
        self.norm = nn.LayerNorm(features)

    def forward(self, sequence: torch.Tensor) -> torch.Tensor:
        return self.norm(self.fc(sequence) + sequence)


class TdsConv1dEncoder(nn.Module):
    """emg2qwerty-style TDS encoder: projection, one TDS conv+FC pair, logits."""

    def __init__(
        self,
        emg_channels: int = 8,
        channels: int = 4,
        width: int = 8,
        num_classes: int = 16,
    ):
        super().__init__()
        features = channels * width
        self.projection = nn.Conv1d(emg_channels, features, kernel_size=1)
        self.blocks = nn.Sequential(
            TdsConvBlock(channels, width, kernel_size=5),
            TdsFullyConnectedBlock(features),
        )
        self.classifier = nn.Linear(features, num_classes)

    def forward(self, emg: torch.Tensor) -> torch.Tensor:
        sequence = self.projection(emg).permute(0, 2, 1)
        return self.classifier(self.blocks(sequence))


def build_tds_conv1d() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = TdsConv1dEncoder().eval()
    return model, (torch.randn(1, 8, 64),)
