"""eqsat.rules.rescale: one test per law that it fires, one where its guard fails, and soundness on TOSA RESCALE semantics."""

from __future__ import annotations

import math

import pytest
import torch
from executorch.exir.dialects._ops import ops as exir_ops
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from eqsat.rules import StopReason
from eqsat.rules.rescale import rescale
from tests.graphs import GraphBuilder, tosa_lowering
from tests.rules import tosa_reference
from tests.rules.harness import Saturated, law_fires_in, saturated_stress_graph

TOSA = exir_ops.backend.tosa
RESCALE, TRANSPOSE, CONCAT = TOSA.RESCALE.default, TOSA.TRANSPOSE.default, TOSA.CONCAT.default

SOUNDNESS = settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
"""Every soundness property: 100 cases, the same ones on every run."""

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)
narrow = st.sampled_from([torch.int8, torch.int16])
zero_points = st.sampled_from([-128, -127, -1, 0, 1, 126, 127]) | st.integers(-128, 127)
"""int8 zero points, at the ends of the range and next to 0 on purpose."""


def weighted(**weights: int) -> st.SearchStrategy[str]:
    """One of the names, drawn in proportion to its weight: a generator states how often it aims at each case."""
    return st.sampled_from([name for name, weight in weights.items() for _ in range(weight)])


def zero_point_for(dtype: torch.dtype, drawn: int) -> int:
    """TOSA: only an int8 tensor has a zero point (ERROR_IF otherwise)."""
    return drawn if dtype == torch.int8 else 0


@pytest.fixture(autouse=True)
def tosa_context():
    with tosa_lowering():
        yield


def const_shape(g, values):
    return g.call(TOSA.CONST_SHAPE.default, list(values))


def slice_(g, x, start, size):
    return g.call(TOSA.SLICE.default, x, const_shape(g, start), const_shape(g, size))


def reshape(g, x, shape):
    return g.call(TOSA.RESHAPE.default, x, const_shape(g, shape))


# ---------------------------------------------------------------- rescale-identity


def test_rescale_identity_fires():
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    r = g.call(RESCALE, x, torch.int8, [1.0], -7, -7)
    s = Saturated(g.output(r), rescale)
    assert s.fired("rescale-identity") >= 1
    assert s.class_of(r) == s.class_of(x)


@pytest.mark.parametrize(
    "reason, out_dtype, scale, in_zp, out_zp",
    [
        ("zero-points-differ", torch.int8, 1.0, 0, 1),
        ("scale-not-one", torch.int8, 1.0 + 2**-20, 0, 0),
        ("dtype-changes", torch.int32, 1.0, 0, 0),
    ],
)
def test_rescale_identity_does_not_fire(reason, out_dtype, scale, in_zp, out_zp):
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    r = g.call(RESCALE, x, out_dtype, [scale], in_zp, out_zp)
    s = Saturated(g.output(r), rescale)
    assert s.fired("rescale-identity") == 0, reason
    assert s.class_of(r) != s.class_of(x)


def test_rescale_identity_does_not_fire_per_channel():
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    r = g.call(RESCALE, x, torch.int8, [1.0, 1.0, 1.0], 0, 0)
    s = Saturated(g.output(r), rescale)
    assert s.fired("rescale-identity") == 0


# measured: the law fires in 66 of 100 cases; the share stated is 0.1 less
@law_fires_in(0.56, "rescale-identity")
@SOUNDNESS
@given(
    shape=shapes,
    dtype=narrow,
    zp=zero_points,
    other_zp=zero_points,
    case=weighted(identity=6, half=1, double=1, near_one=1, zero_point_moves=1, dtype_changes=1),
)
def test_rescale_identity_is_sound(shape, dtype, zp, other_zp, case):
    """Identities, and the near misses each guard excludes: a scale of 1/2, 2 or 1 + 2^-25, a moved zero point, another dtype."""
    with tosa_lowering():
        scale = {"half": 0.5, "double": 2.0, "near_one": 1.0 + 2**-25}.get(case, 1.0)
        out_dtype = {torch.int8: torch.int16, torch.int16: torch.int8}[dtype] if case == "dtype_changes" else dtype
        in_zp = zero_point_for(dtype, zp)
        out_zp = zero_point_for(out_dtype, other_zp if case == "zero_point_moves" and other_zp != zp else in_zp)
        g = GraphBuilder()
        x = g.input("x", shape, dtype)
        r = g.call(RESCALE, x, out_dtype, [scale], in_zp, out_zp)
        tosa_reference.assert_every_extraction_agrees(Saturated(g.output(r), rescale))


