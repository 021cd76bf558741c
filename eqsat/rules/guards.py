"""Named side conditions shared by the rules.

Each guard is a list of egglog facts to put in a rule's query. Fallible
arithmetic (vector indexing) lives here, in queries, never in actions: a
failing primitive in a query only means "no match" (DESIGN §3).
"""

from __future__ import annotations

from egglog import Bool, Fact, UnstableFn, Vec, eq, i64

from eqsat.terms import Tensor

MAX_CONCAT_ARITY = 16
"""The most inputs of a concat that transpose-through-concat moves a transpose into; concat-flatten builds
concats of at most one more. A bound on the concats the laws build, not on the rules: each is one rule."""


def is_identity_perm(perm: Vec[i64]) -> list[Fact]:
    """perm == [0, 1, ..., n-1]."""
    return [eq(perm).to(perm.length().range())]


def same_length(a: Vec[i64], b: Vec[i64]) -> list[Fact]:
    return [eq(a.length()).to(b.length())]


def single_operand(operands: Vec[Tensor], operand: Tensor) -> list[Fact]:
    """operands == [operand]. Queries cannot match inside a Vec, so bind through `element`."""
    return [eq(operands.length()).to(i64(1)), eq(operand).to(Tensor.element(operands, i64(0)))]


def zeros_like(v: Vec[i64]) -> Vec[i64]:
    """[0, ..., 0] as long as v (an expression for queries: 0 * each element)."""
    return v.map(UnstableFn[i64, i64](i64.__mul__, i64(0)))


def is_zeros(v: Vec[i64]) -> list[Fact]:
    """v == [0, ..., 0]."""
    return [eq(v).to(zeros_like(v))]


def selects_whole_input(start: Vec[i64], size: Vec[i64], axis: i64, offset: i64, input_shape: Vec[i64]) -> list[Fact]:
    """The box (start, size) of a concat along axis is exactly the input at offset, whose shape is input_shape."""
    return [eq(size).to(input_shape), eq(start).to(zeros_like(size).set(axis, offset))]


def within_one_input(begin: i64, length: i64, offset: i64, extent: i64) -> list[Fact]:
    """[begin, begin + length) lies inside the input [offset, offset + extent) of a concat."""
    return [offset <= begin, begin + length <= offset + extent]


def starts_inside(begin: i64, offset: i64, extent: i64) -> list[Fact]:
    """begin is an element of the input [offset, offset + extent) (so the input is not empty)."""
    return [offset <= begin, begin < offset + extent]


def adjacent_along(axis: i64, start_a: Vec[i64], size_a: Vec[i64], start_b: Vec[i64], size_b: Vec[i64]) -> list[Fact]:
    """Box b starts where box a ends along axis, and the two boxes are the same on every other dim."""
    return [
        eq(start_b).to(start_a.set(axis, start_a[axis] + size_a[axis])),
        eq(size_b.set(axis, size_a[axis])).to(size_a),
    ]


def ends_after(end: i64, offset: i64, extent: i64) -> list[Fact]:
    """A box ending at end reaches past the input [offset, offset + extent) of a concat."""
    return [offset + extent < end]


def is_padding_of_rank(padding: Vec[i64], rank: int) -> list[Fact]:
    """padding holds one (before, after) pair per dim of a rank-`rank` tensor."""
    return [eq(padding.length()).to(i64(2 * rank))]


def inside_unpadded(start: Vec[i64], size: Vec[i64], padding: Vec[i64], dims: Vec[i64], rank: int) -> list[Fact]:
    """The box (start, size) of pad(x, padding), x of shape dims, reads only elements of x:
    padding[2i] <= start[i] and start[i] + size[i] <= padding[2i] + dims[i] on every dim i."""
    facts: list[Fact] = [eq(start.length()).to(i64(rank)), eq(dims.length()).to(i64(rank)), *is_padding_of_rank(padding, rank)]
    for i in range(rank):
        facts += [padding[2 * i] <= start[i], start[i] + size[i] <= padding[2 * i] + dims[i]]
    return facts


def unpadded_start(start: Vec[i64], padding: Vec[i64], rank: int) -> Vec[i64]:
    """start[i] - padding[2i] on every dim: a box of pad(x, padding) as a box of x. An expression for queries."""
    return Vec(*[start[i] - padding[2 * i] for i in range(rank)])


def two_operands(operands: Vec[Tensor], left: Tensor, right: Tensor) -> list[Fact]:
    """operands == [left, right], bound through the `element` handles (a join, not a vec-get filter)."""
    return [
        eq(operands.length()).to(i64(2)),
        eq(left).to(Tensor.element(operands, i64(0))),
        eq(right).to(Tensor.element(operands, i64(1))),
    ]


INT32 = "torch.int32"
"""The dtype of the wide intermediate that rescale fusion reasons about."""

NARROW_INPUTS = ("torch.int8", "torch.int16")
"""Input dtypes whose zero-point-adjusted values fit in 17 bits: |x - in_zp| < 2^16."""


def is_per_tensor(multipliers: Vec[i64]) -> list[Fact]:
    """The rescale has one multiplier and shift for the whole tensor."""
    return [eq(multipliers.length()).to(i64(1))]


