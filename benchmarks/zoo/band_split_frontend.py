"""Band-split spectrogram front end: 5-D band views, shifted-band context, band selection per projection."""

import torch
from torch import nn


def shift_bands(bands: torch.Tensor, shift: int) -> torch.Tensor:
    """torch.roll(bands, shift, dims=3), written as two slices and a concat."""
    count = bands.shape[3]
    cut = (-shift) % count
    return torch.cat([bands[:, :, :, cut:], bands[:, :, :, :cut]], dim=3)


class BandSplitFrontEnd(nn.Module):
    """A band-split (BSRNN-style) front end over a (batch, frames, channels, freq) spectrogram.

    The frequency axis is viewed as (bands, band_width), a 5-D tensor. Each
    band is given its two neighbours as context, built up one shifted copy at
    a time along the feature axis; the low and the high bands, selected by
    slicing the band axis, each get their own projection, and the projected
    bands are flattened per frame and mixed by a linear layer.
    """

    def __init__(self, channels: int = 2, bands: int = 8, band_width: int = 8, low_bands: int = 3, dim: int = 16, out: int = 32):
        super().__init__()
        self.bands, self.band_width, self.low_bands = bands, band_width, low_bands
        self.low_proj = nn.Linear(3 * band_width, dim)
        self.high_proj = nn.Linear(3 * band_width, dim)
        self.mix = nn.Linear(channels * bands * dim, out)

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        b, t, c, f = spec.shape
        bands = spec.reshape(b, t, c, self.bands, self.band_width)
        context = bands
        for shift in (1, -1):
            context = torch.cat([context, shift_bands(bands, shift)], dim=-1)
        low = torch.relu(self.low_proj(context[:, :, :, : self.low_bands]))
        high = torch.relu(self.high_proj(context[:, :, :, self.low_bands :]))
        projected = torch.cat([low, high], dim=3)
        return self.mix(projected.reshape(b, t, -1))


def build_band_split_frontend() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = BandSplitFrontEnd().eval()
    return model, (torch.randn(1, 48, 2, 64),)