# ---------------------------------------------------------------- rescale-rescale-exact


def two_rescales(shape, dtype, first_scale, second_scale, in_zp=3, out_zp=-5, out_dtype=torch.int8, mid_dtype=torch.int32):
    g = GraphBuilder()
    x = g.input("x", shape, dtype)
    first = first_scale if isinstance(first_scale, list) else [first_scale]
    wide = g.call(RESCALE, x, mid_dtype, first, in_zp, 0)
    return g, x, g.call(RESCALE, wide, out_dtype, [second_scale], 0, out_zp)


def test_rescale_rescale_exact_fires():
    g, x, out = two_rescales((2, 3), torch.int8, 8.0, 0.37)
    s = Saturated(g.output(out), rescale)
    assert s.fired("rescale-rescale-exact-int8") == 1
    fused = [t for t in s.terms_of(out) if t.op == "Rescale" and t.args == (s.class_of(x),)]
    assert len(fused) == 1 and fused[0].attrs[2] == tuple(v - 3 for v in bridge_rescale_shifts([0.37]))  # 8 == 2^3


@pytest.mark.parametrize(
    "reason, first_scale, second_scale",
    [
        ("first-scale-not-an-integer", 1.5, 0.37),
        ("first-scale-not-a-power-of-two", 3.0, 0.37),
        ("first-scale-fractional", 0.5, 0.37),
        ("would-saturate-int32", 2.0**16, 0.37),
        ("fused-shift-too-small", 4.0, 2.0**14),
    ],
)
def test_rescale_rescale_exact_does_not_fire(reason, first_scale, second_scale):
    g, x, out = two_rescales((2, 3), torch.int8, first_scale, second_scale)
    s = Saturated(g.output(out), rescale)
    assert s.fired("rescale-rescale-exact-int8") == 0, reason
    assert not any(t.op == "Rescale" and t.args == (s.class_of(x),) for t in s.terms_of(out))


def test_rescale_rescale_exact_does_not_fire_after_a_per_channel_first_rescale():
    """Each channel of the first scales by its own 2^k: no single fused shift exists."""
    g, x, out = two_rescales((2, 3), torch.int8, [2.0, 4.0, 8.0], 0.37)
    s = Saturated(g.output(out), rescale)
    assert s.fired("rescale-rescale-exact-int8") == 0
    assert not any(t.op == "Rescale" and t.args == (s.class_of(x),) for t in s.terms_of(out))


@pytest.mark.parametrize("mid_dtype", [torch.int8, torch.int16])
def test_rescale_rescale_exact_does_not_fire_through_a_narrow_intermediate(mid_dtype):
    """The first rescale clamps to int8 or int16; the fused one would not."""
    g, x, out = two_rescales((2, 3), torch.int8, 8.0, 0.37, mid_dtype=mid_dtype)
    s = Saturated(g.output(out), rescale)
    assert s.fired("rescale-rescale-exact-int8") == 0


@pytest.mark.parametrize("exponent, fires", [(14, True), (15, True), (16, False)])
def test_rescale_rescale_exact_int16_at_the_exponent_bound(exponent, fires):
    """int16 at the guard's bound k <= 15 (the second scale leaves a fused shift >= 17)."""
    g, x, out = two_rescales((2, 3), torch.int16, 2.0**exponent, 2.0 ** -(exponent + 4), in_zp=0, out_zp=0)
    s = Saturated(g.output(out), rescale)
    assert (s.fired("rescale-rescale-exact-int16") == 1) == fires


