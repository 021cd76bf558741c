"""The term language: one tensor sort, one constructor per modelled op.

Data movement is modelled explicitly, because that is what the rules rewrite:
TRANSPOSE, CONCAT, SLICE, RESHAPE and PAD, and RESCALE with its exact integer
multipliers and shifts. TABLE has a term of its own: it is elementwise in
its input, but its lookup table is a second operand that never moves. Ops
whose output element depends only on
the input elements at the same (broadcast) position are `Elementwise`. Every
other op is `Opaque`: it carries a key that names its target, its non-tensor
arguments and its output type, so two opaque terms are equal exactly when the
ops are the same pure op on the same inputs.

`Node(i)` is the handle of the i-th loaded FX node. The bridge unions it with
the node's term; it is never extracted.

Attributes are `i64`, permutations and shapes `Vec[i64]` (DESIGN §3).
"""

from __future__ import annotations

from egglog import EGraph, Expr, String, StringLike, Vec, function, i64, i64Like, method


class Tensor(Expr, egg_sort="Tensor"):
    @method(egg_fn="Node", unextractable=True)
    @classmethod
    def node(cls, index: i64Like) -> Tensor:
        """The FX node with this index in the loaded graph."""

    @method(egg_fn="Element", unextractable=True)
    @classmethod
    def element(cls, tensors: Vec[Tensor], index: i64Like) -> Tensor:
        """tensors[index], as a term: rules join on it to reach the operands of
        a concat or an elementwise op. (A query that reaches them with the
        `vec-get` primitive instead makes egglog join every candidate first and
        filter afterwards, which is quadratic or worse.)"""

    @method(egg_fn="Opaque")
    @classmethod
    def opaque(cls, key: StringLike, args: Vec[Tensor]) -> Tensor:
        """An op the rules know nothing about, applied to its tensor arguments."""

    @method(egg_fn="Elementwise")
    @classmethod
    def elementwise(cls, key: StringLike, args: Vec[Tensor]) -> Tensor:
        """A per-element op (with broadcasting) applied to its tensor operands."""

    @method(egg_fn="Transpose")
    def transpose(self, perm: Vec[i64]) -> Tensor:
        """TOSA TRANSPOSE: output dim i is input dim perm[i]."""

    @method(egg_fn="Concat")
    @classmethod
    def concat(cls, parts: Vec[Tensor], axis: i64Like) -> Tensor:
        """TOSA CONCAT of the parts along axis."""

    @method(egg_fn="Slice")
    def slice(self, start: Vec[i64], size: Vec[i64]) -> Tensor:
        """TOSA SLICE: the box [start, start + size) of the input."""

    @method(egg_fn="Reshape")
    def reshape(self, shape: Vec[i64]) -> Tensor:
        """TOSA RESHAPE to shape, row-major."""

    @method(egg_fn="Reduce")
    @classmethod
    def reduce(cls, key: StringLike, x: Tensor, axis: i64Like) -> Tensor:
        """A reduction of x along axis that keeps the dim (size 1): REDUCE_SUM/REDUCE_MAX/...

        key names the op and its other arguments, as an opaque key does.
        """

    @method(egg_fn="Pad")
    def pad(self, padding: Vec[i64], value: i64Like) -> Tensor:
        """TOSA PAD: padding is [before_0, after_0, before_1, after_1, ...], one pair per dim;
        the new elements are value (for a quantized tensor, its zero point)."""

    @method(egg_fn="Table")
    @classmethod
    def table(cls, key: StringLike, x: Tensor, lut: Tensor) -> Tensor:
        """TOSA TABLE: out[i] = lookup of x[i] in lut, elementwise in x; lut is the constant table operand.

        key names the op as an opaque key does (it fixes the output dtype and
        the node the bridge copies when it writes a new TABLE); rules move
        data movement across x and never touch lut.
        """

    @method(egg_fn="Rescale")
    def rescale(
        self, dtype: StringLike, multipliers: Vec[i64], shifts: Vec[i64], in_zp: i64Like, out_zp: i64Like, tag: i64Like
    ) -> Tensor:
        """TOSA RESCALE (scale32, SINGLE_ROUND, signed) to dtype.

        out[..., c] = clamp(((x[..., c] - in_zp) * multipliers[c] + 2^(shifts[c] - 1)) >> shifts[c]) + out_zp)
        with c = 0 for one multiplier (per-tensor) and the last dim otherwise
        (per-channel). multipliers/shifts are what the TOSA serializer computes
        from the float scales, so laws can reason about rounding exactly.
        tag keeps duplicate rescales of one tensor apart (the bridge gives each
        node its own unless duplicates are merged: Vela fuses a RESCALE into
        each consumer separately); laws carry it through and never read it.
        """


@function(egg_fn="shape", merge=lambda old, new: old)
def shape(x: Tensor) -> Vec[i64]:
    """The static shape of a tensor term (the analysis)."""


@function(egg_fn="dtype", merge=lambda old, new: old)
def dtype(x: Tensor) -> String:
    """The element type of a tensor term, as torch spells it ("torch.int8")."""


CONSTRUCTORS = (
    Tensor.node,
    Tensor.element,
    Tensor.opaque,
    Tensor.elementwise,
    Tensor.transpose,
    Tensor.concat,
    Tensor.slice,
    Tensor.reshape,
    Tensor.rescale,
    Tensor.reduce,
    Tensor.pad,
    Tensor.table,
)
ANALYSES = (shape, dtype)


def declare(egraph: EGraph) -> None:
    """Declare the whole language in egraph, so raw program text can use it."""
    for fn in CONSTRUCTORS + ANALYSES:
        egraph._callable_to_egg(fn)
