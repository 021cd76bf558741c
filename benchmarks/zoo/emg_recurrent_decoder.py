"""EMG encoder with a GRU decoder over the subsampled sequence."""

import torch
from torch import nn


class EmgRecurrentDecoder(nn.Module):
    def __init__(self, emg_channels: int = 8, hidden: int = 16, num_classes: int = 8):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv1d(emg_channels, hidden, kernel_size=8, stride=8), nn.ReLU()
        )
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, emg: torch.Tensor) -> torch.Tensor:
        steps = self.encoder(emg).permute(0, 2, 1)
        outputs, _ = self.gru(steps)
        return self.classifier(outputs)


def build_emg_recurrent_decoder() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = EmgRecurrentDecoder().eval()
    return model, (torch.randn(1, 8, 64),)