@st.composite
def first_rescales(draw, channels: int) -> list[float]:
    """The scales of a first rescale to the wide intermediate: mostly an exact 2^k, k in 0..15 (int16's large k
    included on purpose), sometimes just outside (k in -2, -1, 16, 17), per channel with a different k per channel,
    or not a power of two (1.5 * 2^k, 3 * 2^k): each case a fusion guard must refuse."""
    exponent = draw(st.integers(0, 15) | st.sampled_from([13, 14, 15]))
    case = draw(weighted(power_of_two=14, outside=2, per_channel=2, fraction=1, not_power_of_two=1))
    if case == "outside":
        return [2.0 ** draw(st.sampled_from([-2, -1, 16, 17]))]
    if case == "per_channel" and channels > 1:
        exponents = draw(st.lists(st.integers(0, 8), min_size=channels, max_size=channels, unique=channels <= 9))
        return [2.0**k for k in exponents]
    return [{"fraction": 1.5, "not_power_of_two": 3.0}.get(case, 1.0) * 2.0**exponent]


def second_scale(first: list[float]) -> st.SearchStrategy[float]:
    """A scale for the second rescale: mostly one that undoes most of the first (the fused shift stays >= 17),
    sometimes anything in [2^-24, 2^8]."""
    return st.one_of(
        st.floats(2.0**-10, 2.0**4).map(lambda f: f / max(first)),
        st.floats(2.0**-10, 2.0**4).map(lambda f: f / max(first)),
        st.floats(2.0**-10, 2.0**4).map(lambda f: f / max(first)),
        st.floats(2.0**-24, 2.0**8),
    )


@st.composite
def two_rescale_graphs(draw, per_channel_second: bool):
    """x (int8 or int16) -> RESCALE to a wide type (int32, sometimes int8 or int16: it clamps) -> RESCALE, the second
    per-tensor or per-channel."""
    shape = draw(shapes)
    if per_channel_second or draw(st.booleans()):
        shape = (*shape[:-1], shape[-1] + 1)  # at least two channels
    dtype = draw(narrow)
    mid_dtype = draw(weighted(int32=9, narrow=1))
    mid_dtype = torch.int32 if mid_dtype == "int32" else draw(narrow)
    out_dtype = draw(st.sampled_from([torch.int8, torch.int16, torch.int32]))
    first = draw(first_rescales(shape[-1]))
    second = draw(st.lists(second_scale(first), min_size=shape[-1], max_size=shape[-1])) if per_channel_second else [draw(second_scale(first))]
    g = GraphBuilder()
    x = g.input("x", shape, dtype)
    wide = g.call(RESCALE, x, mid_dtype, first, zero_point_for(dtype, draw(zero_points)), 0)
    out = g.call(RESCALE, wide, out_dtype, second, 0, zero_point_for(out_dtype, draw(zero_points)))
    graph_module = g.output(out)
    assume(tosa_reference.is_legal(graph_module))
    return graph_module


# measured: the law fires in 55 of 100 cases; the share stated is 0.1 less
@law_fires_in(0.45, "rescale-rescale-exact")
@SOUNDNESS
@given(data=st.data())
def test_rescale_rescale_exact_is_sound(data):
    with tosa_lowering():
        tosa_reference.assert_every_extraction_agrees(Saturated(data.draw(two_rescale_graphs(per_channel_second=False)), rescale))


# ---------------------------------------------------------------- data movement through a rescale


def test_transpose_through_rescale_fires():
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    t = g.call(TRANSPOSE, g.call(RESCALE, x, torch.int32, [0.3], 1, 0), [0, 3, 1, 2])
    s = Saturated(g.output(t), rescale)
    assert s.fired("transpose-through-rescale") >= 1
    assert any(term.op == "Rescale" for term in s.terms_of(t))


def test_transpose_through_per_channel_rescale_fires_when_channels_stay_last():
    g = GraphBuilder()
    x = g.input("x", (2, 3, 4), torch.int32)
    t = g.call(TRANSPOSE, g.call(RESCALE, x, torch.int8, [0.1, 0.2, 0.3, 0.4], 0, 0), [1, 0, 2])
    s = Saturated(g.output(t), rescale)
    assert s.fired("transpose-through-per-channel-rescale") >= 1


def test_transpose_through_per_channel_rescale_does_not_fire_when_channels_move():
    g = GraphBuilder()
    x = g.input("x", (2, 4, 4), torch.int32)
    t = g.call(TRANSPOSE, g.call(RESCALE, x, torch.int8, [0.1, 0.2, 0.3, 0.4], 0, 0), [0, 2, 1])
    s = Saturated(g.output(t), rescale)
    assert s.fired("transpose-through-per-channel-rescale") == 0
    assert s.fired("transpose-through-rescale") == 0
    assert not any(term.op == "Rescale" for term in s.terms_of(t))


