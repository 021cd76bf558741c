"""EMG conv1d stem: strided temporal convolutions over raw surface-EMG channels."""

import torch
from torch import nn


class EmgConv1dStem(nn.Module):
    """Front end of wristband surface-EMG gesture decoders.

    Two strided conv1d-BN-ReLU layers downsample the 8-electrode signal in
    time, then a mean over time and a linear layer classify the gesture. (The
    mean stands in for AdaptiveAvgPool1d, which the Arm backend leaves on the
    CPU as unsqueeze + avg_pool2d + squeeze.)
    """

    def __init__(self, emg_channels: int = 8, num_gestures: int = 9):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv1d(emg_channels, 16, kernel_size=5, stride=2, padding=2, bias=False),
            nn.BatchNorm1d(16),
            nn.ReLU(),
            nn.Conv1d(16, 32, kernel_size=3, stride=2, padding=1, bias=False),
            nn.BatchNorm1d(32),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(32, num_gestures)

    def forward(self, emg: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.stem(emg).mean(dim=-1))


def build_emg_conv1d_stem() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = EmgConv1dStem().eval()
    return model, (torch.randn(1, 8, 64),)