def is_exact_one(multipliers: Vec[i64], shifts: Vec[i64]) -> list[Fact]:
    """Per-tensor multiplier * 2^-shift == 1 exactly: (v * 2^s + 2^(s-1)) >> s == v, so rounding is irrelevant."""
    return [*is_per_tensor(multipliers), eq(multipliers[0]).to(i64(1) << shifts[0])]


def is_exact_one_per_channel(multipliers: Vec[i64], shifts: Vec[i64]) -> list[Fact]:
    """A per-channel rescale whose every channel has multiplier * 2^-shift == 1 exactly: m[c] == 1 << s[c] for all c."""
    return [i64(1) < multipliers.length(), eq(multipliers).to(shifts.map(UnstableFn[i64, i64](i64.__lshift__, i64(1))))]


def is_identity_rescale(x_dtype, out_dtype, multipliers: Vec[i64], shifts: Vec[i64], in_zp: i64, out_zp: i64) -> list[Fact]:
    """RESCALE is the identity: same dtype (so the clamp never bites: x - zp + zp = x is in range),
    input zp == output zp, and the scale is exactly 1."""
    return [eq(out_dtype).to(x_dtype), eq(in_zp).to(out_zp), *is_exact_one(multipliers, shifts)]


def is_exact_power_of_two_scaling(multipliers: Vec[i64], shifts: Vec[i64], exponent: i64) -> list[Fact]:
    """Per-tensor multiplier * 2^-shift == 2^exponent, exponent >= 0: the rounding right shift drops only zero bits."""
    factor = multipliers[0] >> shifts[0]
    return [
        *is_per_tensor(multipliers),
        eq(multipliers[0] % (i64(1) << shifts[0])).to(i64(0)),
        i64(1) <= factor,
        eq(factor & (factor - 1)).to(i64(0)),
        eq(exponent).to(factor.log2()),
    ]


def fuses_exactly(exponent: i64, second_shift: i64) -> list[Fact]:
    """rescale(m2, s2) after an exact scaling by 2^k of a narrow (|v| < 2^16) input is rescale(m2, s2 - k):

    - the first never saturates its int32 output: |v| * 2^k < 2^16 * 2^15 = 2^31 (k <= 15);
    - the fused op meets TOSA's REQUIRE |v| < 2^(shift - 1) and 2 <= shift: s2 - k >= 17.
    Rounding: (v * 2^k * m2 + 2^(s2-1)) >> s2 == (v * m2 + 2^(s2-k-1)) >> (s2-k), exactly (divide by 2^k).
    """
    return [exponent <= i64(15), i64(17) <= second_shift - exponent]


def keeps_last_axis(perm: Vec[i64]) -> list[Fact]:
    """perm[rank - 1] == rank - 1: the channel axis of a per-channel rescale stays the last axis."""
    return [i64(0) < perm.length(), eq(perm[perm.length() - 1]).to(perm.length() - 1)]


def same_last_dim(a: Vec[i64], b: Vec[i64]) -> list[Fact]:
    """a and b end with the same extent (a per-channel rescale's channels line up)."""
    return [i64(0) < a.length(), i64(0) < b.length(), eq(a[a.length() - 1]).to(b[b.length() - 1])]


def concat_keeps_channels(axis: i64, dims: Vec[i64], multipliers: Vec[i64]) -> list[Fact]:
    """A rescale with these multipliers applies the same to every input of a concat along axis of tensors of shape dims:
    it is per-tensor, or axis is not the channel (last) axis. (One fact: axis + 1 < rank + 1 for per-tensor,
    axis + 1 < rank for per-channel.)"""
    return [axis + 1 < dims.length() + i64(2) - multipliers.length().min(i64(2))]


def table_operand_is_not_batched_mac_shape(dims: Vec[i64]) -> list[Fact]:
    """A TABLE may read a tensor of shape dims on Ethos-U85: dims is not [N, 1, 1, C] with N > 1.

    Vela miscompiles a TABLE fed by a MAC op whose operand is [N, 1, 1, C], N > 1
    (MLBEDSW-11805). Upstream's PropagateViewCopyPermute pass refuses any move that
    gives a TABLE's operand that shape (`tolerates_shape_after_move`), from the
    shape alone, whatever feeds it; so does this guard: a rule cannot see which op
    will feed the moved operand once other rules have run. One fact: dims is
    padded with zeros so that indexing it never fails, and the conjunction of
    rank == 4, dims[0] > 1, dims[1] == 1, dims[2] == 1 must be false.
    """
    padded = dims.append(Vec(i64(0), i64(0), i64(0)))
    rank = dims.length()
    batched_mac_shape = (
        rank.bool_ge(i64(4))
        & rank.bool_le(i64(4))
        & padded[0].bool_gt(i64(1))
        & padded[1].bool_ge(i64(1))
        & padded[1].bool_le(i64(1))
        & padded[2].bool_ge(i64(1))
        & padded[2].bool_le(i64(1))
    )
    return [eq(batched_mac_shape).to(Bool(False))]