def test_slice_through_rescale_fires():
    g = GraphBuilder()
    x = g.input("x", (4, 6))
    cut = slice_(g, g.call(RESCALE, x, torch.int8, [0.7], 2, -1), [1, 2], [2, 3])
    s = Saturated(g.output(cut), rescale)
    assert s.fired("slice-through-rescale") >= 1


def test_slice_through_per_channel_rescale_fires_when_every_channel_is_kept():
    g = GraphBuilder()
    x = g.input("x", (4, 3), torch.int32)
    cut = slice_(g, g.call(RESCALE, x, torch.int8, [0.1, 0.2, 0.3], 0, 0), [1, 0], [2, 3])
    s = Saturated(g.output(cut), rescale)
    assert s.fired("slice-through-per-channel-rescale") >= 1


def test_reshape_through_rescale_fires():
    g = GraphBuilder()
    x = g.input("x", (2, 3, 4))
    r = reshape(g, g.call(RESCALE, x, torch.int8, [0.6], 0, 4), [4, 6])
    s = Saturated(g.output(r), rescale)
    assert s.fired("reshape-through-rescale") >= 1
    assert any(term.op == "Rescale" for term in s.terms_of(r))


def test_slice_through_per_channel_rescale_does_not_fire_when_channels_are_cut():
    g = GraphBuilder()
    x = g.input("x", (4, 3), torch.int32)
    cut = slice_(g, g.call(RESCALE, x, torch.int8, [0.1, 0.2, 0.3], 0, 0), [1, 0], [2, 2])
    s = Saturated(g.output(cut), rescale)
    assert s.fired("slice-through-per-channel-rescale") == 0
    assert s.fired("slice-through-rescale") == 0


def test_reshape_through_per_channel_rescale_fires_when_the_last_dim_stays():
    g = GraphBuilder()
    x = g.input("x", (2, 3, 4), torch.int32)
    r = reshape(g, g.call(RESCALE, x, torch.int8, [0.1, 0.2, 0.3, 0.4], 0, 0), [6, 4])
    s = Saturated(g.output(r), rescale)
    assert s.fired("reshape-through-per-channel-rescale") >= 1


def test_reshape_through_per_channel_rescale_does_not_fire_when_the_last_dim_changes():
    g = GraphBuilder()
    x = g.input("x", (2, 3, 4), torch.int32)
    r = reshape(g, g.call(RESCALE, x, torch.int8, [0.1, 0.2, 0.3, 0.4], 0, 0), [3, 8])
    s = Saturated(g.output(r), rescale)
    assert s.fired("reshape-through-per-channel-rescale") == 0
    assert s.fired("reshape-through-rescale") == 0


def test_concat_of_rescales_fires():
    g = GraphBuilder()
    a, b = g.input("a", (2, 3)), g.input("b", (2, 5))
    joined = g.call(CONCAT, [g.call(RESCALE, a, torch.int32, [0.25], 1, 0), g.call(RESCALE, b, torch.int32, [0.25], 1, 0)], axis=1)
    s = Saturated(g.output(joined), rescale)
    assert s.fired("concat-of-rescales") == 1


@pytest.mark.parametrize("reason, scale_b, zp_b", [("scales-differ", 0.5, 1), ("zero-points-differ", 0.25, 2)])
def test_concat_of_rescales_does_not_fire_on_different_rescales(reason, scale_b, zp_b):
    g = GraphBuilder()
    a, b = g.input("a", (2, 3)), g.input("b", (2, 5))
    joined = g.call(CONCAT, [g.call(RESCALE, a, torch.int32, [0.25], 1, 0), g.call(RESCALE, b, torch.int32, [scale_b], zp_b, 0)], axis=1)
    s = Saturated(g.output(joined), rescale)
    assert s.fired("concat-of-rescales") == 0, reason


