"""Self-attention over a CNN feature map, to and from token layout via permutes."""

import torch
from torch import nn


class AttentionPermute(nn.Module):
    """Non-local / ViT-style attention block on a (B, C, H, W) feature map.

    The map is flattened and permuted to (B, HW, C) tokens, split into heads
    with reshape + permute, attended, merged back and permuted to (B, C, H, W)
    for a residual add, as in the attention blocks of hybrid CNN-transformers.
    """

    def __init__(self, channels: int = 16, num_heads: int = 2):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = channels // num_heads
        self.scale = self.head_dim**-0.5
        self.norm = nn.LayerNorm(channels)
        self.query = nn.Linear(channels, channels)
        self.key = nn.Linear(channels, channels)
        self.value = nn.Linear(channels, channels)
        self.out = nn.Linear(channels, channels)

    def split_heads(self, tokens: torch.Tensor) -> torch.Tensor:
        batch, length, _ = tokens.shape
        heads = tokens.reshape(batch, length, self.num_heads, self.head_dim)
        return heads.permute(0, 2, 1, 3)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = features.shape
        tokens = self.norm(features.flatten(2).permute(0, 2, 1))
        q = self.split_heads(self.query(tokens))
        k = self.split_heads(self.key(tokens))
        v = self.split_heads(self.value(tokens))
        weights = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        heads = (weights @ v).permute(0, 2, 1, 3)
        merged = heads.reshape(batch, height * width, channels)
        attended = self.out(merged).permute(0, 2, 1)
        return features + attended.reshape(batch, channels, height, width)


def build_attention_permute() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = AttentionPermute().eval()
    return model, (torch.randn(1, 16, 8, 8),)
