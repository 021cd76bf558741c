"""Architectures as their libraries define them (torchvision, torch.nn), at microcontroller sizes, with seeded
random weights: code nobody here wrote, for the zoo to be judged on too (issue 28 §4). Nothing is downloaded.

torchvision from the package index is a CUDA build (`0.28.0+cu130`, the release for torch 2.13). Beside the CPU
torch its compiled ops (`torchvision/_C.so`, linked against libtorch_cuda) cannot load, and `import torchvision`
then fails in `torchvision/_meta_registrations.py`, which registers fake kernels for `torchvision::nms` and `qnms`
whether or not the library that defines them loaded (upstream pytorch/vision#9085). `import_torchvision` loads
`_C.so` when it can; when it cannot, it declares just those two operator schemas (no kernel: calling them raises)
in a `torch.library` fragment before the import, as `_C.so` would have. Nothing installed is patched, and the
models here use none of torchvision's compiled ops.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

import torch

SEED = 0
TORCHVISION_OPS_WITH_FAKES = ("nms", "qnms")
"""The torchvision operators whose fake kernels torchvision registers on import, loaded or not."""

_fragments: list[torch.library.Library] = []
"""The schema fragment, kept alive for the process: a torch.library.Library deregisters its ops when collected."""


@functools.cache
def import_torchvision() -> ModuleType:
    """torchvision, importable beside a CPU torch whose build its compiled ops do not match (see the module docstring).
    Raises ImportError when torchvision is not installed (pip install -e ".[zoo]")."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError('torchvision is not installed: pip install -e ".[zoo]"')
    compiled = Path(spec.submodule_search_locations[0]) / "_C.so"
    try:
        torch.ops.load_library(str(compiled))
    except (OSError, RuntimeError):
        fragment = torch.library.Library("torchvision", "FRAGMENT")
        for op in TORCHVISION_OPS_WITH_FAKES:
            if not hasattr(torch.ops.torchvision, op):
                fragment.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _fragments.append(fragment)
    import torchvision

    return torchvision


def _image_classifier(name: str, size: int, **kwargs) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(SEED)
    model = getattr(import_torchvision().models, name)(weights=None, **kwargs).eval()
    return model, (torch.randn(1, 3, size, size),)


def build_tv_mobilenet_v2() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """torchvision MobileNetV2 at width 0.35 on 96x96 images, two classes (the visual-wake-words size)."""
    return _image_classifier("mobilenet_v2", 96, width_mult=0.35, num_classes=2)


def build_tv_mnasnet() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """torchvision MNASNet at depth multiplier 0.5 on 96x96 images, two classes."""
    return _image_classifier("mnasnet0_5", 96, num_classes=2)


def build_tv_squeezenet() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """torchvision SqueezeNet 1.1 on 64x64 images, ten classes (fire modules: 1x1 and 3x3 expands concatenated)."""
    return _image_classifier("squeezenet1_1", 64, num_classes=10)


def build_tv_efficientnet_b0() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """torchvision EfficientNet-B0 on 64x64 images, ten classes (SiLU, squeeze-and-excitation)."""
    return _image_classifier("efficientnet_b0", 64, num_classes=10)


def build_tv_regnet_x_400mf() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """torchvision RegNetX-400MF on 64x64 images, ten classes (grouped convolutions, residual ADDs)."""
    return _image_classifier("regnet_x_400mf", 64, num_classes=10)


class _DecoderLayer(torch.nn.Module):
    """torch.nn.TransformerDecoderLayer (d_model 64, 4 heads, feed-forward 128, batch first) over 16 target and 24
    memory tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.TransformerDecoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)

    def forward(self, target: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        return self.layer(target, memory)


def build_transformer_decoder_layer() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(SEED)
    return _DecoderLayer().eval(), (torch.randn(1, 16, 64), torch.randn(1, 24, 64))