def test_concat_of_per_channel_rescales_does_not_fire_along_the_channels():
    g = GraphBuilder()
    a, b = g.input("a", (2, 2), torch.int32), g.input("b", (2, 2), torch.int32)
    joined = g.call(CONCAT, [g.call(RESCALE, a, torch.int8, [0.1, 0.2], 0, 0), g.call(RESCALE, b, torch.int8, [0.1, 0.2], 0, 0)], axis=1)
    s = Saturated(g.output(joined), rescale)
    assert s.fired("concat-of-rescales") == 0


def test_concat_of_rescales_stays_linear_on_hundreds_of_same_parameter_rescales():
    """300 RESCALEs with identical parameters feeding 37 concats of 2..16 inputs. The former per-arity rules
    (one rescale atom per input, all sharing the parameters) joined ~n^k candidates: at 60 rescales and
    arities 2..4 one round ran out of 6 GB. Bound: the loaded e-graph plus at most 6 rows (terms and
    analysis facts: the hoisted concat and rescale, their types, element, offset and source rows) per
    concat input and per concat."""
    s, concats, loaded_size = saturated_stress_graph("rescale", rescale)
    assert s.result.stop_reason == StopReason.SATURATED
    assert s.result.iterations <= 3
    assert s.fired("concat-of-rescales") == concats
    assert s.enode_count <= loaded_size + 6 * (300 + concats)


@st.composite
def box_of(draw, shape, keep_last: bool | None = None):
    """A box of a tensor of this shape: anywhere, or (keep_last) whole along the last dim, or (keep_last False) cutting it."""
    start, size = [], []
    for dim, extent in enumerate(shape):
        last = dim == len(shape) - 1
        if last and keep_last:
            begin, length = 0, extent
        elif last and keep_last is False:
            length = draw(st.integers(1, extent - 1))
            begin = draw(st.integers(0, extent - length))
        else:
            begin = draw(st.integers(0, extent - 1))
            length = draw(st.integers(1, extent - begin))
        start.append(begin)
        size.append(length)
    return start, size


def factorizations(n: int, rank: int) -> list[list[int]]:
    """Every shape of the given rank with n elements."""
    if rank == 1:
        return [[n]]
    return [[d, *rest] for d in range(1, n + 1) if n % d == 0 for rest in factorizations(n // d, rank - 1)]


@st.composite
def reshape_of(draw, shape, keep_last: bool):
    """A new shape for a tensor of this shape that keeps its last dim, or one that does not (None if there is none)."""
    total = math.prod(shape)
    candidates = [s for rank in range(1, 5) for s in factorizations(total, rank) if (s[-1] == shape[-1]) == keep_last]
    return draw(st.sampled_from(candidates)) if candidates else None


source_dtypes = st.sampled_from([torch.int8, torch.int16, torch.int32])


def movement_outputs(g, r, other, shape, data, per_channel: bool):
    """Transposes, slices, reshapes and concats of r (and of other, rescaled alike): for a per-channel r, each both
    in a form that keeps the channel axis last and whole, and in one that does not (where the shape has one)."""
    rank = len(shape)
    leading = list(data.draw(st.permutations(range(rank - 1))))
    outputs = [
        g.call(TRANSPOSE, r, [*leading, rank - 1]),
        g.call(TRANSPOSE, r, list(data.draw(st.permutations(range(rank))))),
        slice_(g, r, *data.draw(box_of(shape, keep_last=True if per_channel else None))),
        slice_(g, r, *data.draw(box_of(shape))),
        reshape(g, r, data.draw(reshape_of(shape, keep_last=True))),
        g.call(CONCAT, [r, other], axis=data.draw(st.integers(0, rank - 1))),
    ]
    if per_channel:
        outputs.append(slice_(g, r, *data.draw(box_of(shape, keep_last=False))))
    if rank > 1:
        outputs.append(g.call(CONCAT, [other, r], axis=data.draw(st.integers(0, rank - 2))))
    breaking = data.draw(reshape_of(shape, keep_last=False))
    if breaking is not None:
        outputs.append(reshape(g, r, breaking))
    return outputs


# measured: each of these laws fires in 100 of 100 cases; the share stated is 0.1 less
@law_fires_in(0.9, "transpose-through-rescale", "slice-through-rescale", "reshape-through-rescale", "concat-of-rescales")
@SOUNDNESS
@given(data=st.data(), shape=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple), dtype=source_dtypes)
def test_data_movement_through_rescale_is_sound(data, shape, dtype):
    """transpose, slice, reshape and concat across a per-tensor rescale of an int8, int16 or int32 tensor."""
    with tosa_lowering():
        g = GraphBuilder()
        params = (torch.int8, [data.draw(st.floats(2.0**-12, 4.0))], zero_point_for(dtype, data.draw(zero_points)), data.draw(zero_points))
        r, other = g.call(RESCALE, g.input("x", shape, dtype), *params), g.call(RESCALE, g.input("y", shape, dtype), *params)
        outputs = movement_outputs(g, r, other, shape, data, per_channel=False)
        tosa_reference.assert_every_extraction_agrees(Saturated(g.output(*outputs), rescale))


# measured: each of the first four laws fires in 100 of 100 cases, concat-of-rescales in 58 (a rank-1 tensor has no
#   axis but the channels); the shares stated are 0.1 less
@law_fires_in(
    0.9,
    "transpose-through-per-channel-rescale",
    "slice-through-per-channel-rescale",
    "slice-of-channels-through-per-channel-rescale",
    "reshape-through-per-channel-rescale",
)
@law_fires_in(0.48, "concat-of-rescales")
@SOUNDNESS
@given(data=st.data(), shape=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple), dtype=source_dtypes)
def test_data_movement_through_per_channel_rescale_is_sound(data, shape, dtype):
    """transpose, slice, reshape and concat across a per-channel rescale, in forms that keep the channel axis last and
    whole and in forms that do not (the guards must refuse those)."""
    with tosa_lowering():
        shape = (*shape[:-1], shape[-1] + 1)  # at least two channels
        g = GraphBuilder()
        scales = data.draw(st.lists(st.floats(2.0**-12, 4.0), min_size=shape[-1], max_size=shape[-1]))
        params = (torch.int8, scales, zero_point_for(dtype, data.draw(zero_points)), data.draw(zero_points))
        r, other = g.call(RESCALE, g.input("x", shape, dtype), *params), g.call(RESCALE, g.input("y", shape, dtype), *params)
        outputs = movement_outputs(g, r, other, shape, data, per_channel=True)
        tosa_reference.assert_every_extraction_agrees(Saturated(g.output(*outputs), rescale))


