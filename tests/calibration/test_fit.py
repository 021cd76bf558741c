"""The memory-access model is the largest of one model per memory, as Vela's per-layer access estimate."""

import pytest

from eqsat.calibration.fit import Observation, binding, fit_access
from eqsat.extract.vela_cost import _linear

FORM = ("one", "elements", "weights")


def observation(i, elements, weights, cycles):
    return Observation("conv2d", {"one": 1.0, "elements": float(elements), "weights": float(weights)}, float(cycles), f"k{i}")


def test_each_memory_gets_its_own_piece_and_the_access_model_is_their_largest():
    shapes = [(e, w) for e in (64, 256, 1024, 4096) for w in (128, 1024, 8192, 32768)]
    sram = [observation(i, e, w, 0.25 * e) for i, (e, w) in enumerate(shapes)]
    flash = [observation(i, e, w, 1.0 * w) for i, (e, w) in enumerate(shapes)]
    largest = [observation(i, e, w, max(0.25 * e, w)) for i, (e, w) in enumerate(shapes)]
    model = fit_access(largest, {"sram": sram, "flash": flash}, [FORM])
    assert [p["memory"] for p in model["pieces"]] == ["sram", "flash"]
    assert model["mape"] == pytest.approx(0.0, abs=1e-6)
    assert max(_linear(p, {"one": 1.0, "elements": 4096.0, "weights": 128.0}) for p in model["pieces"]) == pytest.approx(1024.0)


def test_a_single_linear_model_of_the_largest_column_cannot_do_the_same():
    shapes = [(e, w) for e in (64, 256, 1024, 4096) for w in (128, 1024, 8192, 32768)]
    largest = [observation(i, e, w, max(0.25 * e, w)) for i, (e, w) in enumerate(shapes)]
    assert fit_access(largest, {}, [FORM])["mape"] > 5.0


def test_flash_is_fitted_where_it_binds_when_there_are_enough_such_samples():
    npu = {"k0": 100.0, "k1": 100.0, "k2": 100.0, "k3": 100.0, "k4": 100.0, "k5": 5000.0}
    found = [observation(i, 1, 1000, 1000) for i in range(5)] + [observation(5, 1, 1000, 50)]
    assert [o.key for o in binding(found, npu)] == ["k0", "k1", "k2", "k3", "k4"]
    assert len(binding(found[4:], npu)) == 2  # too few binding samples: all of them
