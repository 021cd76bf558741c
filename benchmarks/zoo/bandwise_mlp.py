"""Band-wise MLP over electrode bands with a circular band shift, keyboard-decoder (TDS) style."""

import torch
from torch import nn


def roll_bands(x: torch.Tensor, shift: int) -> torch.Tensor:
    """torch.roll(x, shift, dims=2) written as two slices and a concat, as exported models often spell it."""
    bands = x.shape[2]
    cut = (-shift) % bands
    return torch.cat([x[:, :, cut:], x[:, :, :cut]], dim=2)


class BandwiseMlp(nn.Module):
    """Per-band MLPs over a (batch, time, bands, channels) EMG feature map.

    The features of each band are pooled with its two circular neighbours
    (roll by -1, 0, +1 around the electrode ring, as rotation-invariant MLPs of
    emg2qwerty do), then every band has its own two-layer MLP; the band outputs
    are concatenated, layer-normed and classified per frame.
    """

    def __init__(self, bands: int = 16, channels: int = 8, hidden: int = 8, num_classes: int = 16):
        super().__init__()
        self.bands = bands
        self.band_mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(channels, hidden), nn.ReLU(), nn.Linear(hidden, hidden)) for _ in range(bands)
        )
        self.norm = nn.LayerNorm(bands * hidden)
        self.classifier = nn.Linear(bands * hidden, num_classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        pooled = roll_bands(features, -1) + features + roll_bands(features, 1)
        outputs = [mlp(pooled[:, :, band, :]) for band, mlp in enumerate(self.band_mlps)]
        return self.classifier(self.norm(torch.cat(outputs, dim=-1)))


def build_bandwise_mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = BandwiseMlp().eval()
    return model, (torch.randn(1, 8, 16, 8),)