def test_rescale_laws_saturate():
    g = GraphBuilder()
    x = g.input("x", (1, 2, 3, 4))
    wide = g.call(RESCALE, g.call(TRANSPOSE, x, [0, 2, 3, 1]), torch.int32, [2.0], 0, 0)
    narrow_again = g.call(RESCALE, slice_(g, wide, [0, 0, 0, 0], [1, 3, 4, 1]), torch.int8, [0.3], 0, 2)
    back = g.call(TRANSPOSE, reshape(g, narrow_again, [1, 3, 4, 1]), [0, 3, 1, 2])
    s = Saturated(g.output(back), rescale)
    assert s.result.stop_reason == StopReason.SATURATED
    assert s.fired("rescale-rescale-exact-int8") >= 1


# ---------------------------------------------------------------- per-channel identity and fusion


def test_per_channel_rescale_identity_fires():
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    r = g.call(RESCALE, x, torch.int8, [1.0, 1.0, 1.0], 4, 4)
    s = Saturated(g.output(r), rescale)
    assert s.fired("per-channel-rescale-identity") >= 1
    assert s.class_of(r) == s.class_of(x)


@pytest.mark.parametrize(
    "reason, scales, in_zp, out_zp",
    [("one-channel-not-one", [1.0, 0.5, 1.0], 0, 0), ("zero-points-differ", [1.0, 1.0, 1.0], 0, 1)],
)
def test_per_channel_rescale_identity_does_not_fire(reason, scales, in_zp, out_zp):
    g = GraphBuilder()
    x = g.input("x", (2, 3))
    r = g.call(RESCALE, x, torch.int8, scales, in_zp, out_zp)
    s = Saturated(g.output(r), rescale)
    assert s.fired("per-channel-rescale-identity") == 0, reason
    assert s.class_of(r) != s.class_of(x)


