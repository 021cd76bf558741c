"""EMG gesture head with global max and average pooling over time, written with amax and mean."""

import torch
from torch import nn


class EmgGlobalPool(nn.Module):
    """A conv1d sEMG encoder whose head pools each channel over time twice.

    Two conv1d-BN-ReLU layers encode the 16-electrode signal; the head takes
    the maximum and the mean of each channel over the time axis (the
    innermost one of a (batch, channels, time) tensor) with `amax` and
    `mean`, as a user writes global max/avg pooling, and classifies their
    concatenation.
    """

    def __init__(self, emg_channels: int = 16, width: int = 48, num_gestures: int = 10):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv1d(emg_channels, width, kernel_size=5, padding=2, bias=False),
            nn.BatchNorm1d(width),
            nn.ReLU(),
            nn.Conv1d(width, width, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm1d(width),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(2 * width, num_gestures)

    def forward(self, emg: torch.Tensor) -> torch.Tensor:
        features = self.encoder(emg)
        pooled = torch.cat([features.amax(dim=-1), features.mean(dim=-1)], dim=1)
        return self.classifier(pooled)


def build_emg_global_pool() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = EmgGlobalPool().eval()
    return model, (torch.randn(1, 16, 96),)
