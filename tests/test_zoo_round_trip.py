"""Round trip through the real Arm pipeline on the zoo: FX -> e-graph -> FX with no rewrites.

eqsat is installed with no rulesets and told to write its extraction back
even though it is not cheaper, so every graph really goes through the bridge
and back. The lowering must not notice: same delegates, no CPU fallback, the
same Vela cycles, and bit-identical outputs under the TOSA reference model.
"""

from __future__ import annotations

import pytest

from benchmarks.zoo import ZOO
from eqsat.compare import compare

ROUND_TRIP_MODELS = [
    "small-convnet",
    "emg-conv1d-stem",
    "tds-conv1d",
    "emg-branch-fusion",
    "attention-permute",
    "ds-cnn-kws",
    "mobilenet-v1-025-vww",
    "resnet8",
    "shufflenet-v2",
    "unet-skip",
]
"""Ten models whose lowering is quick enough for the default run; the rest of the zoo runs with -m slow."""
SLOW_MODELS = [name for name in ZOO if name not in ROUND_TRIP_MODELS]
TARGETS = ["ethos-u55-128", "ethos-u85-256"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "model", ROUND_TRIP_MODELS + [pytest.param(name, marks=pytest.mark.slow) for name in SLOW_MODELS]
)
def test_round_trip_without_rewrites_changes_nothing(model, target, tmp_path):
    module, example_inputs = ZOO[model].build()
    result = compare(model, module, example_inputs, target, workdir=tmp_path, rules=(), merge_duplicates=False, accept="always")
    assert result.reports, "the installed pass never ran"
    assert all(r["fallback"] is None for r in result.reports), [r["fallback"] for r in result.reports]
    assert all(r["changed"] for r in result.reports), "the pass did not write its graph back"
    assert result.optimized.delegates == result.stock.delegates
    assert result.optimized.cpu_ops == result.stock.cpu_ops == []
    assert result.optimized.cycles_npu == result.stock.cycles_npu
    assert result.optimized.cycles_total == result.stock.cycles_total
    assert result.bit_exact, result.mismatch