# measured: the law fires in 76 of 100 cases; the share stated is 0.1 less
@law_fires_in(0.66, "per-channel-rescale-identity")
@SOUNDNESS
@given(data=st.data(), shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), zp=zero_points, other_zp=zero_points)
def test_per_channel_rescale_identity_is_sound(data, shape, zp, other_zp):
    with tosa_lowering():
        channels = shape[-1] + 1
        shape = (*shape[:-1], channels)
        case = data.draw(weighted(identity=3, one_channel_not_one=1, zero_point_moves=1))
        scales = [1.0] * channels
        if case == "one_channel_not_one":
            scales[data.draw(st.integers(0, channels - 1))] = data.draw(st.sampled_from([0.5, 2.0, 1.0 + 2**-25]))
        g = GraphBuilder()
        x = g.input("x", shape)
        r = g.call(RESCALE, x, torch.int8, scales, zp, other_zp if case == "zero_point_moves" and other_zp != zp else zp)
        tosa_reference.assert_every_extraction_agrees(Saturated(g.output(r), rescale))


def per_channel_after_rescale(shape, first_scale, second_scales, in_zp=3, out_zp=-5, out_dtype=torch.int8, dtype=torch.int8):
    g = GraphBuilder()
    x = g.input("x", shape, dtype)
    wide = g.call(RESCALE, x, torch.int32, [first_scale], in_zp, 0)
    return g, x, g.call(RESCALE, wide, out_dtype, list(second_scales), 0, out_zp)


def test_rescale_per_channel_rescale_exact_fires():
    g, x, out = per_channel_after_rescale((2, 3), 8.0, [0.37, 0.2, 0.011])
    s = Saturated(g.output(out), rescale)
    assert s.fired("rescale-per-channel-rescale-exact-int8") == 1
    fused = [t for t in s.terms_of(out) if t.op == "Rescale" and t.args == (s.class_of(x),)]
    second_shifts = bridge_rescale_shifts([0.37, 0.2, 0.011])
    assert len(fused) == 1 and fused[0].attrs[2] == tuple(v - 3 for v in second_shifts)
    assert fused[0].attrs[3:5] == (3, -5)


def bridge_rescale_shifts(scales):
    from eqsat.ops.rescale import multipliers_and_shifts

    return multipliers_and_shifts(scales)[1]


@pytest.mark.parametrize(
    "reason, first_scale, second_scales",
    [
        ("first-scale-not-a-power-of-two", 3.0, [0.37, 0.2]),
        ("first-scale-fractional", 0.5, [0.37, 0.2]),
        ("one-channel-shift-too-small", 4.0, [0.37, 2.0**14]),
    ],
)
def test_rescale_per_channel_rescale_exact_does_not_fire(reason, first_scale, second_scales):
    g, x, out = per_channel_after_rescale((2, 2), first_scale, second_scales)
    s = Saturated(g.output(out), rescale)
    assert s.fired("rescale-per-channel-rescale-exact-int8") == 0, reason
    assert not any(t.op == "Rescale" and t.args == (s.class_of(x),) for t in s.terms_of(out))


# measured: the law fires in 59 of 100 cases, and in 47 once the zoo's library models were added (hypothesis draws
# about one choice in twenty from constants of the project's loaded modules); the share stated is 0.1 under the lower
@law_fires_in(0.37, "rescale-per-channel-rescale-exact")
@SOUNDNESS
@given(data=st.data())
def test_rescale_per_channel_rescale_exact_is_sound(data):
    with tosa_lowering():
        tosa_reference.assert_every_extraction_agrees(Saturated(data.draw(two_rescale_graphs(per_channel_second=True)), rescale))


# ---------------------------------------------------------------- slices that cut the channels of a per-channel rescale


def test_slice_of_channels_through_per_channel_rescale_fires_with_the_window_of_multipliers():
    """The box starts at row 2 and channel 1: the window starts at the channel, not at the first dim."""
    g = GraphBuilder()
    x = g.input("x", (4, 5), torch.int32)
    scales = [0.1, 0.2, 0.3, 0.4, 0.5]
    r = g.call(RESCALE, x, torch.int8, scales, 0, 3)
    cut = slice_(g, r, [2, 1], [2, 3])
    s = Saturated(g.output(cut), rescale)
    assert s.fired("slice-of-channels-through-per-channel-rescale") == 1
    moved = [t for t in s.terms_of(cut) if t.op == "Rescale"]
    multipliers, shifts = bridge_fx_multipliers(scales)
    assert [t.attrs[1:3] for t in moved] == [(multipliers[1:4], shifts[1:4])]


