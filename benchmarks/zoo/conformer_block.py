"""Conformer block (Gulati et al. 2020) on a subsampled EMG sequence."""

import torch
from torch import nn


class MultiHeadSelfAttention(nn.Module):
    """Self-attention; one qkv linear split into heads by reshape + permute."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, sequence: torch.Tensor) -> torch.Tensor:
        batch, time, dim = sequence.shape
        qkv = self.qkv(self.norm(sequence))
        qkv = qkv.reshape(batch, time, 3, self.num_heads, self.head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        weights = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        heads = (weights @ v).permute(0, 2, 1, 3).reshape(batch, time, dim)
        return self.out(heads)


class ConvolutionModule(nn.Module):
    """Conformer conv module: pointwise+GLU, depthwise conv, BN, SiLU, pointwise."""

    def __init__(self, dim: int, kernel_size: int = 7):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.pointwise_in = nn.Conv1d(dim, 2 * dim, kernel_size=1)
        self.glu = nn.GLU(dim=1)
        self.depthwise = nn.Conv1d(
            dim, dim, kernel_size, padding=kernel_size // 2, groups=dim, bias=False
        )
        self.batch_norm = nn.BatchNorm1d(dim)
        self.activation = nn.SiLU()
        self.pointwise_out = nn.Conv1d(dim, dim, kernel_size=1)

    def forward(self, sequence: torch.Tensor) -> torch.Tensor:
        channels_first = self.norm(sequence).permute(0, 2, 1)
        hidden = self.glu(self.pointwise_in(channels_first))
        hidden = self.activation(self.batch_norm(self.depthwise(hidden)))
        return self.pointwise_out(hidden).permute(0, 2, 1)


class ConformerBlock(nn.Module):
    """Conformer layer trimmed to its two characteristic modules: MHSA and conv.

    The full layer sandwiches these between two half-step feed-forward
    modules and ends in a layer norm. Those are left out to keep lowering
    quick: each layer norm decomposes into a chain of about ten quantized ops.
    """

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.attention = MultiHeadSelfAttention(dim, num_heads)
        self.conv = ConvolutionModule(dim)

    def forward(self, sequence: torch.Tensor) -> torch.Tensor:
        sequence = sequence + self.attention(sequence)
        return sequence + self.conv(sequence)


class EmgConformer(nn.Module):
    """Conv1d subsampling of raw EMG, one conformer block, per-step classifier."""

    def __init__(
        self,
        emg_channels: int = 8,
        dim: int = 32,
        num_heads: int = 4,
        num_classes: int = 16,
    ):
        super().__init__()
        self.subsample = nn.Conv1d(
            emg_channels, dim, kernel_size=3, stride=2, padding=1
        )
        self.block = ConformerBlock(dim, num_heads)
        self.classifier = nn.Linear(dim, num_classes)

    def forward(self, emg: torch.Tensor) -> torch.Tensor:
        sequence = self.subsample(emg).permute(0, 2, 1)
        return self.classifier(self.block(sequence))


def build_conformer_block() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = EmgConformer().eval()
    return model, (torch.randn(1, 8, 64),)
