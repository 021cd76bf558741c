"""The zoo's library models (benchmarks/zoo/library_models.py): torchvision imports beside the CPU torch without
patching anything installed, and each architecture builds from its library with seeded weights and runs."""

from __future__ import annotations

import pytest
import torch

from benchmarks.zoo import LIBRARY_SPECS
from benchmarks.zoo.library_models import TORCHVISION_OPS_WITH_FAKES, import_torchvision


def test_torchvision_imports_beside_the_cpu_torch_with_the_schemas_its_fake_kernels_need():
    torchvision = import_torchvision()
    assert torchvision.models.mobilenet_v2.__module__.startswith("torchvision.models")
    assert all(hasattr(torch.ops.torchvision, op) for op in TORCHVISION_OPS_WITH_FAKES)


@pytest.mark.parametrize("spec", LIBRARY_SPECS, ids=lambda spec: spec.name)
def test_a_library_model_builds_from_its_library_with_seeded_weights_and_runs(spec):
    module, inputs = spec.build()
    again, _ = spec.build()
    assert type(module).__module__.startswith(("torchvision.", "benchmarks.zoo.library_models"))
    with torch.no_grad():
        out = module(*inputs)
        assert torch.isfinite(out).all()
        assert torch.equal(out, again(*inputs))  # seeded: the same weights every build