def bridge_fx_multipliers(scales):
    from eqsat.ops.rescale import multipliers_and_shifts

    return multipliers_and_shifts(scales)


def test_slice_of_channels_through_per_channel_rescale_does_not_fire_when_every_channel_is_kept():
    g = GraphBuilder()
    x = g.input("x", (4, 3), torch.int32)
    cut = slice_(g, g.call(RESCALE, x, torch.int8, [0.1, 0.2, 0.3], 0, 0), [1, 0], [2, 3])
    s = Saturated(g.output(cut), rescale)
    assert s.fired("slice-of-channels-through-per-channel-rescale") == 0
    assert s.fired("slice-through-per-channel-rescale") == 1


# measured: the law fires in 100 of 100 cases; the share stated is 0.1 less
@law_fires_in(0.9, "slice-of-channels-through-per-channel-rescale")
@SOUNDNESS
@given(data=st.data(), shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), dtype=source_dtypes)
def test_slice_of_channels_through_per_channel_rescale_is_sound(data, shape, dtype):
    with tosa_lowering():
        shape = (*shape[:-1], shape[-1] + 1)
        g = GraphBuilder()
        x = g.input("x", shape, dtype)
        scales = data.draw(st.lists(st.floats(2.0**-12, 0.5), min_size=shape[-1], max_size=shape[-1]))
        r = g.call(RESCALE, x, torch.int8, scales, zero_point_for(dtype, data.draw(zero_points)), data.draw(zero_points))
        start, size = data.draw(box_of(shape, keep_last=False))
        tosa_reference.assert_every_extraction_agrees(Saturated(g.output(slice_(g, r, start, size)), rescale))


# ---------------------------------------------------------------- split-shared-operand-rescale

MUL, ADD = TOSA.MUL.default, TOSA.ADD.default


def test_split_shared_operand_rescale_fires():
    g = GraphBuilder()
    r = g.call(RESCALE, g.input("x", (1, 4, 8)), torch.int32, [1.0], -26, 0)
    s = Saturated(g.output(g.call(RESCALE, g.call(MUL, r, r), torch.int8, [0.001], 0, 0)), rescale)
    assert s.fired("split-shared-operand-rescale") == 1


def test_split_shared_operand_rescale_does_not_fire_on_two_rescales_or_two_sources():
    g = GraphBuilder()
    x, y = g.input("x", (1, 4, 8)), g.input("y", (1, 4, 8))
    apart = g.call(MUL, g.call(RESCALE, x, torch.int32, [1.0], -26, 0), g.call(RESCALE, x, torch.int32, [1.0], -26, 0))
    other = g.call(MUL, g.call(RESCALE, x, torch.int32, [1.0], 3, 0), g.call(RESCALE, y, torch.int32, [1.0], 3, 0))
    s = Saturated(g.output(apart, other), rescale)
    assert s.fired("split-shared-operand-rescale") == 0


# every case reads one RESCALE in both slots, so the law fires in all; the share stated is 0.1 less
@law_fires_in(0.9, "split-shared-operand-rescale")
@SOUNDNESS
@given(
    shape=shapes,
    dtype=narrow,
    zp=zero_points,
    scale=st.sampled_from([1.0, 0.5, 2.0**-11]) | st.floats(2.0**-12, 4.0),
    op=st.sampled_from(["MUL", "ADD", "SUB"]),
)
def test_split_shared_operand_rescale_is_sound(shape, dtype, zp, scale, op):
    """x (int8 or int16, over its full range) rescaled to int32 and read by both operand slots of a MUL, ADD or SUB,
    rescaled back to int8."""
    with tosa_lowering():
        g = GraphBuilder()
        r = g.call(RESCALE, g.input("x", shape, dtype), torch.int32, [scale], zero_point_for(dtype, zp), 0)
        both = g.call(getattr(TOSA, op).default, r, r)
        out = g.call(RESCALE, both, torch.int8, [2.0**-12], 0, 0)
        tosa_reference.assert_every_extraction_agrees(Saturated(g.output(out), rescale))
