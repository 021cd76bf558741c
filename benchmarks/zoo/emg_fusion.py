"""Two-branch EMG + IMU gesture model fused by channel concatenation."""

import torch
from torch import nn


def conv1d_bn_relu(in_channels: int, out_channels: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv1d(
            in_channels,
            out_channels,
            kernel_size=3,
            stride=stride,
            padding=1,
            bias=False,
        ),
        nn.BatchNorm1d(out_channels),
        nn.ReLU(),
    )


class EmgImuFusion(nn.Module):
    """Multi-sensor wearable classifier (EMG + IMU feature-level fusion).

    Each sensor gets its own conv1d stack; the two feature maps are
    concatenated along channels and fused by a further conv1d before a mean
    over time (AdaptiveAvgPool1d would stay on the CPU) and the classifier.
    """

    def __init__(
        self, emg_channels: int = 8, imu_channels: int = 6, num_gestures: int = 9
    ):
        super().__init__()
        self.emg_branch = nn.Sequential(
            conv1d_bn_relu(emg_channels, 16, stride=2), conv1d_bn_relu(16, 16, stride=1)
        )
        self.imu_branch = nn.Sequential(
            conv1d_bn_relu(imu_channels, 8, stride=2), conv1d_bn_relu(8, 8, stride=1)
        )
        self.fusion = conv1d_bn_relu(16 + 8, 32, stride=2)
        self.classifier = nn.Linear(32, num_gestures)

    def forward(self, emg: torch.Tensor, imu: torch.Tensor) -> torch.Tensor:
        fused = torch.cat([self.emg_branch(emg), self.imu_branch(imu)], dim=1)
        return self.classifier(self.fusion(fused).mean(dim=-1))


def build_emg_fusion() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = EmgImuFusion().eval()
    return model, (torch.randn(1, 8, 64), torch.randn(1, 6, 64))
