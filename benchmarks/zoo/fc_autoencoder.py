"""Dense autoencoder for anomaly detection (MLPerf Tiny AD reference, shrunk)."""

import torch
from torch import nn


def dense_bn_relu(in_features: int, out_features: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(in_features, out_features), nn.BatchNorm1d(out_features), nn.ReLU()
    )


class FcAutoencoder(nn.Module):
    """DCASE/ToyADMOS dense autoencoder with an 8-d bottleneck.

    The reference takes 5 stacked frames of 128 log-mels (640 values) and has
    four 128-unit dense-BN-ReLU layers on each side of the bottleneck; this
    version takes 5 x 32 = 160 values and has two 64-unit layers per side.
    """

    def __init__(
        self, input_features: int = 160, hidden: int = 64, bottleneck: int = 8
    ):
        super().__init__()
        self.encoder = nn.Sequential(
            dense_bn_relu(input_features, hidden),
            dense_bn_relu(hidden, hidden),
            dense_bn_relu(hidden, bottleneck),
        )
        self.decoder = nn.Sequential(
            dense_bn_relu(bottleneck, hidden),
            dense_bn_relu(hidden, hidden),
            nn.Linear(hidden, input_features),
        )

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(frames))


def build_fc_autoencoder() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = FcAutoencoder().eval()
    return model, (torch.randn(1, 160),)
