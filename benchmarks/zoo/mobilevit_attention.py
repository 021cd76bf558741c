"""MobileViT block (Mehta & Rastegari 2021): local conv, patch attention, fold."""

import torch
from torch import nn


def conv_bn_silu(
    in_channels: int, out_channels: int, kernel_size: int, stride: int = 1
) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=kernel_size // 2,
            bias=False,
        ),
        nn.BatchNorm2d(out_channels),
        nn.SiLU(),
    )


class PatchAttention(nn.Module):
    """Pre-norm multi-head self-attention over (batch * patch_area, num_patches, dim).

    MobileViT follows this with an MLP; it is left out to keep lowering fast.
    """

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        groups, length, dim = tokens.shape
        q, k, v = self.qkv(self.norm(tokens)).chunk(3, dim=-1)
        q, k, v = (
            t.reshape(groups, length, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
            for t in (q, k, v)
        )
        weights = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        heads = (weights @ v).permute(0, 2, 1, 3).reshape(groups, length, dim)
        return tokens + self.out(heads)


class MobileVitBlock(nn.Module):
    """Unfold a feature map into 2x2 patches, attend across patches, fold back, fuse."""

    def __init__(self, channels: int, dim: int, num_heads: int, patch_size: int = 2):
        super().__init__()
        self.patch_size = patch_size
        self.local = nn.Sequential(
            conv_bn_silu(channels, channels, 3), nn.Conv2d(channels, dim, 1, bias=False)
        )
        self.attention = PatchAttention(dim, num_heads)
        self.project = conv_bn_silu(dim, channels, 1)
        self.fuse = conv_bn_silu(2 * channels, channels, 3)

    def unfold(self, features: torch.Tensor) -> torch.Tensor:
        """(B, D, H, W) -> (B * P, N, D) with P pixels per patch and N patches."""
        batch, dim, height, width = features.shape
        p = self.patch_size
        rows, cols = height // p, width // p
        patches = features.reshape(batch * dim * rows, p, cols, p).transpose(1, 2)
        patches = patches.reshape(batch, dim, rows * cols, p * p).transpose(1, 3)
        return patches.reshape(batch * p * p, rows * cols, dim)

    def fold(self, tokens: torch.Tensor, height: int, width: int) -> torch.Tensor:
        """Inverse of `unfold`: (B * P, N, D) -> (B, D, H, W)."""
        p = self.patch_size
        rows, cols = height // p, width // p
        area, num_patches, dim = tokens.shape
        batch = area // (p * p)
        patches = tokens.reshape(batch, p * p, num_patches, dim).transpose(1, 3)
        patches = patches.reshape(batch * dim * rows, cols, p, p).transpose(1, 2)
        return patches.reshape(batch, dim, height, width)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        height, width = features.shape[-2:]
        tokens = self.attention(self.unfold(self.local(features)))
        global_features = self.project(self.fold(tokens, height, width))
        return self.fuse(torch.cat([features, global_features], dim=1))


class MobileVitPatchAttention(nn.Module):
    """Strided conv stem, one MobileViT block, pooled linear classifier."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.stem = conv_bn_silu(3, 16, 3, stride=2)
        self.block = MobileVitBlock(channels=16, dim=32, num_heads=4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(16, num_classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.pool(self.block(self.stem(image)))
        return self.classifier(torch.flatten(features, 1))


def build_mobilevit_attention() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = MobileVitPatchAttention().eval()
    return model, (torch.randn(1, 3, 32, 32),)
